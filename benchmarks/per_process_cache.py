"""Karpenter's model, for comparison only: each worker remembers insufficient capacity in its own
memory, for the same TTL, and shares it with nobody. Everything else is the real launcher."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from capacity_launcher.domain.capacity.offerings import Turn
from capacity_launcher.domain.capacity.single_flight import Evidence, Standing
from capacity_launcher.service import wiring
from capacity_launcher.service.launch import LaunchBatch
from capacity_launcher.settings import get_settings


@dataclass(frozen=True)
class RememberedOffering:
    reason: str
    expires_at: float


class InMemoryUnavailable:
    """The launcher's UnavailableCache port, held in one worker's memory."""

    def __init__(self, ttl_seconds: int) -> None:
        self._ttl = ttl_seconds
        self._entries: dict[str, RememberedOffering] = {}
        self._lock = threading.Lock()

    def current(self) -> dict[str, RememberedOffering]:
        now = time.time()
        with self._lock:
            return {k: e for k, e in self._entries.items() if e.expires_at > now}

    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> list[RememberedOffering]:
        expires_at = time.time() + self._ttl
        with self._lock:
            for key, reason, _message in offerings:
                self._entries[key] = RememberedOffering(reason, expires_at)
            return list(self._entries.values())

    def clear(self, offering: str) -> None:
        with self._lock:
            self._entries.pop(offering, None)

    # No single flight: every worker asks EC2 about whatever its own memory does not hold.
    claim_seconds = 0

    def evidence(self) -> Evidence:
        return Evidence(time.time())

    def take_turn(self, keys: Sequence[str], token: str | None = None) -> Turn:
        return Turn(token or "", free=frozenset(keys))

    def standing(self, keys: Sequence[str]) -> dict[str, Standing | None]:
        return dict.fromkeys(keys)

    def end_turn(self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()) -> None:
        return None


def per_process_launch_batch(ttl_seconds: int) -> LaunchBatch:
    """The composition root's launch batch, with the ICE cache swapped for a private one."""
    adapters = wiring.Adapters(get_settings())
    ports = dataclasses.replace(
        adapters.launch_ports(), unavailable=InMemoryUnavailable(ttl_seconds)
    )
    return adapters.launch_batch(adapters.idempotency_config(), ports)
