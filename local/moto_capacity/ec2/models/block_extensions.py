"""Capacity Block extensions: offerings, purchase, payment, and the end date they move.

EC2 User Guide, "Extend Capacity Blocks"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html): a block can be
extended while it is `scheduled` or `active` and has no extension `payment-pending`, from 56
days up to 1 hour before it ends, by 1-day steps up to 14 days and 7-day steps beyond, 182 days
(26 weeks) in all; any number of extensions; the Capacity Reservation id stays the same; an
extension is offered only where capacity allows. An extension is `payment-pending` until paid,
then `payment-succeeded`, and only then the reservation's end date moves to the extension's
end. Not paid within 12 hours, or by 35 minutes before the block ends (whichever comes first),
it is `payment-failed` and the block ends at its original end date.

The API (EC2 API Reference, DescribeCapacityBlockExtensionOfferings,
PurchaseCapacityBlockExtension, DescribeCapacityBlockExtensionHistory): an offering starts at
the block's end date (`CapacityBlockExtensionStartDate`) and names the block's type, count, zone
and start; an extension keeps its offering's id, duration, dates and fee, with its status.

The emulator's choices where the pages are silent: one offering per search (the console shows
"a" recommended offering); a search outside the window or on a block in another state is
refused (`IncorrectState`, `InvalidParameterValue`) rather than answered empty; the capacity an
extension sells comes from the zone's `capacity-block` pool (`set_capacity`), as a purchase's
does; payment takes `BLOCK_SETTINGS.payment_pending_seconds`, as a purchase's does.
"""

import hashlib
from datetime import timedelta

from moto_capacity.core.clock import CLOCK, aware
from moto_capacity.ec2.exceptions import IncorrectState, InvalidParameterValue, MissingParameter

from .backend import CAPACITY_LOCK, OFFERING_POOLS, CapacityReservationBackend
from .capacity_blocks import BLOCK_SETTINGS, WEEKLY_STEPS_UP_TO_HOURS, check_duration
from .extension_payments import (
    EARLIEST_BEFORE_END,
    LATEST_BEFORE_END,
    PAYMENT_DEADLINE_BEFORE_END,
    PAYMENT_PENDING,
    PAYMENT_WINDOW,
    BlockExtension,
    ExtensionOffering,
)
from .offerings import Offering
from .reservations import ACTIVE, CAPACITY_BLOCK, SCHEDULED, CapacityReservation


def _extensible_block(
    backend: CapacityReservationBackend, reservation_id: str | None
) -> CapacityReservation:
    if not reservation_id:
        raise MissingParameter("The request must contain the parameter CapacityReservationId.")
    reservation = backend.get_reservation(reservation_id)
    if reservation.reservation_type != CAPACITY_BLOCK:
        raise InvalidParameterValue(
            f"The Capacity Reservation {reservation_id} is not a Capacity Block: only Capacity "
            "Blocks can be extended."
        )
    if reservation.state not in (SCHEDULED, ACTIVE):
        raise IncorrectState(
            f"The Capacity Block {reservation_id} is {reservation.state}: only a scheduled or "
            "active Capacity Block can be extended."
        )
    if any(e.status == PAYMENT_PENDING for e in reservation.block_extensions):
        raise IncorrectState(
            f"The Capacity Block {reservation_id} has an extension in payment-pending: extend it "
            "again once that payment is processed."
        )
    assert reservation.end_date is not None
    left = aware(reservation.end_date) - CLOCK.now()
    if not LATEST_BEFORE_END <= left <= EARLIEST_BEFORE_END:
        raise InvalidParameterValue(
            f"The Capacity Block {reservation_id} ends at {aware(reservation.end_date)}: it can be "
            "extended from 56 days up to 1 hour before its end."
        )
    return reservation


def _block_pool(backend: CapacityReservationBackend, reservation: CapacityReservation) -> Offering:
    """The zone's capacity Capacity Blocks may still sell of the block's type."""
    return Offering(
        backend.region, reservation.instance_type, reservation.availability_zone, "capacity-block"
    )


