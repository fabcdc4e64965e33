"""The Capacity Reservation resource: attributes, state, counts and filters."""

import hashlib
from datetime import datetime, timedelta
from typing import Any

from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.utils import random_resource_id

from moto_capacity.core.clock import CLOCK, aware

from .consistency import CONSISTENCY
from .events import EC2_EVENTS, FUTURE_DATED_STATE_EVENTS
from .launches import InstanceAttributes

ACTIVE = "active"
PENDING = "pending"
EXPIRED = "expired"
CANCELLED = "cancelled"
# Future-dated reservations ("Capacity Reservation states") and Capacity Blocks.
ASSESSING = "assessing"
SCHEDULED = "scheduled"
DELAYED = "delayed"
UNSUPPORTED = "unsupported"
PAYMENT_PENDING = "payment-pending"
PAYMENT_FAILED = "payment-failed"
ENDED = (EXPIRED, CANCELLED, UNSUPPORTED, PAYMENT_FAILED)


class EndDateSettings:
    """EC2 API Reference, CreateCapacityReservation, `EndDate`
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateCapacityReservation.html):
    a reservation with a limited end date is cancelled within an hour from the specified time
    (it ends `expired`). The emulator ends each one a fixed lag after its end date: `lag_seconds`
    when set, else a lag in [0, 3600) s drawn from its id (stable across runs). A Capacity Block
    ends at its end date exactly ("Capacity Blocks for ML")."""

    def __init__(self) -> None:
        self.lag_seconds: float | None = None

    def lag(self, reservation_id: str) -> timedelta:
        if self.lag_seconds is not None:
            return timedelta(seconds=self.lag_seconds)
        drawn = int.from_bytes(hashlib.sha256(reservation_id.encode()).digest()[:4], "big")
        return timedelta(seconds=drawn % 3600)

    def reset(self) -> None:
        self.lag_seconds = None


END_DATE_SETTINGS = EndDateSettings()

DEFAULT_TYPE = "default"
CAPACITY_BLOCK = "capacity-block"
# The market type (InstanceMarketOptions.MarketType) a launch needs to use each kind.
ON_DEMAND_MARKET = "on-demand"
CAPACITY_BLOCK_MARKET = "capacity-block"
INTERRUPTIBLE_MARKET = "interruptible-capacity-reservation"


