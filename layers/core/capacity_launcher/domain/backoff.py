"""Bounded, jittered waits between retries: in-process ones, and a message's return to the queue.

Jitter keeps workers that failed together from retrying together; the bound keeps every wait short.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# In-process retries of a transient fault: a few tenths of a second, a handful of times.
IN_PROCESS_RETRIES = 3
IN_PROCESS_BASE_SECONDS = 0.2
IN_PROCESS_CAP_SECONDS = 2.0
# A message handed back to the queue is visible again after a minute or two, not the queue's
# 720 s. With the launch queue's maxReceiveCount (5), its four hand-backs wait 120-240 s in all:
# a fault that clears within two minutes (a throttling spell, a brown-out) never dead-letters it.
HAND_BACK_BASE_SECONDS = 16
HAND_BACK_CAP_SECONDS = 128
# What a fault may last and still be transient for the launch queue (tests hold the two together).
TRANSIENT_FAULT_SECONDS = 120


def jittered(
    attempt: int,
    base: float,
    cap: float,
    rng: Callable[[], float] = random.random,
) -> float:
    """Wait before retry `attempt` (1, 2, ...): between half and all of min(cap, base * 2^(n-1))."""
    ceiling = min(cap, base * 2.0 ** max(attempt - 1, 0))
    return float(ceiling / 2 + rng() * ceiling / 2)


def in_process_delay(attempt: int, rng: Callable[[], float] = random.random) -> float:
    return jittered(attempt, IN_PROCESS_BASE_SECONDS, IN_PROCESS_CAP_SECONDS, rng)


def hand_back_seconds(receive_count: int, rng: Callable[[], float] = random.random) -> int:
    """Visibility timeout for a message handed back after its `receive_count`-th receive."""
    return max(
        1, round(jittered(receive_count, HAND_BACK_BASE_SECONDS, HAND_BACK_CAP_SECONDS, rng))
    )
