"""What happens to reservations as the emulator's clock moves: every transition has a due time.

EC2 User Guide, "Capacity Reservation states": a future-dated request is `assessing`, then
`scheduled`, then `active` at its start date; a Capacity Block is `payment-pending`, then
`scheduled`, then `active` at its start. "Capacity Blocks for ML" and "Monitor Capacity Blocks
using EventBridge": 40 minutes before a block ends EC2 warns, 30 minutes before it starts
terminating the block's instances, and at the end the block is `expired`. "Interruptible
Capacity Reservations": reclaimed capacity warns each instance 2 minutes before terminating it.

`settle` applies every transition due by now, in order, and emits each event stamped with the
moment it was due, so one big clock advance replays a block's whole life. It looks only at the
reservations that changed since it last looked or whose next transition has come due
(`settling`): the others would not move.
"""

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from moto_capacity.core.clock import CLOCK, aware

from .events import (
    BLOCK_DELIVERED,
    BLOCK_EXPIRATION_WARNING,
    EC2_EVENTS,
    INTERRUPTION_WARNING,
    RECLAMATION_COMPLETED,
    iso,
)
from .extension_payments import settle_payments
from .future_dated import delivered
from .reservations import (
    ACTIVE,
    ASSESSING,
    CANCELLED,
    CAPACITY_BLOCK,
    END_DATE_SETTINGS,
    EXPIRED,
    PAYMENT_PENDING,
    SCHEDULED,
    CapacityReservation,
)
from .settling import ReservationTable

BLOCK_EXPIRATION_WARNING_BEFORE = timedelta(minutes=40)
BLOCK_TERMINATION_BEFORE = timedelta(minutes=30)
INTERRUPTION_NOTICE = timedelta(minutes=2)


@dataclass
class Interruption:
    """Capacity an owner reclaimed from an interruptible reservation, pending its notice."""

    reservation_id: str
    instance_ids: list[str]
    terminate_at: datetime
    reclaimed: int
    done: bool = field(default=False)


class ReservationHolder(Protocol):
    """What the lifecycle needs of the backend holding the reservations (`backend` implements
    it): the reservations and pending interruptions, and the effects a transition has."""

    reservations: dict[str, CapacityReservation]
    interruptions: list[Interruption]

    @property
    def account_id(self) -> str: ...

    @property
    def region(self) -> str: ...

    def terminate(self, instance_ids: list[str]) -> None: ...

    def end_reservation(self, reservation: CapacityReservation, state: str) -> None: ...

    def take_in_running_instances(self, reservation: CapacityReservation) -> None: ...


def settle(backend: ReservationHolder, now: datetime | None = None) -> None:
    """Apply every transition due by `now` (the emulator's clock by default)."""
    now = aware(now or CLOCK.now())
    table = backend.reservations
    if isinstance(table, ReservationTable):
        _settle_scheduled(backend, table, now)
    else:
        for reservation in list(table.values()):
            _advance(backend, reservation, now)
    for interruption in [i for i in backend.interruptions if not i.done]:
        if interruption.terminate_at <= now:
            finish_interruption(backend, interruption)


def _settle_scheduled(backend: ReservationHolder, table: ReservationTable, now: datetime) -> None:
    """`settle`'s walk over the reservations its schedule says may move (`settling`), in the
    table's order, each once."""
    schedule = table.schedule
    if schedule.lag_seconds != END_DATE_SETTINGS.lag_seconds:  # every end's lag moved
        schedule.lag_seconds = END_DATE_SETTINGS.lag_seconds
        schedule.changed.update(table)
    limit = len(schedule.order)  # one added meanwhile is not walked in this call
    todo = schedule.take_due(now)
    looked: set[str] = set()
    while todo:
        place, reservation_id = heapq.heappop(todo)
        if reservation_id in looked:
            continue
        looked.add(reservation_id)
        reservation = table[reservation_id]
        _advance(backend, reservation, now)
        schedule.keep(reservation, END_DATE_SETTINGS.lag)
        for later in table.later(place, limit):
            heapq.heappush(todo, later)