class CapacityReservation(TaggedEC2Resource):
    """An On-Demand Capacity Reservation. Counts are changed only under `models.CAPACITY_LOCK`."""

    def __init__(
        self,
        ec2_backend: Any,
        *,
        instance_type: str,
        instance_platform: str,
        availability_zone: str,
        availability_zone_id: str | None,
        instance_count: int,
        tenancy: str = "default",
        instance_match_criteria: str = "open",
        end_date_type: str = "unlimited",
        end_date: datetime | None = None,
        ebs_optimized: bool = False,
        ephemeral_storage: bool = False,
        placement_group_arn: str | None = None,
    ) -> None:
        self.ec2_backend = ec2_backend
        self.id = f"cr-{random_resource_id(17)}"
        self.owner_id = ec2_backend.account_id
        self.region = ec2_backend.region_name
        self.instance_type = instance_type
        self.instance_platform = instance_platform
        self.availability_zone = availability_zone
        self.availability_zone_id = availability_zone_id
        self.tenancy = tenancy
        self.total_instance_count = instance_count
        self.instance_match_criteria = instance_match_criteria
        self.end_date_type = end_date_type
        self.end_date = end_date
        self.ebs_optimized = ebs_optimized
        self.ephemeral_storage = ephemeral_storage
        # The cluster placement group it reserves capacity in (DescribeCapacityReservations'
        # PlacementGroupArn); it can never be moved in or out of one.
        self.placement_group_arn = placement_group_arn
        self.reservation_type = DEFAULT_TYPE
        self.create_date = CLOCK.now()
        self.start_date = self.create_date
        self.commitment_info: dict[str, Any] | None = None
        self.delivery_preference: str | None = None
        self.capacity_block_id: str | None = None
        self.interruptible = False
        # On an interruptible reservation: its source; on a source: its allocation.
        self.interruption_info: dict[str, Any] | None = None
        self.interruptible_capacity_allocation: dict[str, Any] | None = None
        self.zero_size_preference: str | None = None
        self.commitment_waived = False
        # When the lifecycle (see `lifecycle`) moves it on: assessment, payment.
        self.assessed_at: datetime | None = None
        self.paid_at: datetime | None = None
        self.expiry_warned = False
        self.instances_terminated = False
        # A Capacity Block's extensions (`extension_payments.BlockExtension`), oldest first.
        self.block_extensions: list[Any] = []
        # "Capacity Reservation states": `pending` while capacity is provisioned, then `active`.
        self.active_from = CONSISTENCY.reservation_active_at(self.create_date)
        self.used = 0
        self.instance_ids: set[str] = set()
        # Running instances are taken in once, when the reservation is first seen active.
        self.took_in_running = False
        self._state = ACTIVE

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        # Its table's schedule looks at it again at the next settle (`settling`).
        schedule = self.__dict__.get("_schedule")
        if schedule is not None:
            schedule.note_changed(self.id)

    def watched_by(self, schedule: Any) -> None:
        """Tell `schedule` (`settling.Schedule`) of every attribute set from now on."""
        self.__dict__["_schedule"] = schedule

    @property
    def capacity_reservation_id(self) -> str:
        return self.id

    @property
    def capacity_reservation_arn(self) -> str:
        return f"arn:aws:ec2:{self.region}:{self.owner_id}:capacity-reservation/{self.id}"

    @property
    def state(self) -> str:
        if self._state == ACTIVE and CLOCK.now() < self.active_from:
            return PENDING
        return self._state

    @property
    def market(self) -> str:
        """The InstanceMarketOptions.MarketType a launch must name to run here."""
        if self.reservation_type == CAPACITY_BLOCK:
            return CAPACITY_BLOCK_MARKET
        if self.interruptible:
            return INTERRUPTIBLE_MARKET
        return ON_DEMAND_MARKET

    @property
    def is_future_dated(self) -> bool:
        return self.commitment_info is not None

    @property
    def is_ended(self) -> bool:
        return self._state in ENDED

    def move_to(self, state: str, at: datetime | None = None) -> None:
        """Enter `state`; a future-dated reservation says so on the default bus ("Monitor state
        changes for future-dated Capacity Reservations"), stamped `at` (when it was due)."""
        self._state = state
        self._announce(state, at)

    def _announce(self, state: str, at: datetime | None) -> None:
        detail_type = FUTURE_DATED_STATE_EVENTS.get(state)
        if not self.is_future_dated or detail_type is None:
            return
        EC2_EVENTS.emit(
            self.ec2_backend.account_id,
            self.ec2_backend.region_name,
            detail_type,
            at or CLOCK.now(),
            [self.capacity_reservation_arn],
            {"capacity-reservation-id": self.id, "state": state},
        )

    @property
    def available_instance_count(self) -> int:
        return max(0, self.total_instance_count - self.used)

    @property
    def tags(self) -> list[dict[str, str]]:
        return [{"Key": tag["key"], "Value": tag["value"]} for tag in self.get_tags()]

    @property
    def is_active(self) -> bool:
        return self.state == ACTIVE

    def is_due_to_expire(self, now: datetime | None = None) -> bool:
        if self._state != ACTIVE or self.end_date_type != "limited" or self.end_date is None:
            return False
        ends = aware(self.end_date)
        if self.reservation_type != CAPACITY_BLOCK:
            ends += END_DATE_SETTINGS.lag(self.id)
        return ends <= aware(now or CLOCK.now())

    def end(self, state: str) -> None:
        self._state = state
        self._announce(state, None)

    @property
    def placement_group(self) -> str | None:
        """The name of its cluster placement group (the ARN's last path part), if any."""
        return self.placement_group_arn.rsplit("/", 1)[-1] if self.placement_group_arn else None

    def mismatch(self, attributes: InstanceAttributes, *, any_group: bool = False) -> str | None:
        """Why an instance with these attributes cannot run here, or None when it can.

        "Use Capacity Reservations with cluster placement groups"
        (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html) and "Launch instances
        into an existing Capacity Reservation"
        (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html):
        a reservation created in a cluster placement group serves instances launched in that
        placement group. `any_group`: a Capacity Reservation group targeted without a placement
        group, which may use its members in any placement group (see `allocation`)."""
        if (
            self.placement_group is not None
            and not any_group
            and attributes.placement_group != self.placement_group
        ):
            return (
                f"The instance placement group '{attributes.placement_group or ''}' does not "
                f"match the placement group '{self.placement_group}' of Capacity Reservation "
                f"{self.id}."
            )
        expected = {
            "instance type": (self.instance_type, attributes.instance_type),
            "platform": (self.instance_platform, attributes.platform),
            "Availability Zone": (self.availability_zone, attributes.availability_zone),
            "tenancy": (self.tenancy, attributes.tenancy),
        }
        for name, (ours, theirs) in expected.items():
            if ours != theirs:
                return (
                    f"The instance {name} '{theirs}' does not match the {name} '{ours}' "
                    f"of Capacity Reservation {self.id}."
                )
        return None

    def get_filter_value(self, filter_name: str, method_name: str | None = None) -> Any:
        values = {
            "capacity-reservation-id": self.id,
            "state": self.state,
            "instance-type": self.instance_type,
            "availability-zone": self.availability_zone,
            "instance-platform": self.instance_platform,
            "tenancy": self.tenancy,
            "instance-match-criteria": self.instance_match_criteria,
            "owner-id": self.owner_id,
            "end-date-type": self.end_date_type,
            "placement-group-arn": self.placement_group_arn,
        }
        if filter_name in values:
            return values[filter_name]
        return super().get_filter_value(filter_name, "DescribeCapacityReservations")

    def matches_filters(self, filters: dict[str, list[str]]) -> bool:
        """AWS filter semantics: any value within a filter, every filter across them."""
        for name, wanted in filters.items():
            value = self.get_filter_value(name)
            have = value if isinstance(value, list) else [value]
            if not {str(item) for item in have if item is not None} & set(wanted):
                return False
        return True

    def summary(self) -> dict[str, object]:
        """The reservation as GET /moto-capacity/state reports it."""
        return {
            "accountId": self.owner_id,
            "region": self.region,
            "capacityReservationId": self.id,
            "instanceType": self.instance_type,
            "instancePlatform": self.instance_platform,
            "availabilityZone": self.availability_zone,
            "tenancy": self.tenancy,
            "instanceMatchCriteria": self.instance_match_criteria,
            "state": self.state,
            "reservationType": self.reservation_type,
            "interruptible": self.interruptible,
            "placementGroupArn": self.placement_group_arn,
            "startDate": aware(self.start_date).isoformat(),
            "endDate": aware(self.end_date).isoformat() if self.end_date else None,
            "totalInstanceCount": self.total_instance_count,
            "availableInstanceCount": self.available_instance_count,
            "instanceIds": sorted(self.instance_ids),
        }
