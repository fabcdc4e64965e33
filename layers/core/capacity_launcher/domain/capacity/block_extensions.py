"""A Capacity Block extension as the service sees it: an offering to extend a block, and one bought.

EC2 User Guide, "Extend Capacity Blocks"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html): an extension
starts at the block's end date; once paid (`payment-succeeded`) the block's end date is the
extension's end and its reservation id stays the same. Nothing decides on them yet: the
adapter (`adapters/capacity_reservations.py`) reads offerings and buys one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

PAYMENT_SUCCEEDED = "payment-succeeded"


@dataclass(frozen=True)
class BlockExtensionOffering:
    """DescribeCapacityBlockExtensionOfferings' CapacityBlockExtensionOffering."""

    offering_id: str
    reservation_id: str
    instance_type: str
    instance_count: int
    zone: str
    starts_at: datetime
    ends_at: datetime
    duration_hours: int
    upfront_fee: Decimal | None
    currency: str | None


@dataclass(frozen=True)
class BlockExtension:
    """PurchaseCapacityBlockExtension's CapacityBlockExtension: bought, paid or not yet."""

    offering_id: str
    reservation_id: str
    status: str
    starts_at: datetime | None
    ends_at: datetime | None
    duration_hours: int
    upfront_fee: Decimal | None

    @property
    def paid(self) -> bool:
        return self.status == PAYMENT_SUCCEEDED
