"""Offerings: what can be launched where, paid how (reservations: domain/reservations.py)."""

from __future__ import annotations

from dataclasses import dataclass
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
    """The ICE-cache key (README.md, The ICE cache): `reserved:cr-…`, `on-demand:TYPE:ZONE`, …"""
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
