"""Finite on-demand and spot capacity per offering, and the price table strategies sort by."""

from dataclasses import dataclass
from typing import Literal

# `capacity-block`: instances Capacity Block offerings may still sell in a zone.
CapacityType = Literal["on-demand", "spot", "capacity-block"]
CAPACITY_TYPES: tuple[CapacityType, ...] = ("on-demand", "spot", "capacity-block")

# Linux on-demand USD/hour in us-east-1 (public price list, 2025); enough to order overrides.
ON_DEMAND_PRICES: dict[str, float] = {
    "t3.micro": 0.0104,
    "t3.small": 0.0208,
    "t3.medium": 0.0416,
    "t3.large": 0.0832,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "m6i.large": 0.096,
    "m6i.xlarge": 0.192,
    "m7i.large": 0.1008,
    "m6g.large": 0.077,
    "m7g.large": 0.0816,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c6i.large": 0.085,
    "c6g.large": 0.068,
    "c7g.large": 0.0725,
    "r5.large": 0.126,
    "r6i.large": 0.126,
    "g5.xlarge": 1.006,
    "g5.12xlarge": 5.672,
    "g6.xlarge": 0.8048,
    "inf2.xlarge": 0.7582,
    "trn1.32xlarge": 21.50,
    "p4d.24xlarge": 32.7726,
    "p5.48xlarge": 98.32,
}
# Spot is modelled as a flat discount on the on-demand price.
SPOT_DISCOUNT = 0.3
UNKNOWN_PRICE = float("inf")


def price_of(instance_type: str, capacity_type: CapacityType) -> float:
    """Hourly price; types missing from the table sort after every known type."""
    price = ON_DEMAND_PRICES.get(instance_type, UNKNOWN_PRICE)
    return price * SPOT_DISCOUNT if capacity_type == "spot" else price


def upfront_fee(instance_type: str, hours: int, count: int) -> str | None:
    """A Capacity Block's (or extension's) fee: hourly price x hours x count, in USD; None for
    types the price table lacks (EC2's answer then leaves it out)."""
    price = price_of(instance_type, "on-demand")
    if price == UNKNOWN_PRICE:
        return None
    return f"{price * hours * count:.2f}"


@dataclass(frozen=True)
class Offering:
    """Capacity EC2 sells outside reservations: one instance type, zone and capacity type."""

    region: str
    instance_type: str
    zone: str
    capacity_type: CapacityType


class OfferingPools:
    """Free capacity per offering. An offering without a pool is unlimited.

    Not thread-safe on its own: callers hold `ledger.CAPACITY_LOCK`.
    """

    def __init__(self) -> None:
        self._free: dict[Offering, int] = {}

    def set(self, offering: Offering, count: int) -> None:
        if count < 0:
            raise ValueError("count must be >= 0")
        self._free[offering] = count

    def free(self, offering: Offering) -> int | None:
        """Free instances in the pool, or None when the offering is unlimited."""
        return self._free.get(offering)

    def take(self, offering: Offering, count: int) -> None:
        if offering in self._free:
            self._free[offering] -= count

    def give_back(self, offering: Offering, count: int = 1) -> None:
        if offering in self._free:
            self._free[offering] += count

    def clear(self) -> None:
        self._free.clear()

    def snapshot(self) -> list[dict[str, object]]:
        return [
            {
                "region": offering.region,
                "instanceType": offering.instance_type,
                "zone": offering.zone,
                "capacityType": offering.capacity_type,
                "count": count,
            }
            for offering, count in sorted(self._free.items(), key=lambda item: repr(item[0]))
        ]
