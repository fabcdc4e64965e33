"""Waiting for scheduled reserved capacity (`waitForCapacityUntil`): the rules, decided once.

A request that sets a deadline waits when no reserved capacity it may use is available now and a
reservation it could use is upcoming (scheduled, future-dated, being paid for) with a start before
the deadline. While it waits, its message is held in the launch queue and looked at again after
`next_check_seconds`; at the deadline it fails with CAPACITY_NOT_ACTIVE_BY_DEADLINE.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from capacity_launcher.domain.reservations import ACTIVE, ReservationSnapshot
from capacity_launcher.domain.status import AwaitedReservation, format_timestamp

# A held message comes back after at least this long (the sync runs every minute: a look sooner
# would only read the same snapshot) and at most SQS's largest DelaySeconds.
MIN_CHECK_SECONDS = 60
MAX_CHECK_SECONDS = 900


def awaited(
    scheduled: Iterable[ReservationSnapshot], deadline: datetime
) -> list[ReservationSnapshot]:
    """The upcoming reservations that may start before the deadline (a `pending` ODCR has no
    future start: it is being created now)."""
    return [r for r in scheduled if r.start_date is None or r.start_date < deadline]


def next_check_seconds(
    now: datetime, deadline: datetime, waited_for: Sequence[ReservationSnapshot]
) -> int:
    """When to look again: at the earliest start still ahead, or the deadline, within bounds."""
    ahead = [r.start_date for r in waited_for if r.start_date is not None and r.start_date > now]
    until = (min([deadline, *ahead]) - now).total_seconds()
    return max(MIN_CHECK_SECONDS, min(MAX_CHECK_SECONDS, math.ceil(until)))


def awaited_records(waited_for: Iterable[ReservationSnapshot]) -> list[AwaitedReservation]:
    """The reservations as the Waiting record names them."""
    return [
        AwaitedReservation(
            capacity_reservation_id=r.reservation_id,
            state=r.state,
            capacity_reservation_type=r.reservation_type,
            start_date=r.start_date,
        )
        for r in waited_for
    ]


def missed_deadline(
    deadline: datetime,
    waited_for: Iterable[AwaitedReservation],
    now_seen: Mapping[str, ReservationSnapshot],
) -> str:
    """CapacityNotActiveByDeadline's message: each reservation waited for, its state now (as last
    seen when it is no longer selected) and its start."""
    parts = []
    for reservation in waited_for:
        current = now_seen.get(reservation.capacity_reservation_id)
        state = current.state if current is not None else reservation.state
        start = current.start_date if current is not None else reservation.start_date
        if state == ACTIVE:
            state = "active but full"
        starts = f"starts {format_timestamp(start)}" if start else "no start date"
        parts.append(f"{reservation.capacity_reservation_id} ({state}, {starts})")
    waited = "; ".join(parts) or "no reservation it could use was scheduled any more"
    return (
        f"waitForCapacityUntil: {format_timestamp(deadline)} passed and no reserved capacity "
        f"the request may use is available: {waited}"
    )
