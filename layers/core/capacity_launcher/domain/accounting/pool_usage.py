"""What a pool's usage is made of: leases of workers launching, and members (counted instances);
and how a lease is fitted into the room its pool's limits (and its quota) leave."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from capacity_launcher.domain.errors import UnreadyLimitReached
from capacity_launcher.domain.quantities import PoolLimits, Resources

# Whether a lease of this amount fits the room left (the pool's limits beside its usage, and the
# requester's quota): a bound per dimension, so more of any dimension never fits where less
# does not.
Room = Callable[[Resources], bool]


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
    # The instance types it covers, when it was narrowed to those that fit the room left
    # (`fit_lease`); None: every candidate of the request.
    instance_types: frozenset[str] | None = None


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
class LeaseFit:
    """A lease fitted into the room left: `count` instances of `per_instance` (the largest of
    the types it covers, per dimension). `instance_types` None: every candidate is covered;
    otherwise only those, and `left_out` names the candidates that did not fit."""

    count: int
    per_instance: Resources
    instance_types: frozenset[str] | None = None
    left_out: tuple[str, ...] = ()


def largest(sizes: Iterable[Resources]) -> Resources:
    """The most any one of `sizes` uses, per dimension, as one instance."""
    most = Resources.ZERO
    for size in sizes:
        most = Resources(
            cpu=max(most.cpu, size.cpu),
            memory_mib=max(most.memory_mib, size.memory_mib),
            gpu=max(most.gpu, size.gpu),
            instances=1,
        )
    return most


def held_by(lease: Lease, sizes: Mapping[str, Resources]) -> frozenset[str]:
    """The instance types (of `sizes`: type -> what one instance uses) that `lease.count`
    instances of fit in what the lease holds, and that it covers. A lease an earlier delivery
    took was sized by the candidates of its time: a pool applied since may allow larger ones,
    which it never made room for."""
    covered = lease.instance_types
    return frozenset(
        name
        for name, size in sizes.items()
        if (covered is None or name in covered)
        and all(left >= 0 for left in (lease.amount - size * lease.count).amounts().values())
    )


@dataclass(frozen=True)
class UnleasedFit:
    """Instances launched under a lease that was reclaimed before it settled: those the lease
    taken for them again holds (`kept`), and those it does not (`over`)."""

    kept: tuple[str, ...]
    over: tuple[str, ...]


def kept_under(
    lease: Lease | None,
    launched: Mapping[str, Resources],
    types: Mapping[str, str],
    least: int,
) -> UnleasedFit:
    """Which of the instances `launched` (id -> what it uses; `types`: id -> its instance type)
    the lease taken for them again holds. Their lease expired under the launch and was
    reclaimed: the room and the quota it held went back, and another request may have been
    admitted into them since, so they are leased again as a new request is (the pool's limits
    and the requester's quota), for exactly these instances, and kept only as far as that lease
    goes: those of the types it covers, in the order of their ids, each while the lease's count
    and amount still hold it; none when no lease was granted, or fewer than `least` are held
    (a gang short of its minCount keeps nothing)."""
    kept: list[str] = []
    taken = Resources.ZERO
    if lease is not None:
        covered = lease.instance_types
        for instance_id in sorted(launched):
            if len(kept) >= lease.count:
                break
            if covered is not None and types.get(instance_id) not in covered:
                continue
            after = taken + launched[instance_id]
            if all(left >= 0 for left in (lease.amount - after).amounts().values()):
                kept.append(instance_id)
                taken = after
    if len(kept) < least:
        kept = []
    return UnleasedFit(tuple(kept), tuple(i for i in sorted(launched) if i not in kept))


def room_left(limits: PoolLimits | None, used: Resources) -> Room:
    """The room a pool's `limits` leave beside what it `used` (leases and members)."""

    def fits(amount: Resources) -> bool:
        return limits is None or not (used + amount).fits_within(limits)

    return fits


def fit_lease(
    sizes: Mapping[str, Resources], count: int, least: int, room: Room, beside: int = 0
) -> LeaseFit | None:
    """The lease for up to `count` instances, at least `least` (and one), of the instance types
    `sizes` names (type -> what one instance uses) that `room` holds; None when not even `least`
    of the smallest fits.

    Sized by the largest type while `count` of it fits. Otherwise the most instances of any one
    type that fit, up to `count`, and then every type of which that many fit: no type that fits
    is left out, and the smaller types are not held back by a larger one that cannot fit (as
    Karpenter leaves out the instance types a NodePool's remaining limits cannot hold).

    `beside`: the instances the requests launched with it (one plan, the same types) still ask
    for. When they would not fit beside it at the largest type, the types are those of which
    all of them (`count + beside`) fit, if any, so that one request's lease does not take the
    room the others could launch in; otherwise it is fitted alone."""
    if not sizes:
        return None
    everything = largest(sizes.values())
    if room(everything * (count + beside)):
        return LeaseFit(count, everything)
    together = _fitting(sizes, count + beside, room) if beside > 0 else {}
    if together:
        return _covering(sizes, together, count, room)
    most = _most_of_any(list(sizes.values()), count, max(least, 1), room)
    if most is None:
        return None
    return _covering(sizes, _fitting(sizes, most, room), most, room)


def _fitting(sizes: Mapping[str, Resources], count: int, room: Room) -> dict[str, Resources]:
    """The types of which `count` instances fit `room`."""
    return {name: size for name, size in sizes.items() if room(size * count)}


def _covering(
    sizes: Mapping[str, Resources], kept: Mapping[str, Resources], count: int, room: Room
) -> LeaseFit:
    """The lease of `count` instances covering the types `kept` (each fits `count` times)."""
    per_instance = largest(kept.values())
    if not room(per_instance * count):
        # A room that is no bound per dimension: keep the smallest type that fits alone.
        name = min(kept, key=lambda n: (smallest_first(kept[n]), n))
        kept, per_instance = {name: kept[name]}, kept[name]
    left_out = tuple(sorted(set(sizes) - set(kept)))
    return LeaseFit(count, per_instance, frozenset(kept) if left_out else None, left_out)


def _most_of_any(sizes: list[Resources], count: int, least: int, room: Room) -> int | None:
    """The most instances, between `least` and `count`, of which some one type fits `room`
    (fitting is monotone in the count, so a binary search finds it); None when `least` does
    not fit."""

    def some_fit(n: int) -> bool:
        return any(room(size * n) for size in sizes)

    if least > count or not some_fit(least):
        return None
    low, high = least, count
    while low < high:
        middle = (low + high + 1) // 2
        if some_fit(middle):
            low = middle
        else:
            high = middle - 1
    return low


def smallest_first(size: Resources) -> tuple[int, Decimal, int]:
    """A sort key, smallest first: GPUs, then cores, then memory (as price estimates rank)."""
    return (size.gpu, size.cpu, size.memory_mib)


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
