"""Offerings: what can be launched where, paid how (reservations:
domain/capacity/reservations.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

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
    """The ICE-cache key (docs/contracts.md, The ICE cache): `reserved:cr-…`,
    `on-demand:TYPE:ZONE`, …"""
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
    # Claimed by another launcher when this turn tried (one claim round): key → until when.
    elsewhere: Mapping[str, float] = field(default_factory=dict)

    @property
    def allowed(self) -> frozenset[str]:
        return self.mine | self.free


@dataclass(frozen=True)
class UnavailableEntry:
    """One entry of the shared ICE cache: an offering EC2 could not serve, until `expires_at`."""

    offering: str
    reason: str
    message: str
    cached_at: str
    expires_at: int

    def to_dict(self) -> dict[str, Any]:
        """The item as docs/contracts.md names its attributes (also what `get -o json` prints)."""
        return {
            "offering": self.offering,
            "reason": self.reason,
            "message": self.message,
            "cachedAt": self.cached_at,
            "expiresAt": self.expires_at,
        }
