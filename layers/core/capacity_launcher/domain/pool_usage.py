"""What a pool's usage is made of: leases of workers launching, and members (counted instances)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from capacity_launcher.domain.errors import UnreadyLimitReached
from capacity_launcher.domain.quantities import PoolLimits, Resources


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


def total(amounts: Iterable[Resources]) -> Resources:
    """The sum of `amounts`."""
    summed = Resources.ZERO
    for amount in amounts:
        summed = summed + amount
    return summed


def usage_of(counted: Iterable[Lease | Member]) -> Resources:
    """A pool's usage as its items explain it: the sum of its unsettled leases and members."""
    return total(item.amount for item in counted)


def quota_use(
    counted: Iterable[Lease | Member], usage_item: str, pool: str
) -> dict[tuple[str, str], Resources]:
    """Use by (requester, pool) of the leases and members of `pool` that hold quota usage item
    `usage_item` (what that item should say of the pool)."""
    held: dict[tuple[str, str], Resources] = {}
    for item in counted:
        if item.quota_usage == usage_item and item.requester:
            where = (item.requester, pool)
            held[where] = held.get(where, Resources.ZERO) + item.amount
    return held


def same_use(
    stored: Mapping[tuple[str, str], Resources], counted: Mapping[tuple[str, str], Resources]
) -> bool:
    """Whether two readings of quota use agree (a requester at zero is one with no use)."""
    return _nonzero(stored) == _nonzero(counted)


def _nonzero(usage: Mapping[tuple[str, str], Resources]) -> dict[tuple[str, str], Resources]:
    return {k: v for k, v in usage.items() if not v.is_zero()}


@dataclass(frozen=True)
class Readiness:
    """A pool's instances for `limits.unready`: those launching or counted, and those of them not
    yet ready. A lease not yet settled counts as its `count` unready instances (its launch may be
    under way); a member is unready until the sync has marked it ready."""

    unready: int
    instances: int

    @classmethod
    def of(cls, leased: int, members: Iterable[str], ready: Iterable[str]) -> Readiness:
        counted = set(members)
        return cls(leased + len(counted - set(ready)), leased + len(counted))


def unready_refusal(
    pool: str, limits: PoolLimits | None, found: Readiness
) -> UnreadyLimitReached | None:
    """Why `limits.unready` refuses a new lease in the pool now (more unready instances than it
    allows, docs/provisioner.md), or None when it does not (or the pool sets no such limit)."""
    if limits is None or limits.unready is None:
        return None
    allowed = limits.unready_allowed(found.instances)
    if allowed is None or found.unready <= allowed:
        return None
    return UnreadyLimitReached(pool, found.unready, allowed, limits.unready)
