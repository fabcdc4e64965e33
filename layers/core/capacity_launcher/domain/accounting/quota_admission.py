"""Admission against CapacityQuotas: within nominal, by borrowing in the cohort, or refused; and
which borrowed instances to release when a lender reclaims its quota.

Per flavor (NodePool) and covered resource, a quota's nominal quota N splits into a guaranteed
part G = N - lendingLimit (never lent) and a lendable part. The cohort's pool is the sum of the
lendable parts; every member's use above its guaranteed part draws on it: max(0, used - G). An
admission keeps that sum within the pool, so the cohort never runs more than the sum of its
nominal quotas (sum(used) <= sum(G) + pool). Pure arithmetic, no I/O: docs/quotas.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum

from capacity_launcher.domain.accounting.pool_usage import LeaseFit, Room, fit_lease, smallest_first
from capacity_launcher.domain.apis.quotas import (
    CapacityQuota,
    QuotaResource,
    ReclaimPolicy,
    format_amount,
    quota_for,
)
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import DIMENSIONS, Resources

ZERO = Decimal(0)
# Requester and NodePool: how usage is collected (instance items carry both).
UsageKey = tuple[str, str]
# DynamoDB's bound on the items of one transaction, and the lease's items beside its quota usage
# items (the pool's usage, the lease, the pool's stored limits, the quota generation): a group of
# MAX_FLAVORS pools keeps an admission within one transaction (a test holds it).
TRANSACTION_ITEMS = 100
LEASE_ITEMS = 4


class AdmissionKind(StrEnum):
    WITHIN_NOMINAL = "WithinNominal"
    BORROWING = "Borrowing"


@dataclass(frozen=True)
class Admission:
    """An admitted demand; ``borrowed`` by resource, and from whom (``lenders``)."""

    quota: str
    flavor: str
    kind: AdmissionKind
    borrowed: dict[str, Decimal] = field(default_factory=dict)
    lenders: dict[str, dict[str, Decimal]] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaInstance:
    """A running instance, as reclaim sees it: whose, where, how much, and when it started."""

    instance_id: str
    requester: str
    flavor: str
    resources: Resources
    launched_at: str  # ISO-8601: orders newest first


@dataclass(frozen=True)
class ReclaimPlan:
    """Borrowed instances to release; ``enforced``: the lender's policy lets them be terminated
    once its grace period has passed (otherwise their owners are only asked)."""

    instances: list[QuotaInstance]
    enforced: bool


@dataclass(frozen=True)
class Ledger:
    """One flavor and resource in one cohort: every covering member's terms and use."""

    terms: Mapping[str, QuotaResource]
    used: Mapping[str, Decimal]
    limit: Mapping[str, Decimal | None]  # the most a member may use; None: the pool decides

    @property
    def pool(self) -> Decimal:
        return sum((t.lendable for t in self.terms.values()), ZERO)

    def draw(self, quota: str, used: Decimal | None = None) -> Decimal:
        """What a member's use takes from the pool: its use above its guaranteed part."""
        amount = self.used.get(quota, ZERO) if used is None else used
        return max(ZERO, amount - self.terms[quota].guaranteed)

    @property
    def pool_used(self) -> Decimal:
        return sum((self.draw(q) for q in self.terms), ZERO)

    def borrowed(self, quota: str) -> Decimal:
        return max(ZERO, self.used.get(quota, ZERO) - self.terms[quota].nominal_quota)

    def idle(self, quota: str) -> Decimal:
        """The member's lendable quota that it does not use itself."""
        terms = self.terms[quota]
        own = min(self.used.get(quota, ZERO), terms.nominal_quota)
        return terms.lendable - max(ZERO, own - terms.guaranteed)

    def allocatable(self, quota: str) -> Decimal:
        """How much more the member may use now without reclaim."""
        used = self.used.get(quota, ZERO)
        free = max(ZERO, self.terms[quota].guaranteed - used) + (self.pool - self.pool_used)
        bound = self.limit[quota]
        return max(ZERO, free if bound is None else min(free, bound - used))


