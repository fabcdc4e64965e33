"""Static NodePools' invariants (docs/static-capacity.md), judged at each quiescence: faults off,
the queue drained, the clock past every lease, the sync run.

- **Never over its replicas**: once the quiescence's sync ran, the static pool's live instances
  are at most its replicas (the sync terminated the extras; nothing it sent has launched yet).
- **Converges when capacity allows**: after one more sync and drain (two sync intervals in all),
  its live instances are `min(replicas, limits.instances)`. The pool launches a type no other
  operation dries or reserves (static_operations.py), so capacity always allows.
- **Only the sync launches into it**: a producer's request whose id is shaped as the sync's
  launches (`static-<pool>-...`) ends Rejected, having launched nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

AT_MOST = "a static pool is never over its replicas (quiescent)"
CONVERGES = "a static pool converges to its replicas within two syncs"
ONLY_THE_SYNC = "a request only shaped as the sync's static launch launches nothing"


def static_target(document: dict[str, Any]) -> tuple[int, int] | None:
    """(replicas, what it converges to) of a stored static pool's hub document; None: dynamic."""
    spec = document.get("spec", {})
    replicas = spec.get("replicas")
    if replicas is None:
        return None
    limit = (spec.get("limits") or {}).get("instances")
    return int(replicas), int(replicas) if limit is None else min(int(replicas), int(limit))


class StaticInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self._invariants = invariants

    def at_most(self, pool: str, live: int, replicas: int) -> None:
        self._invariants.checks[AT_MOST] += 1
        if live > replicas:
            self._invariants._violate(AT_MOST, f"{pool}: {live} live, replicas {replicas}")

    def converged(self, pool: str, live: int, target: int) -> None:
        self._invariants.checks[CONVERGES] += 1
        if live != target:
            self._invariants._violate(
                CONVERGES, f"{pool}: {live} live after two syncs, expected {target}"
            )

    def forged_refused(self, request_id: str, record: dict[str, Any] | None) -> None:
        self._invariants.checks[ONLY_THE_SYNC] += 1
        if record is None or record.get("status") != "Rejected" or record.get("instances"):
            status = None if record is None else record.get("status")
            self._invariants._violate(ONLY_THE_SYNC, f"{request_id}: {status}")