def _advance(backend: ReservationHolder, reservation: CapacityReservation, now: datetime) -> None:
    # Its recorded state, not `state`: that reads the clock, and differs from it only as
    # `pending` for `active` (settle walks every reservation on every call that may move one).
    if reservation._state == PAYMENT_PENDING and reservation.paid_at and reservation.paid_at <= now:
        reservation.move_to(SCHEDULED)
    assessed = reservation.assessed_at
    if reservation._state == ASSESSING and assessed is not None and assessed <= now:
        reservation.move_to(SCHEDULED, assessed)
    if reservation._state == SCHEDULED and aware(reservation.start_date) <= now:
        reservation.move_to(ACTIVE, aware(reservation.start_date))
        delivered(reservation, aware(reservation.start_date))
        if reservation.reservation_type == CAPACITY_BLOCK:
            _block_event(backend, reservation, BLOCK_DELIVERED, aware(reservation.start_date))
    if reservation.block_extensions:
        settle_payments(reservation, now)
    if reservation.reservation_type == CAPACITY_BLOCK and reservation.state == ACTIVE:
        _approach_block_end(backend, reservation, now)
    if reservation.is_due_to_expire(now):
        if reservation.reservation_type == CAPACITY_BLOCK:
            # "When a Capacity Block expires, all instances in the Capacity Block are terminated."
            backend.terminate(sorted(reservation.instance_ids))
        backend.end_reservation(reservation, EXPIRED)
    elif not reservation.took_in_running and reservation.is_active:
        reservation.took_in_running = True
        backend.take_in_running_instances(reservation)


def _approach_block_end(
    backend: ReservationHolder, reservation: CapacityReservation, now: datetime
) -> None:
    assert reservation.end_date is not None
    end = aware(reservation.end_date)
    if not reservation.expiry_warned and now >= end - BLOCK_EXPIRATION_WARNING_BEFORE:
        reservation.expiry_warned = True
        warned_at = end - BLOCK_EXPIRATION_WARNING_BEFORE
        _block_event(backend, reservation, BLOCK_EXPIRATION_WARNING, warned_at)
    if now >= end - BLOCK_TERMINATION_BEFORE and (
        not reservation.instances_terminated or reservation.instance_ids
    ):
        # "We begin terminating any instances that are running in the Capacity Block 30 minutes
        # before the reservation end time": one launched later is terminated too, not kept.
        reservation.instances_terminated = True
        backend.terminate(sorted(reservation.instance_ids))


def _block_event(
    backend: ReservationHolder,
    reservation: CapacityReservation,
    detail_type: str,
    at: datetime,
) -> None:
    assert reservation.end_date is not None
    EC2_EVENTS.emit(
        backend.account_id,
        backend.region,
        detail_type,
        at,
        [reservation.capacity_reservation_arn],
        {"capacity-reservation-id": reservation.id, "end-date": iso(reservation.end_date)},
    )


def start_interruption(
    backend: ReservationHolder, reservation: CapacityReservation, reclaimed: int
) -> Interruption:
    """Warn the instances beyond the reservation's new size; they end after the notice."""
    now = CLOCK.now()
    over = max(0, len(reservation.instance_ids) - reservation.total_instance_count)
    victims = sorted(reservation.instance_ids)[:over]
    terminate_at = now + INTERRUPTION_NOTICE if victims else now
    interruption = Interruption(reservation.id, victims, terminate_at, reclaimed)
    for instance_id in victims:
        EC2_EVENTS.emit(
            backend.account_id,
            backend.region,
            INTERRUPTION_WARNING,
            now,
            [f"arn:aws:ec2:{backend.region}:{backend.account_id}:instance/{instance_id}"],
            {
                "instance-id": instance_id,
                "instance-action": "terminate",
                "instance-termination-time": iso(interruption.terminate_at),
                "azId": reservation.availability_zone_id,
            },
        )
    backend.interruptions.append(interruption)
    if not victims:
        finish_interruption(backend, interruption)
    return interruption


def finish_interruption(backend: ReservationHolder, interruption: Interruption) -> None:
    """Terminate the warned instances, give the capacity back to the source, tell its owner."""
    interruption.done = True
    reservation = backend.reservations[interruption.reservation_id]
    backend.terminate([i for i in interruption.instance_ids if i in reservation.instance_ids])
    assert reservation.interruption_info is not None
    source = backend.reservations[reservation.interruption_info["SourceCapacityReservationId"]]
    source.total_instance_count += interruption.reclaimed
    allocation = source.interruptible_capacity_allocation
    assert allocation is not None
    allocation["InstanceCount"] = reservation.total_instance_count
    allocation["Status"] = "active"
    if reservation.total_instance_count == 0 and reservation.zero_size_preference != "retain":
        backend.end_reservation(reservation, CANCELLED)
        allocation["Status"] = "canceled"
    EC2_EVENTS.emit(
        backend.account_id,
        backend.region,
        RECLAMATION_COMPLETED,
        interruption.terminate_at,
        [source.capacity_reservation_arn],
        {
            "sourceCapacityReservationId": source.id,
            "instanceType": source.instance_type,
            "availabilityZoneId": source.availability_zone_id,
            "TotalInstanceCount": source.total_instance_count,
            "ReclaimedInstanceCount": interruption.reclaimed,
            "targetInstanceCount": allocation["TargetInstanceCount"],
        },
    )
