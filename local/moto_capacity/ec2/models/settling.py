"""Which reservations `lifecycle.settle` must look at: the ones changed since it last looked, and
the ones whose next transition has come due; not every reservation on every call.

A backend's reservations are kept in a `ReservationTable`. Each reservation in one tells the
table's `Schedule` whenever one of its attributes is set (`CapacityReservation.__setattr__`).
After settle looks at a reservation, the schedule keeps it by the earliest moment at which
settle could move it again (`wake_at`): until then, and until one of its attributes is set,
looking at it again would do nothing. A Capacity Block, or a reservation with block extensions,
is looked at every time (what moves them includes its instances and its extensions' own
states). Settle looks at them in the order the table holds them, once each, as if it walked the
whole table: a reservation changed by another one's transition is looked at in the same call if
it comes later in that order, in the next call otherwise. The one moment read differently: the
end of a reservation's `pending` window is due by the moment settle was called for, where the
whole walk asked the clock again when it came to that reservation (microseconds later).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from moto_capacity.core.clock import aware

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .reservations import CapacityReservation

ACTIVE = "active"
ASSESSING = "assessing"
SCHEDULED = "scheduled"
PAYMENT_PENDING = "payment-pending"
CAPACITY_BLOCK = "capacity-block"
# `wake_at`'s answers besides a moment.
ALWAYS = "always"
NEVER = "never"


def wake_at(reservation: CapacityReservation, lag: Any) -> datetime | str:
    """The earliest moment at which `lifecycle._advance` could change `reservation` as it is now
    (`lag`: `END_DATE_SETTINGS.lag`), NEVER when no moment can, ALWAYS when it must be looked at
    on every call."""
    if reservation.reservation_type == CAPACITY_BLOCK or reservation.block_extensions:
        return ALWAYS
    state = reservation._state
    if state == PAYMENT_PENDING:
        return reservation.paid_at or NEVER
    if state == ASSESSING:
        return reservation.assessed_at or NEVER
    if state == SCHEDULED:
        return aware(reservation.start_date)
    if state != ACTIVE:
        return NEVER
    moments = []
    if not reservation.took_in_running:
        moments.append(reservation.active_from)
    if reservation.end_date_type == "limited" and reservation.end_date is not None:
        moments.append(aware(reservation.end_date) + lag(reservation.id))
    return min(moments) if moments else NEVER


class Schedule:
    """The reservations a table's next settle must look at, and when the others come due."""

    def __init__(self) -> None:
        self.order: dict[str, int] = {}  # id -> place in the table
        self.changed: set[str] = set()
        self._due_at: list[tuple[datetime, int, str]] = []  # a heap, stale entries left in it
        self._waking: dict[str, datetime] = {}  # id -> the moment its live heap entry names
        self.lag_seconds: float | None = None

    def note_changed(self, reservation_id: str) -> None:
        self.changed.add(reservation_id)

    def take_due(self, now: datetime) -> list[tuple[int, str]]:
        """(place, id) of every reservation changed or come due by `now`, as a heap by place;
        none of them is kept waiting any longer."""
        due = self.changed
        self.changed = set()
        heap = self._due_at
        while heap and heap[0][0] <= now:
            moment, _, reservation_id = heapq.heappop(heap)
            if self._waking.get(reservation_id) == moment:
                due.add(reservation_id)
        for reservation_id in due:
            self._waking.pop(reservation_id, None)
        order = self.order
        found = [(order[reservation_id], reservation_id) for reservation_id in due]
        heapq.heapify(found)
        return found

    def keep(self, reservation: CapacityReservation, lag: Any) -> None:
        """After settle looked at it: when it must be looked at again."""
        self.changed.discard(reservation.id)
        moment = wake_at(reservation, lag)
        if moment == ALWAYS:
            self.changed.add(reservation.id)
        elif isinstance(moment, datetime):
            self._waking[reservation.id] = moment
            heapq.heappush(self._due_at, (moment, self.order[reservation.id], reservation.id))


class ReservationTable(dict[str, "CapacityReservation"]):
    """A backend's reservations by id, in the order they were added, each watched by the
    table's schedule. Reservations are added (`table[id] = reservation`), never removed."""

    def __init__(self) -> None:
        super().__init__()
        self.schedule = Schedule()

    def __setitem__(self, reservation_id: str, reservation: CapacityReservation) -> None:
        order = self.schedule.order
        order.setdefault(reservation_id, len(order))
        super().__setitem__(reservation_id, reservation)
        reservation.watched_by(self.schedule)
        self.schedule.note_changed(reservation_id)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a local cloud keeps a pickled copy of moto's backends) as its reservations
        alone: pickle restores a dict's items before its attributes, each through
        `__setitem__`, which needs the schedule. The copy's schedule is made anew with every
        reservation changed, so its first settle looks at each once."""
        return (_table_of, (list(self.items()),))

    def later(self, place: int, limit: int) -> Iterator[tuple[int, str]]:
        """(place, id) of the changed reservations after `place` and before `limit`."""
        order = self.schedule.order
        for reservation_id in self.schedule.changed:
            at = order[reservation_id]
            if place < at < limit:
                yield at, reservation_id


def _table_of(items: list[tuple[str, CapacityReservation]]) -> ReservationTable:
    table = ReservationTable()
    for reservation_id, reservation in items:
        table[reservation_id] = reservation
    return table
