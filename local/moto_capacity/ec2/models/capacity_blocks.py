"""Capacity Blocks for ML: offerings, purchase, the blocks and their status.

EC2 User Guide, "Find and purchase Capacity Blocks": a search names an instance type, a count
(1 to 64 per block) and a duration in 1-day steps up to 14 days, then 7-day steps up to 182
days; EC2 answers up to 6 offerings; blocks start up to 8 weeks ahead and begin and end at
11:30 UTC. A purchased block is a Capacity Reservation of `ReservationType` `capacity-block`,
`targeted`, with a limited end date; it is `payment-pending`, then `scheduled`, then `active`
from its start (see `lifecycle`). "Cancel a Capacity Reservation": a block cannot be modified
or cancelled.
"""

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from moto.ec2.utils import random_resource_id

from moto_capacity.core.clock import CLOCK, aware
from moto_capacity.ec2.exceptions import InvalidParameterValue, MissingParameter

from .backend import CAPACITY_LOCK, OFFERING_POOLS, CapacityReservationBackend
from .offerings import Offering, upfront_fee
from .reservations import CAPACITY_BLOCK, PAYMENT_PENDING, CapacityReservation

# The instance types the emulator sells blocks of (GPU and Trainium types AWS lists).
BLOCK_INSTANCE_TYPES = (
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "trn1.32xlarge",
    "trn2.48xlarge",
)
MAX_INSTANCES_PER_BLOCK = 64
MAX_OFFERINGS = 6
DAILY_STEPS_UP_TO_HOURS = 14 * 24
WEEKLY_STEPS_UP_TO_HOURS = 182 * 24
BLOCK_BOUNDARY = time(11, 30, tzinfo=UTC)
FURTHEST_START = timedelta(weeks=8)


class BlockSettings:
    """How long a purchase stays `payment-pending` on the emulator's clock."""

    DEFAULT_PAYMENT_PENDING_SECONDS = 30.0

    def __init__(self) -> None:
        self.payment_pending_seconds = self.DEFAULT_PAYMENT_PENDING_SECONDS

    def reset(self) -> None:
        self.payment_pending_seconds = self.DEFAULT_PAYMENT_PENDING_SECONDS


BLOCK_SETTINGS = BlockSettings()


@dataclass(frozen=True)
class BlockOffering:
    """One CapacityBlockOffering, remembered so that PurchaseCapacityBlock can find it."""

    id: str
    instance_type: str
    availability_zone: str
    instance_count: int
    start_date: datetime
    end_date: datetime
    duration_hours: int

    @property
    def upfront_fee(self) -> str | None:
        return upfront_fee(self.instance_type, self.duration_hours, self.instance_count)

    def as_answer(self) -> dict[str, Any]:
        return {
            "CapacityBlockOfferingId": self.id,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.availability_zone,
            "InstanceCount": self.instance_count,
            "StartDate": self.start_date,
            "EndDate": self.end_date,
            "CapacityBlockDurationHours": self.duration_hours,
            "CapacityBlockDurationMinutes": 0,
            "UpfrontFee": self.upfront_fee,
            "CurrencyCode": "USD",
            "Tenancy": "default",
        }


@dataclass
class CapacityBlock:
    """A purchased block: one reservation for instance types (UltraServers are not modelled)."""

    id: str
    reservation: CapacityReservation
    create_date: datetime
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return self.reservation.state

    def as_answer(self) -> dict[str, Any]:
        return {
            "CapacityBlockId": self.id,
            "AvailabilityZone": self.reservation.availability_zone,
            "AvailabilityZoneId": self.reservation.availability_zone_id,
            "CapacityReservationIds": [self.reservation.id],
            "StartDate": self.reservation.start_date,
            "EndDate": self.reservation.end_date,
            "CreateDate": self.create_date,
            "State": self.state,
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())],
        }

    def matches_filters(self, filters: dict[str, list[str]]) -> bool:
        values: dict[str, list[str]] = {
            "capacity-block-id": [self.id],
            "availability-zone": [self.reservation.availability_zone],
            "state": [self.state],
            "tag-key": list(self.tags),
        }
        for name, wanted in filters.items():
            if name.startswith("tag:"):
                have = [self.tags[name[4:]]] if name[4:] in self.tags else []
            elif name in values:
                have = values[name]
            else:
                raise InvalidParameterValue(f"The filter '{name}' is invalid")
            if not set(have) & set(wanted):
                return False
        return True

    def status(self) -> dict[str, Any]:
        reservation = self.reservation
        return {
            "CapacityBlockId": self.id,
            "InterconnectStatus": "ok",
            "TotalCapacity": reservation.total_instance_count,
            "TotalAvailableCapacity": reservation.available_instance_count,
            "TotalUnavailableCapacity": 0,
            "CapacityReservationStatuses": [
                {
                    "CapacityReservationId": reservation.id,
                    "TotalCapacity": reservation.total_instance_count,
                    "TotalAvailableCapacity": reservation.available_instance_count,
                    "TotalUnavailableCapacity": 0,
                }
            ],
        }


def check_duration(hours: int) -> None:
    daily = 24 <= hours <= DAILY_STEPS_UP_TO_HOURS and hours % 24 == 0
    weekly = DAILY_STEPS_UP_TO_HOURS < hours <= WEEKLY_STEPS_UP_TO_HOURS and hours % 168 == 0
    if not (daily or weekly):
        raise InvalidParameterValue(
            f"CapacityDurationHours {hours} is invalid: use 1-day steps (24 to 336 hours), then "
            "7-day steps up to 182 days (4368 hours)."
        )


