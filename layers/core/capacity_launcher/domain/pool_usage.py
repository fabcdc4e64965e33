"""What a pool's usage is made of: leases of workers launching, and members (counted instances)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from capacity_launcher.domain.quantities import Resources


@dataclass(frozen=True)
class Lease:
    """Limits a worker holds while it launches; settled into members, or reclaimed if it dies."""

    pool: str
    lease_id: str
    count: int
    amount: Resources
    expires_at: int
    settled: bool = False
    # The cohort-and-flavor quota usage it also holds (None: no quota governs it), and for whom.
    quota_usage: str | None = None
    requester: str | None = None


@dataclass(frozen=True)
class Member:
    """One instance counted in its pool's usage, with the amount it was counted for."""

    pool: str
    instance_id: str
    amount: Resources
    counted_at: int
    # The quota usage it is counted in, if any (released with the member, so exactly once).
    quota_usage: str | None = None
    requester: str | None = None


@dataclass(frozen=True)
class Recount:
    """What an absolute recompute of a pool's usage found (and wrote, if `repaired`)."""

    stored: Resources
    recomputed: Resources
    repaired: bool
    # The members it read (the pool's membership as of that read), so no caller reads them again.
    members: tuple[Member, ...] = ()


@dataclass(frozen=True)
class QuotaRecount:
    """What a recount of one cohort-and-flavor quota usage item found (and wrote, if
    `repaired`): use by (requester, NodePool)."""

    usage_item: str
    stored: Mapping[tuple[str, str], Resources]
    recounted: Mapping[tuple[str, str], Resources]
    repaired: bool
