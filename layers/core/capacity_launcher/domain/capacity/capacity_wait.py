"""Waiting for scheduled reserved capacity (`waitForCapacityUntil`): the rules, decided once.

A request that sets a deadline waits when no reserved capacity it may use is available now and a
reservation it could use is upcoming (scheduled, future-dated, being paid for) with a start before
the deadline. While it waits, its message is held in the launch queue and looked at again after
`next_check_seconds`; at the deadline it fails with CAPACITY_NOT_ACTIVE_BY_DEADLINE.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot
from capacity_launcher.domain.records.status import (
    CAPACITY_NOT_ACTIVE_BY_DEADLINE,
    AwaitedReservation,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    format_timestamp,
)

# A held message comes back after at least this long (the sync runs every minute: a look sooner
# would only read the same snapshot) and at most SQS's largest DelaySeconds.
MIN_CHECK_SECONDS = 60
MAX_CHECK_SECONDS = 900
# The launch queue's retry window: a delivery is received at most maxReceiveCount (5) times, each
# invisible for the queue's VisibilityTimeout (720 s), before SQS dead-letters it.
QUEUE_RETRY_SECONDS = 5 * 720
# The backstop (the reservation sync) ends a Waiting request only this long after its deadline:
# by then a live held copy has come back (it looks at the deadline at the latest) and been served,
# or it is lost (retention passed, purged, dead-lettered).
BACKSTOP_MARGIN_SECONDS = MAX_CHECK_SECONDS + QUEUE_RETRY_SECONDS


@dataclass(frozen=True)
class HeldWait:
    """A Waiting record as stored: the queue message that holds it, and how many deliveries of
    that message began serving it (each bumps `served`; the backstop's write is conditional on
    both, so a delivery serving it meanwhile wins)."""

    record: RequestRecord
    held_by: str | None
    served: int = 0
    # The index's sort key as stored (`waitingUntil`, epoch seconds): the deadline it is read by.
    waiting_until: int | None = None


def deadline_before(wait: HeldWait, before: datetime) -> bool:
    """Whether a wait read from the index is one a Query bounded by `waitingUntil < before`
    returns (the same comparison, in whole seconds): a read of every live wait answers each
    narrower bound without a Query of its own."""
    until = wait.waiting_until
    if until is None and wait.record.wait_for_capacity_until is not None:
        until = int(wait.record.wait_for_capacity_until.timestamp())
    return until is not None and until < int(before.timestamp())


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
    *,
    looked: bool = True,
) -> str:
    """CapacityNotActiveByDeadline's message: each reservation waited for, its state now (as last
    seen when it is no longer selected) and its start. Not `looked`: the backstop ends a wait whose
    held copy was lost, so nothing looked for room at the deadline."""
    parts = []
    for reservation in waited_for:
        if reservation.capacity_reservation_id is None:
            continue  # room in a queue, not a reservation (domain/accounting/admission_queue.py)
        current = now_seen.get(reservation.capacity_reservation_id)
        state = current.state if current is not None else reservation.state
        start = current.start_date if current is not None else reservation.start_date
        if state == ACTIVE and looked:
            state = "active but full"
        starts = f"starts {format_timestamp(start)}" if start else "no start date"
        parts.append(f"{reservation.capacity_reservation_id} ({state}, {starts})")
    waited = "; ".join(parts) or "no reservation it could use was scheduled any more"
    why = (
        "no reserved capacity the request may use is available"
        if looked
        else "the request was not looked at again (its held message was lost)"
    )
    return f"waitForCapacityUntil: {format_timestamp(deadline)} passed and {why}: {waited}"


def backstop_due(wait: HeldWait, now: datetime) -> bool:
    """Whether the backstop ends this wait now: its deadline passed by more than the margin; a
    wait a delivery began serving is left to that delivery one margin more (it ends the wait, or
    it was lost too)."""
    deadline = wait.record.wait_for_capacity_until
    margin = BACKSTOP_MARGIN_SECONDS * (2 if wait.served else 1)
    return deadline is not None and (now - deadline).total_seconds() > margin


def ended_by_backstop(
    waiting: RequestRecord, now: datetime, now_seen: Mapping[str, ReservationSnapshot]
) -> RequestRecord:
    """The Failed record of a Waiting request whose held copy was lost: what the held copy would
    have written at the deadline (CapacityNotActiveByDeadline, the same message, the request's
    deadline kept, as on every record of the request)."""
    assert waiting.wait_for_capacity_until is not None  # only a Waiting record has a deadline
    message = missed_deadline(
        waiting.wait_for_capacity_until, waiting.waiting_for, now_seen, looked=False
    )
    error = ErrorDetail(code=CAPACITY_NOT_ACTIVE_BY_DEADLINE, message=message)
    return waiting.model_copy(
        update={
            "status": RequestStatus.FAILED,
            "errors": [*waiting.errors, error],
            "finished_at": now,
            "waiting_for": [],
        }
    )