class Cohort:
    """The quotas that lend to each other, and what each uses, per flavor and resource."""

    def __init__(
        self, quotas: Sequence[CapacityQuota], usage: Mapping[UsageKey, Resources]
    ) -> None:
        self.quotas = {q.name: q for q in quotas}
        self._usage = usage

    @classmethod
    def of(
        cls,
        quota: CapacityQuota,
        quotas: Iterable[CapacityQuota],
        usage: Mapping[UsageKey, Resources],
    ) -> Cohort:
        """The cohort ``quota`` belongs to, among ``quotas`` (a quota without one is alone)."""
        return cls([q for q in quotas if q.cohort_key == quota.cohort_key], usage)

    def used(self, quota: str, flavor: str) -> Resources:
        """What a quota's requesters use in a flavor."""
        total = Resources.ZERO
        member = self.quotas[quota]
        for (requester, used_in), amount in self._usage.items():
            if used_in == flavor and member.covers(requester):
                total = total + amount
        return total

    def ledger(self, flavor: str, resource: str) -> Ledger:
        terms: dict[str, QuotaResource] = {}
        used: dict[str, Decimal] = {}
        limit: dict[str, Decimal | None] = {}
        for name, quota in self.quotas.items():
            spec = quota.flavor(flavor)
            term = None if spec is None else spec.resource(resource)
            if term is None:
                continue
            terms[name] = term
            used[name] = self.used(name, flavor).amount(resource)
            limit[name] = _most(quota, term)
        return Ledger(terms, used, limit)

    def lent(self, flavor: str, resource: str) -> dict[str, Decimal]:
        """Who lends the cohort's borrowed amount: lowest priority first, then by name."""
        ledger = self.ledger(flavor, resource)
        return self._lent(ledger, None)

    def _lent(self, ledger: Ledger, borrower: str | None) -> dict[str, Decimal]:
        total = sum((ledger.borrowed(q) for q in ledger.terms), ZERO)
        return self._attribute(ledger, total, {}, borrower)

    def _attribute(
        self,
        ledger: Ledger,
        amount: Decimal,
        skip: Mapping[str, Decimal],
        borrower: str | None,
    ) -> dict[str, Decimal]:
        """``amount`` spread over lenders' idle quota, after ``skip`` (already attributed);
        ``borrower`` is no lender (its own idle quota goes to its own demand)."""
        shares: dict[str, Decimal] = {}
        lenders = sorted(ledger.terms, key=lambda q: (self.quotas[q].spec.priority, q))
        for lender in lenders:
            if amount <= 0:
                break
            if lender == borrower:
                continue
            take = min(amount, max(ZERO, ledger.idle(lender) - skip.get(lender, ZERO)))
            if take > 0:
                shares[lender] = take
                amount -= take
        return shares

    def admit(self, quota: str, flavor: str, demand: Resources) -> Admission:
        """Admit ``demand`` for ``quota`` in ``flavor``, or raise QuotaExceeded saying why.

        A demand is admitted within the quota's nominal quota, then by borrowing the cohort's
        idle lendable quota within borrowingLimit. When the quota's own nominal quota is lent
        out, QuotaExceeded carries ``reclaim`` (per resource): what ``reclaim`` must free first.
        """
        own = self.quotas[quota]
        spec = own.flavor(flavor)
        if spec is None:
            raise QuotaExceeded(quota, flavor, None, f"has no quota in NodePool {flavor}")
        self._check_group_limits(own, flavor, demand)
        borrowed: dict[str, Decimal] = {}
        lenders: dict[str, dict[str, Decimal]] = {}
        reclaim: dict[str, Decimal] = {}
        for term in spec.resources:
            need = demand.amount(term.name)
            if need <= 0:
                continue
            ledger = self.ledger(flavor, term.name)
            used = ledger.used[quota]
            after = used + need
            bound = ledger.limit[quota]
            if bound is not None and after > bound:
                raise QuotaExceeded(
                    quota, flavor, term.name, _over_limit(own, term, used, need, bound)
                )
            more = after - max(used, term.nominal_quota) if after > term.nominal_quota else ZERO
            short = ledger.pool_used - ledger.draw(quota) + ledger.draw(quota, after) - ledger.pool
            if short > 0 and more > 0:
                raise QuotaExceeded(
                    quota,
                    flavor,
                    term.name,
                    f"needs to borrow {_shown(term.name, more)} but cohort {own.spec.cohort} "
                    f"has no idle quota to lend (short by {_shown(term.name, short)})",
                )
            if short > 0:
                reclaim[term.name] = short
                continue
            if more > 0:
                borrowed[term.name] = more
                already = self._lent(ledger, quota)
                lenders[term.name] = self._attribute(ledger, more, already, quota)
        if reclaim:
            resource = min(reclaim)
            raise QuotaExceeded(
                quota,
                flavor,
                resource,
                f"nominal quota is lent out in cohort {own.spec.cohort}: "
                f"{_shown(resource, reclaim[resource])} must be reclaimed first",
                reclaim=reclaim,
            )
        kind = AdmissionKind.BORROWING if borrowed else AdmissionKind.WITHIN_NOMINAL
        return Admission(quota, flavor, kind, borrowed, lenders)

    def _check_group_limits(self, quota: CapacityQuota, flavor: str, demand: Resources) -> None:
        for group in quota.spec.resource_groups:
            if group.limits is None or not any(f.name == flavor for f in group.flavors):
                continue
            total = Resources.ZERO
            for member in group.flavors:
                total = total + self.used(quota.name, member.name)
            for resource in DIMENSIONS:
                bound = group.limits.limit_for(resource)
                if bound is not None and total.amount(resource) + demand.amount(resource) > bound:
                    pools = ", ".join(f.name for f in group.flavors)
                    raise QuotaExceeded(
                        quota.name,
                        flavor,
                        resource,
                        f"over the limit of {_shown(resource, bound)} across NodePools {pools} "
                        f"(using {_shown(resource, total.amount(resource))}, "
                        f"asking {_shown(resource, demand.amount(resource))})",
                    )

    def reclaim(
        self,
        quota: str,
        flavor: str,
        short: Mapping[str, Decimal],
        instances: Iterable[QuotaInstance],
        policy: ReclaimPolicy | None = None,
    ) -> list[QuotaInstance] | None:
        """Borrowed instances to release so ``quota`` gets ``short`` of its nominal quota back.

        Lowest-priority borrower first, then newest instance; a borrower gives back only what it
        borrows (never from within its own nominal quota), and only the borrowers ``policy``
        (by default ``quota``'s reclaimWithinCohort) allows. None when they cannot free enough.
        """
        own = self.quotas[quota]
        policy = policy or own.spec.preemption.reclaim_within_cohort
        if policy is ReclaimPolicy.NEVER:
            return None
        ledgers = {resource: self.ledger(flavor, resource) for resource in short}
        candidates = self._reclaim_candidates(quota, flavor, instances, policy)
        return _release_until_met(candidates, short, ledgers)

    def _reclaim_candidates(
        self,
        quota: str,
        flavor: str,
        instances: Iterable[QuotaInstance],
        policy: ReclaimPolicy,
    ) -> list[tuple[str, QuotaInstance]]:
        """(borrower, instance) that ``policy`` lets ``quota`` reclaim, in the order to take them:
        lowest-priority borrower first, then newest instance."""
        own = self.quotas[quota]
        candidates = []
        for instance in instances:
            borrower = self.owner(instance.requester, flavor)
            if instance.flavor != flavor or borrower is None or borrower == quota:
                continue
            if reclaim_refusal(own, self.quotas[borrower], policy) is not None:
                continue
            candidates.append((borrower, instance))
        # Newest first within a priority: stable sorts, the later key first.
        candidates.sort(key=lambda c: (c[1].launched_at, c[1].instance_id), reverse=True)
        candidates.sort(key=lambda c: self.quotas[c[0]].spec.priority)
        return candidates

    def releasable(
        self, flavor: str, resources: Iterable[str], instances: Iterable[QuotaInstance]
    ) -> list[QuotaInstance]:
        """Those of ``instances`` (taken in order) that their owners still borrow: releasing them
        all keeps every owner at or above its nominal quota in each of ``resources``. What a
        reclaim chose may no longer be borrowed when it is enforced (the owner released others)."""
        ledgers = {resource: self.ledger(flavor, resource) for resource in resources}
        released: dict[tuple[str, str], Decimal] = {}
        kept = []
        for instance in instances:
            borrower = self.owner(instance.requester, flavor)
            if instance.flavor != flavor or borrower is None:
                continue
            gives = {
                r: instance.resources.amount(r) if borrower in ledger.terms else ZERO
                for r, ledger in ledgers.items()
            }
            if any(
                released.get((borrower, r), ZERO) + amount > ledgers[r].borrowed(borrower)
                for r, amount in gives.items()
                if amount > 0
            ):
                continue
            kept.append(instance)
            for r, amount in gives.items():
                released[(borrower, r)] = released.get((borrower, r), ZERO) + amount
        return kept

    def reclaim_plan(
        self,
        quota: str,
        flavor: str,
        short: Mapping[str, Decimal],
        instances: Iterable[QuotaInstance],
    ) -> ReclaimPlan | None:
        """What to ask back for ``quota``: the choice its reclaimWithinCohort allows (enforced:
        terminated after the grace period), else the choice among every borrower (only asked:
        never terminated). None when no choice frees ``short`` without cutting into a member's
        own nominal quota."""
        candidates = list(instances)
        chosen = self.reclaim(quota, flavor, short, candidates)
        if chosen is not None:
            return ReclaimPlan(chosen, enforced=True)
        asked = self.reclaim(quota, flavor, short, candidates, ReclaimPolicy.ANY)
        return None if asked is None else ReclaimPlan(asked, enforced=False)

    def owner(self, requester: str, flavor: str) -> str | None:
        """The member quota covering ``requester`` in ``flavor`` (one per flavor: conflicts)."""
        for name, quota in sorted(self.quotas.items()):
            if quota.flavor(flavor) is not None and quota.covers(requester):
                return name
        return None