def _offering_id(reservation: CapacityReservation, hours: int) -> str:
    end = aware(reservation.end_date) if reservation.end_date else None
    digest = hashlib.sha256(f"{reservation.id}|{end}|{hours}".encode()).hexdigest()
    return f"cbe-{digest[:17]}"


def find_offerings(
    backend: CapacityReservationBackend, reservation_id: str | None, duration_hours: int | None
) -> list[ExtensionOffering]:
    """The offering extending the block by `duration_hours` from its end, if capacity allows."""
    if duration_hours is None:
        raise MissingParameter(
            "The request must contain the parameter CapacityBlockExtensionDurationHours."
        )
    check_duration(duration_hours)
    with CAPACITY_LOCK:
        reservation = _extensible_block(backend, reservation_id)
        assert reservation.end_date is not None
        start = aware(reservation.end_date)
        end = start + timedelta(hours=duration_hours)
        if end - aware(reservation.start_date) > timedelta(hours=WEEKLY_STEPS_UP_TO_HOURS):
            raise InvalidParameterValue(
                f"CapacityBlockExtensionDurationHours {duration_hours} is invalid: a Capacity "
                f"Block lasts at most 182 days ({WEEKLY_STEPS_UP_TO_HOURS} hours) in all."
            )
        pool = _block_pool(backend, reservation)
        free = OFFERING_POOLS.free(pool)
        if free is not None and free < reservation.total_instance_count:
            return []
        offering = ExtensionOffering(
            _offering_id(reservation, duration_hours),
            reservation.id,
            reservation.instance_type,
            reservation.total_instance_count,
            reservation.availability_zone,
            reservation.availability_zone_id,
            aware(reservation.start_date),
            start,
            end,
            duration_hours,
        )
        backend.block_extension_offerings[offering.id] = offering
        return [offering]


def purchase(
    backend: CapacityReservationBackend, offering_id: str | None, reservation_id: str | None
) -> BlockExtension:
    """Buy an extension offering: `payment-pending`, paid on the emulator's clock."""
    if not offering_id:
        raise MissingParameter(
            "The request must contain the parameter CapacityBlockExtensionOfferingId."
        )
    with CAPACITY_LOCK:
        reservation = _extensible_block(backend, reservation_id)
        offering = backend.block_extension_offerings.get(offering_id)
        pool = _block_pool(backend, reservation)
        free = OFFERING_POOLS.free(pool)
        if (
            offering is None
            or offering.reservation_id != reservation.id
            or reservation.end_date is None
            or offering.start_date != aware(reservation.end_date)
            or (free is not None and free < offering.instance_count)
        ):
            raise InvalidParameterValue(
                f"The Capacity Block extension offering {offering_id} does not exist for "
                f"{reservation.id} or is no longer available."
            )
        now = CLOCK.now()
        extension = BlockExtension(
            offering,
            purchase_date=now,
            paid_at=now + timedelta(seconds=BLOCK_SETTINGS.payment_pending_seconds),
            fails_at=min(now + PAYMENT_WINDOW, offering.start_date - PAYMENT_DEADLINE_BEFORE_END),
        )
        reservation.block_extensions.append(extension)
        OFFERING_POOLS.take(pool, offering.instance_count)
        del backend.block_extension_offerings[offering_id]
        backend.expire_due_reservations()
        return extension


def history(
    backend: CapacityReservationBackend, reservation_ids: list[str], filters: dict[str, list[str]]
) -> list[BlockExtension]:
    """Every extension of the named blocks (or of all), oldest purchase first."""
    with CAPACITY_LOCK:
        chosen = (
            [backend.get_reservation(rid) for rid in reservation_ids]
            if reservation_ids
            else list(backend.reservations.values())
        )
        backend.expire_due_reservations()
        found = [e for r in chosen for e in r.block_extensions if e.matches_filters(filters)]
        return sorted(found, key=lambda e: e.purchase_date)
