"""Offerings (what can be launched where, paid how) and the reservations behind them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

CapacityType = Literal["reserved", "on-demand", "spot"]
RESERVED: CapacityType = "reserved"
ON_DEMAND: CapacityType = "on-demand"
SPOT: CapacityType = "spot"


def offering_key(
    capacity_type: str,
    instance_type: str | None,
    zone: str | None,
    reservation_id: str | None = None,
) -> str:
    """The ICE-cache key of DESIGN.md: `reserved:cr-…`, `on-demand:TYPE:ZONE`, `spot:TYPE:ZONE`."""
    if capacity_type == RESERVED:
        if not reservation_id:
            raise ValueError("a reserved offering is keyed by its capacity reservation id")
        return f"{RESERVED}:{reservation_id}"
    return f"{capacity_type}:{instance_type}:{zone}"


@dataclass(frozen=True, order=True)
class Offering:
    """One (capacity type, instance type, zone) pool; reserved ones name their reservation."""

    capacity_type: CapacityType
    instance_type: str
    zone: str
    reservation_id: str | None = None

    @property
    def key(self) -> str:
        return offering_key(self.capacity_type, self.instance_type, self.zone, self.reservation_id)


@dataclass(frozen=True)
class Turn:
    """What one launch attempt may ask EC2 about, once the shared cache's single flight is done."""

    token: str
    # Claimed for this attempt: ended (cleared, or replaced by an ICE entry) once EC2 answered.
    mine: frozenset[str] = frozenset()
    # Askable without a claim: launched here a moment ago, or a claim on it ended without ICE.
    free: frozenset[str] = frozenset()
    # Found in the cache while claiming (another worker's attempt found them dry): key → reason.
    unavailable: Mapping[str, str] = field(default_factory=dict)

    @property
    def allowed(self) -> frozenset[str]:
        return self.mine | self.free


@dataclass(frozen=True)
class ReservationSnapshot:
    """What is known of one capacity reservation: from EC2 directly or from the shared sync."""

    reservation_id: str
    instance_type: str
    zone: str
    state: str
    total: int
    available: int
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    instance_match_criteria: str = "open"
    owner_id: str | None = None
    end_date: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    # Set when an insufficient-capacity error said it is full, until a sync sees capacity again.
    exhausted: bool = False

    @property
    def usable(self) -> bool:
        return self.state == "active" and self.available > 0 and not self.exhausted

    @property
    def used(self) -> int:
        return max(self.total - self.available, 0)

    @property
    def utilization(self) -> float:
        return self.used / self.total if self.total else 0.0

    def offering(self) -> Offering:
        return Offering(RESERVED, self.instance_type, self.zone, self.reservation_id)
