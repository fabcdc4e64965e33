"""One request's lifecycle in one delivery: the state it is in, and the transitions allowed.

Recovery (`recovery.py`) brings each request to its first state before any pool is visited; each
phase then moves it by a named transition (`Progress.mark_leased`, `mark_launching`, ...), which
refuses a source state the table below does not allow (`LifecycleError`: a fault of the code,
never of the request). docs/architecture.md walks a request, and a redelivery, through them.

    arrives              lease phase             after
    ---------            -----------             -----
    FRESH      ─┐        ┌─ LEASED ───────────── LAUNCHING ─── ENDED
    RECOVERED  ─┤        ├─ UNLEASED ─ (replayed) ┘
    WAITING    ─┼────────┼─ SETTLED ───────────────────────── ENDED
    REPLAYING  ─┤        ├─ CHANGED    resolved again (once), arrives anew
    PASSED_ON  ─┘        └─ PASSED_ON  arrives at the next pool
    put to wait: WAITING (the delivery ends; its record is Waiting): from an arrival state
    (scheduled capacity, or every offering known dry), or from UNLEASED (its quota or its pool's
    limits refused it: it waits in its pool's queue, issue 37)

The exit rule of a pool visit reads the trail: a request that leaves a pool without its lease
phase having read its lease there (`lease_read`) gives back what an earlier delivery may have
leased there, unless it is on its first delivery or intents name it (`pipeline.give_back_earlier`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Phase(Enum):
    """Where a request is in this delivery (a state, one at a time)."""

    # Arrival states: what recovery found, or how it came to the pool it is in now.
    FRESH = "Fresh"  # its first delivery: nothing of it (record, intent, lease) is stored
    RECOVERED = "Recovered"  # a later delivery, nothing left unsent: an earlier lease may be open
    # Waits for scheduled capacity or for room (a Waiting record: earlier, or now).
    WAITING = "Waiting"
    REPLAYING = "Replaying"  # intents an earlier delivery left, finished first in their pool
    PASSED_ON = "PassedOn"  # the pool it was in passed it on to this one
    CHANGED = "Changed"  # its pool or class was applied since it was resolved: resolved again
    # The lease phase's outcomes in the pool it is in.
    LEASED = "Leased"  # holds room here: an earlier delivery's lease taken up, or a new one
    UNLEASED = "Unleased"  # its lease here was read, and none holds room for it (refused, full)
    SETTLED = "Settled"  # an earlier delivery settled its lease: only its record is left
    # Launching and after.
    LAUNCHING = "Launching"  # an intent names it: EC2 may have instances for it
    ENDED = "Ended"  # its record is written


# How a request comes to a pool: the states its lease phase and the phases before it start from.
ARRIVED = frozenset({Phase.FRESH, Phase.RECOVERED, Phase.WAITING, Phase.PASSED_ON, Phase.CHANGED})
# Every state but Ended (PassedOn is also how a request arrives at the next pool).
_LIVE = frozenset(Phase) - {Phase.ENDED}

# Target state -> the states it may be reached from.
ALLOWED: Mapping[Phase, frozenset[Phase]] = {
    # Refused by its quota or its limits with nothing leased: it waits in its pool's queue.
    Phase.WAITING: ARRIVED | {Phase.UNLEASED},
    Phase.LEASED: ARRIVED | {Phase.REPLAYING, Phase.UNLEASED},
    Phase.UNLEASED: ARRIVED | {Phase.REPLAYING},
    Phase.SETTLED: ARRIVED | {Phase.REPLAYING, Phase.LAUNCHING},
    Phase.CHANGED: ARRIVED | {Phase.REPLAYING, Phase.UNLEASED},
    Phase.LAUNCHING: frozenset(
        {Phase.LEASED, Phase.UNLEASED, Phase.REPLAYING, Phase.LAUNCHING, Phase.SETTLED}
    ),
    Phase.PASSED_ON: _LIVE - {Phase.SETTLED},
    Phase.ENDED: _LIVE,
}

# What the lease phase leaves a request in once it read its lease in the pool.
LEASE_READ = frozenset({Phase.LEASED, Phase.UNLEASED, Phase.SETTLED})


class LifecycleError(RuntimeError):
    """A transition the lifecycle does not allow (a fault of the launcher's code)."""

    def __init__(self, request_id: str, source: Phase, target: Phase) -> None:
        allowed = ", ".join(sorted(p.value for p in ALLOWED[target]))
        super().__init__(
            f"request {request_id}: {source.value} -> {target.value} is not a transition "
            f"(allowed from: {allowed})"
        )
        self.source, self.target = source, target


def check(request_id: str, source: Phase, target: Phase) -> None:
    """Raise LifecycleError unless `target` may be reached from `source`."""
    if source not in ALLOWED[target]:
        raise LifecycleError(request_id, source, target)