def reclaim_refusal(
    lender: CapacityQuota, borrower: CapacityQuota, policy: ReclaimPolicy | None = None
) -> str | None:
    """Why ``policy`` (by default ``lender``'s reclaimWithinCohort) does not let ``lender``
    reclaim from ``borrower``; None when it does."""
    policy = policy or lender.spec.preemption.reclaim_within_cohort
    if policy is ReclaimPolicy.NEVER:
        return f"CapacityQuota {lender.name}'s reclaimWithinCohort is Never now"
    mine, theirs = lender.spec.priority, borrower.spec.priority
    if policy is ReclaimPolicy.LOWER_PRIORITY and theirs >= mine:
        return (
            f"CapacityQuota {borrower.name}'s priority {theirs} is not lower than "
            f"{lender.name}'s {mine} (reclaimWithinCohort LowerPriority)"
        )
    return None


def _most(quota: CapacityQuota, term: QuotaResource) -> Decimal | None:
    """The most a member may use of one resource: nominal, plus borrowingLimit if it borrows."""
    if not (quota.spec.allow_borrowing and quota.spec.cohort):
        return term.nominal_quota
    if term.borrowing_limit is None:
        return None
    return term.nominal_quota + term.borrowing_limit


def _over_limit(
    quota: CapacityQuota, term: QuotaResource, used: Decimal, need: Decimal, bound: Decimal
) -> str:
    what = "nominalQuota" if bound == term.nominal_quota else "nominalQuota + borrowingLimit"
    name = term.name
    return (
        f"over {what} {_shown(name, bound)}: using {_shown(name, used)}, "
        f"asking {_shown(name, need)}"
    )


