"""Issue 37's invariants: waiting requests in their pools' admission queues.

- **order**: every entry of a pool's queue is keyed by its own priority, then arrival, then
  requestId (so the queue's order, DynamoDB's sort-key order, is priority then arrival);
- **not inverted**: a request that waited and is admitted was not ahead-of-turn past a
  higher-priority entry of the same queue that still waits and would have fit in what it took (the
  same requester, pool, requirements and zone rule, a minCount no more than it launched);
- **nothing lost**: every request that set a deadline ends with a record and an event by its
  deadline plus the backstop's margin (the held copy comes back by the deadline; the sync ends one
  whose copy was lost BACKSTOP_MARGIN_SECONDS after it);
- **its team**: every entry names the requester of its request (fair sharing orders the waiting
  requests of one priority by that requester's quota's share; the quotas' weights are drawn, so
  the order the wakes follow varies by seed); a request that names a reservation is counted as
  its association, and left out;
- **waiting counted**: a sync run that finished every part counts as many requests waiting
  (`RequestsWaiting`) as the state table holds Waiting records right after it (nothing runs
  between the two).

No limit or quota overrun is the other invariants' (invariants.py, capacity_invariants.py): they
hold for waiting requests as for any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.accounting.admission_queue import entry_key, queue_partition
from capacity_launcher.domain.capacity.capacity_wait import BACKSTOP_MARGIN_SECONDS
from tests.simulation.operations import POOLS

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

ORDER = "an admission queue holds its entries by priority, then arrival"
NOT_INVERTED = "a waiting request is not admitted past a higher one that fits"
NOTHING_LOST = "a waiting request ends with a record and an event by its deadline"
COUNTED = "the sync counts every waiting request"
TEAM = "an admission queue entry names its request's requester"
# The deadline's slack: the backstop's margin, and a few minutes of the mapping and the sync.
LOST_AFTER_SECONDS = BACKSTOP_MARGIN_SECONDS + 300
ADMITTED = ("Fulfilled", "PartiallyFulfilled")


@dataclass(frozen=True)
class Entry:
    key: str
    request_id: str
    priority: int


class QueueInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.ledger = invariants.ledger
        self.checks = invariants.checks
        self._before: dict[str, list[Entry]] = {}

    def every_step(self) -> None:
        queues = {pool: self._queue(pool) for pool in self._pools()}
        self._not_inverted(queues)
        self._nothing_lost()
        self._before = queues

    def counted_waiting(self, counted: int, in_table: int) -> None:
        self.checks[COUNTED] += 1
        if counted != in_table:
            self.base._violate(
                COUNTED, f"the sync counted {counted} requests waiting; the table holds {in_table}"
            )

    def _pools(self) -> list[str]:
        return sorted({*POOLS, *self.base.catalog.pools})

    def _queue(self, pool: str) -> list[Entry]:
        entries = []
        for sk, item in sorted(self.world.partition(queue_partition(pool)).items()):
            request_id = str(item.get("requestId"))
            priority = int(item.get("priority", 0))
            arrival = datetime.fromisoformat(str(item.get("arrival")))
            self.checks[ORDER] += 1
            if sk != entry_key(priority, arrival, request_id):
                self.base._violate(ORDER, f"{pool}: entry {sk} is not keyed by its priority")
            entries.append(Entry(sk, request_id, priority))
            self._names_its_team(pool, request_id, item.get("requester"))
        return entries

    def _names_its_team(self, pool: str, request_id: str, named: Any) -> None:
        request = self.ledger.requests.get(request_id)
        body = request.body if request is not None else None
        if body is None or body.get("capacityReservation"):
            return
        self.checks[TEAM] += 1
        if named != body.get("requester"):
            self.base._violate(
                TEAM, f"{pool}: {request_id}'s entry names {named!r}, not {body.get('requester')!r}"
            )

    def _not_inverted(self, queues: dict[str, list[Entry]]) -> None:
        for pool, before in self._before.items():
            waiting_now = {e.request_id for e in queues.get(pool, [])}
            for at, admitted in enumerate(before):
                request = self.ledger.requests.get(admitted.request_id)
                if request is None or request.ended_step != self.base.step:
                    continue
                if request.status not in ADMITTED:
                    continue
                for ahead in before[:at]:
                    if ahead.priority <= admitted.priority or ahead.request_id not in waiting_now:
                        continue
                    self.checks[NOT_INVERTED] += 1
                    if _fits_in(self.ledger.requests.get(ahead.request_id), request):
                        self.base._violate(
                            NOT_INVERTED,
                            f"{pool}: {admitted.request_id} (priority {admitted.priority}) was"
                            f" admitted while {ahead.request_id} (priority {ahead.priority}),"
                            " which asks no more of the same, still waits",
                        )

    def _nothing_lost(self) -> None:
        now = self.world.now
        for request in self.ledger.requests.values():
            deadline = _deadline(request.body)
            if deadline is None or now <= deadline + LOST_AFTER_SECONDS:
                continue
            if request.request_id in self.base.dead or request.exposed_to_permanent_fault:
                continue
            self.checks[NOTHING_LOST] += 1
            if request.ended_at is not None:
                continue
            self.base._violate(
                NOTHING_LOST,
                f"{request.request_id}: no final record or event {now - deadline:.0f}s after its"
                f" deadline (waited: {request.waited}, delivered {request.deliveries}x)",
            )
            request.ended_at = now  # said once


def _deadline(body: dict[str, Any] | None) -> float | None:
    if not body or "waitForCapacityUntil" not in body:
        return None
    return datetime.fromisoformat(str(body["waitForCapacityUntil"])).timestamp()


def _fits_in(ahead: Any, admitted: Any) -> bool:
    """Whether the request ahead asks no more than the admitted one took, of the same."""
    if ahead is None or ahead.body is None or admitted.body is None:
        return False
    a, b = ahead.body, admitted.body
    same = ("requester", "nodePool", "requirements", "singleZone")
    if any(a.get(k) != b.get(k) for k in same):
        return False
    return int(a.get("minCount", 1)) <= len(admitted.final_instances)
