"""A Capacity Block extension once offered or bought: what EC2 answers about it, and its payment.

EC2 User Guide, "Extend Capacity Blocks"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html), "Billing": an
extension is `payment-pending` until paid, then `payment-succeeded`, and only then the block's end
date moves to the extension's end; not paid within 12 hours, or by 35 minutes before the block
ends (whichever comes first), it is `payment-failed` and the block ends at its original end.
`lifecycle.settle` calls `settle_payments` before it looks at a block's end.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from moto_capacity.ec2.exceptions import InvalidParameterValue

from .offerings import upfront_fee
from .reservations import CapacityReservation

PAYMENT_PENDING = "payment-pending"
PAYMENT_FAILED = "payment-failed"
PAYMENT_SUCCEEDED = "payment-succeeded"
EARLIEST_BEFORE_END = timedelta(days=56)
LATEST_BEFORE_END = timedelta(hours=1)
PAYMENT_WINDOW = timedelta(hours=12)
PAYMENT_DEADLINE_BEFORE_END = timedelta(minutes=35)
HISTORY_FILTERS = (
    "availability-zone",
    "availability-zone-id",
    "capacity-block-extension-offering-id",
    "capacity-block-extension-status",
    "capacity-reservation-id",
    "instance-type",
)


@dataclass(frozen=True)
class ExtensionOffering:
    """One CapacityBlockExtensionOffering, remembered so that a purchase can find it."""

    id: str
    reservation_id: str
    instance_type: str
    instance_count: int
    availability_zone: str
    availability_zone_id: str | None
    block_start: datetime
    start_date: datetime
    end_date: datetime
    duration_hours: int

    @property
    def upfront_fee(self) -> str | None:
        return upfront_fee(self.instance_type, self.duration_hours, self.instance_count)

    def as_answer(self) -> dict[str, Any]:
        return {
            "CapacityBlockExtensionOfferingId": self.id,
            "InstanceType": self.instance_type,
            "InstanceCount": self.instance_count,
            "AvailabilityZone": self.availability_zone,
            "AvailabilityZoneId": self.availability_zone_id,
            "StartDate": self.block_start,
            "CapacityBlockExtensionStartDate": self.start_date,
            "CapacityBlockExtensionEndDate": self.end_date,
            "CapacityBlockExtensionDurationHours": self.duration_hours,
            "UpfrontFee": self.upfront_fee,
            "CurrencyCode": "USD",
            "Tenancy": "default",
        }


@dataclass
class BlockExtension:
    """A purchased extension and its payment, on the reservation it extends."""

    offering: ExtensionOffering
    purchase_date: datetime
    paid_at: datetime
    fails_at: datetime
    status: str = field(default=PAYMENT_PENDING)

    def as_answer(self) -> dict[str, Any]:
        offering = self.offering
        return {
            "CapacityReservationId": offering.reservation_id,
            "InstanceType": offering.instance_type,
            "InstanceCount": offering.instance_count,
            "AvailabilityZone": offering.availability_zone,
            "AvailabilityZoneId": offering.availability_zone_id,
            "CapacityBlockExtensionOfferingId": offering.id,
            "CapacityBlockExtensionDurationHours": offering.duration_hours,
            "CapacityBlockExtensionStatus": self.status,
            "CapacityBlockExtensionPurchaseDate": self.purchase_date,
            "CapacityBlockExtensionStartDate": offering.start_date,
            "CapacityBlockExtensionEndDate": offering.end_date,
            "UpfrontFee": offering.upfront_fee,
            "CurrencyCode": "USD",
        }

    def matches_filters(self, filters: dict[str, list[str]]) -> bool:
        offering = self.offering
        values = {
            "availability-zone": offering.availability_zone,
            "availability-zone-id": offering.availability_zone_id,
            "capacity-block-extension-offering-id": offering.id,
            "capacity-block-extension-status": self.status,
            "capacity-reservation-id": offering.reservation_id,
            "instance-type": offering.instance_type,
        }
        for name, wanted in filters.items():
            if name not in values:
                raise InvalidParameterValue(
                    f"The filter '{name}' is invalid; use one of {', '.join(HISTORY_FILTERS)}."
                )
            if values[name] not in wanted:
                return False
        return True


def settle_payments(reservation: CapacityReservation, now: datetime) -> None:
    """Pay or fail each pending extension due by `now`; a paid one moves the end date."""
    for extension in reservation.block_extensions:
        if extension.status != PAYMENT_PENDING:
            continue
        if extension.paid_at <= now and extension.paid_at < extension.fails_at:
            extension.status = PAYMENT_SUCCEEDED
            reservation.end_date = extension.offering.end_date
            # The block's end moved: its warning and terminations belong to the new end.
            reservation.expiry_warned = False
            reservation.instances_terminated = False
        elif extension.fails_at <= now:
            extension.status = PAYMENT_FAILED