def _shown(resource: str, amount: Decimal) -> str:
    return format_amount(resource, amount)


def most_admitted(
    cohort: Cohort, quota: str, flavor: str, per_instance: Resources, wanted: int, least: int
) -> int:
    """The most instances, between ``least`` and ``wanted``, that ``quota`` admits now.

    Raises the QuotaExceeded of ``least`` instances (at least one) when even those do not fit.
    Admission is monotone in the demand, so a binary search finds the most.
    """
    least = max(least, 1)
    cohort.admit(quota, flavor, per_instance * least)
    low, high = least, max(wanted, least)
    while low < high:
        middle = (low + high + 1) // 2
        try:
            cohort.admit(quota, flavor, per_instance * middle)
            low = middle
        except QuotaExceeded:
            high = middle - 1
    return low


def governing(
    quotas: Iterable[CapacityQuota], requester: str | None, node_pool: str
) -> CapacityQuota | None:
    """The quota whose admission a request in ``node_pool`` goes through; None when no quota
    names the pool. Raises QuotaExceeded when quotas name the pool but none covers the requester
    (pools that quotas cover are for their teams: docs/quotas.md, rule 3)."""
    quota, naming = quota_for(quotas, requester, node_pool)
    if quota is None and naming:
        who = f"requester {requester!r}" if requester else "a request without a requester"
        names = ", ".join(sorted(q.name for q in naming))
        raise QuotaExceeded(
            None,
            node_pool,
            None,
            f"{who} is covered by none of the quotas naming this NodePool ({names}); "
            "it may use only NodePools no quota names",
        )
    return quota