def _first_start(earliest: datetime) -> datetime:
    boundary = datetime.combine(earliest.date(), BLOCK_BOUNDARY)
    return boundary if boundary >= earliest else boundary + timedelta(days=1)


def _offering_id(region: str, *parts: object) -> str:
    digest = hashlib.sha256("|".join(map(str, (region, *parts))).encode()).hexdigest()
    return f"cb-{digest[:17]}"


def _checked_search(
    instance_type: str | None, instance_count: int | None, duration_hours: int | None
) -> tuple[str, int, int]:
    """The search's type, count and duration, each given and within a block's bounds."""
    if duration_hours is None:
        raise MissingParameter("The request must contain the parameter CapacityDurationHours.")
    if not instance_type or instance_count is None:
        raise MissingParameter("The request must contain InstanceType and InstanceCount.")
    check_duration(duration_hours)
    if not 1 <= instance_count <= MAX_INSTANCES_PER_BLOCK:
        raise InvalidParameterValue(
            f"InstanceCount {instance_count} is invalid: a Capacity Block holds 1 to "
            f"{MAX_INSTANCES_PER_BLOCK} instances."
        )
    return instance_type, instance_count, duration_hours


def find_offerings(
    backend: CapacityReservationBackend,
    instance_type: str | None,
    instance_count: int | None,
    duration_hours: int | None,
    start_range: datetime | None,
    end_range: datetime | None,
) -> list[BlockOffering]:
    """Up to 6 offerings, earliest first, in zones whose block capacity fits the count."""
    instance_type, instance_count, duration_hours = _checked_search(
        instance_type, instance_count, duration_hours
    )
    if instance_type not in BLOCK_INSTANCE_TYPES:
        return []
    now = CLOCK.now()
    start = _first_start(max(now, aware(start_range) if start_range else now))
    zones = sorted(zone.name for zone in backend.ec2_backend.describe_availability_zones())
    found: list[BlockOffering] = []
    with CAPACITY_LOCK:
        while start <= now + FURTHEST_START and len(found) < MAX_OFFERINGS:
            end = start + timedelta(hours=duration_hours)
            if end_range is not None and end > aware(end_range):
                break
            for zone in zones:
                offering = Offering(backend.region, instance_type, zone, "capacity-block")
                free = OFFERING_POOLS.free(offering)
                if (free is not None and free < instance_count) or len(found) >= MAX_OFFERINGS:
                    continue
                offering_id = _offering_id(
                    backend.region, instance_type, zone, instance_count, start, duration_hours
                )
                found.append(
                    BlockOffering(
                        offering_id, instance_type, zone, instance_count, start, end, duration_hours
                    )
                )
            start += timedelta(days=1)
        for block_offering in found:
            backend.block_offerings[block_offering.id] = block_offering
    return found


def purchase(
    backend: CapacityReservationBackend,
    offering_id: str,
    instance_platform: str,
    tags: dict[str, dict[str, str]],
) -> CapacityBlock:
    """Buy an offering: a `payment-pending` capacity-block reservation and its block."""
    with CAPACITY_LOCK:
        offering = backend.block_offerings.get(offering_id)
        pool = (
            Offering(
                backend.region, offering.instance_type, offering.availability_zone, "capacity-block"
            )
            if offering
            else None
        )
        free = OFFERING_POOLS.free(pool) if pool else None
        if (
            offering is None
            or pool is None
            or offering.start_date < CLOCK.now()
            or (free is not None and free < offering.instance_count)
        ):
            raise InvalidParameterValue(
                f"The Capacity Block offering {offering_id} does not exist or is no longer "
                "available."
            )
        zones = {z.name: z.zone_id for z in backend.ec2_backend.describe_availability_zones()}
        reservation = CapacityReservation(
            backend.ec2_backend,
            instance_type=offering.instance_type,
            instance_platform=instance_platform,
            availability_zone=offering.availability_zone,
            availability_zone_id=zones[offering.availability_zone],
            instance_count=offering.instance_count,
            instance_match_criteria="targeted",
            end_date_type="limited",
            end_date=offering.end_date,
        )
        reservation.reservation_type = CAPACITY_BLOCK
        reservation.start_date = offering.start_date
        reservation.move_to(PAYMENT_PENDING)
        reservation.paid_at = reservation.create_date + timedelta(
            seconds=BLOCK_SETTINGS.payment_pending_seconds
        )
        reservation.capacity_block_id = f"cb-{random_resource_id(17)}"
        reservation.add_tags(tags.get("capacity-reservation", {}))
        OFFERING_POOLS.take(pool, offering.instance_count)
        del backend.block_offerings[offering_id]
        block = CapacityBlock(
            reservation.capacity_block_id,
            reservation,
            reservation.create_date,
            dict(tags.get("capacity-block", {})),
        )
        backend.reservations[reservation.id] = reservation
        backend.capacity_blocks[block.id] = block
        backend.expire_due_reservations()
        return block


def describe_blocks(
    backend: CapacityReservationBackend, block_ids: list[str], filters: dict[str, list[str]]
) -> list[CapacityBlock]:
    with CAPACITY_LOCK:
        backend.expire_due_reservations()
        for block_id in block_ids:
            if block_id not in backend.capacity_blocks:
                raise InvalidParameterValue(f"The Capacity Block ID '{block_id}' does not exist")
        chosen = block_ids or list(backend.capacity_blocks)
        return [
            backend.capacity_blocks[block_id]
            for block_id in chosen
            if backend.capacity_blocks[block_id].matches_filters(filters)
        ]