@dataclass(frozen=True)
class LeaseAsk:
    """A lease asked for: up to ``count`` instances of ``per_instance``, at least ``least``.

    ``sizes``: what one instance of each candidate type uses (type -> amount); when given, a
    lease the room left cannot hold at ``per_instance`` is narrowed to the types that fit
    (``fit_lease``). Empty: every instance is sized ``per_instance``."""

    pool: str
    requester: str | None
    per_instance: Resources
    count: int
    least: int
    sizes: Mapping[str, Resources] = field(default_factory=dict)
    # `sizes` are some of the candidates only (those the leases before it cover): the lease
    # names the types it covers even when all of them fit.
    partial: bool = False
    # Instances the requests launched with it still ask for (`fit_lease`'s `beside`).
    beside: int = 0

    def candidate_sizes(self) -> Mapping[str, Resources]:
        """``sizes``, or one anonymous size of ``per_instance`` when none is given."""
        return self.sizes or {"": self.per_instance}


def usage_items(quota: CapacityQuota, pool: str) -> list[UsageKey]:
    """The quota usage items (key, NodePool) an admission of ``quota`` in ``pool`` depends on.

    The cohort's item for ``pool`` comes first: it holds every member's use there (nominal,
    borrowing, the cohort's pool). When the group naming ``pool`` has ``limits``, the cohort's
    item for each other pool of the group follows, in the group's order: the limit bounds the
    quota's use summed over all of them."""
    items = [(quota.usage_item(pool), pool)]
    for group in quota.spec.resource_groups:
        names = [f.name for f in group.flavors]
        if group.limits is not None and pool in names:
            items += [(quota.usage_item(name), name) for name in names if name != pool]
    return items


def admit_lease(
    quotas: Sequence[CapacityQuota], ask: LeaseAsk, usage: Mapping[UsageKey, Resources]
) -> int:
    """How many of ``ask``'s instances the quotas admit now, given the cohort's ``usage`` in
    every pool ``usage_items`` names (by requester and pool; what is absent counts as 0).

    ``ask.count`` when no quota names the pool. Raises QuotaExceeded when even ``ask.least``
    (at least one) does not fit, or when quotas name the pool but none covers the requester.
    Pure: the caller reads the items and conditions its write on what it read."""
    quota = governing(quotas, ask.requester, ask.pool)
    if quota is None:
        return ask.count
    cohort = Cohort.of(quota, quotas, usage)
    return most_admitted(cohort, quota.name, ask.pool, ask.per_instance, ask.count, ask.least)


def fit_quota_lease(
    quotas: Sequence[CapacityQuota],
    ask: LeaseAsk,
    usage: Mapping[UsageKey, Resources],
    room: Room,
) -> LeaseFit | None:
    """The lease ``ask`` gets in both ``room`` (the pool's limits beside its usage) and the room
    the quotas leave its requester, given the cohort's ``usage`` (as ``admit_lease`` reads it):
    narrowed, when needed, to the candidate types that fit both (``fit_lease``).

    None when the pool's room holds fewer than ``ask.least`` of any type. Raises QuotaExceeded
    when the pool's room would hold them but the quota does not (its refusal of ``ask.least``
    of the smallest type the pool holds), or when quotas name the pool but none covers the
    requester. Pure: the caller reads the items and conditions its write on what it read."""
    fit = _fit_in_quota(quotas, ask, usage, room)
    if fit is None or fit.instance_types is not None or not ask.partial:
        return fit
    return replace(fit, instance_types=frozenset(ask.sizes))


def _fit_in_quota(
    quotas: Sequence[CapacityQuota],
    ask: LeaseAsk,
    usage: Mapping[UsageKey, Resources],
    room: Room,
) -> LeaseFit | None:
    sizes = ask.candidate_sizes()
    quota = governing(quotas, ask.requester, ask.pool)
    if quota is None or ask.requester is None:
        return fit_lease(sizes, ask.count, ask.least, room, ask.beside)
    cohort = Cohort.of(quota, quotas, usage)

    def both(amount: Resources) -> bool:
        """The pool's room and the quota's both hold `amount`."""
        if not room(amount):
            return False
        try:
            cohort.admit(quota.name, ask.pool, amount)
        except QuotaExceeded:
            return False
        return True

    fit = fit_lease(sizes, ask.count, ask.least, both, ask.beside)
    if fit is not None or fit_lease(sizes, ask.count, ask.least, room) is None:
        return fit
    least = max(ask.least, 1)
    smallest = min((s for s in sizes.values() if room(s * least)), key=smallest_first)
    cohort.admit(quota.name, ask.pool, smallest * least)  # refused: raises the quota's reason
    return None  # pragma: no cover - the quota refused every type the room holds


def _release_until_met(
    candidates: Sequence[tuple[str, QuotaInstance]],
    short: Mapping[str, Decimal],
    ledgers: Mapping[str, Ledger],
) -> list[QuotaInstance] | None:
    """The first of ``candidates`` whose release frees ``short``, each borrower giving back only
    what it borrows; None when they cannot free enough."""
    remaining = {r: amount for r, amount in short.items() if amount > 0}
    released: dict[tuple[str, str], Decimal] = {}
    chosen: list[QuotaInstance] = []
    for borrower, instance in candidates:
        if not remaining:
            break
        # A resource the borrower's quota does not cover draws nothing from the pool.
        gives = {
            r: instance.resources.amount(r) if borrower in ledgers[r].terms else ZERO for r in short
        }
        if not any(gives[r] > 0 for r in remaining):
            continue
        if any(
            released.get((borrower, r), ZERO) + gives[r] > ledgers[r].borrowed(borrower)
            for r in short
            if gives[r] > 0
        ):
            continue  # releasing it would cut into the borrower's own nominal quota
        chosen.append(instance)
        for r in short:
            released[(borrower, r)] = released.get((borrower, r), ZERO) + gives[r]
        remaining = {r: a - gives[r] for r, a in remaining.items() if a - gives[r] > 0}
    return None if remaining else chosen
