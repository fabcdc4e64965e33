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
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from capacity_launcher.domain.accounting.reclaim_policy import reclaim_refusal
from capacity_launcher.domain.apis.quota_preemption import ReclaimPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota, QuotaResource, format_amount
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import DIMENSIONS, Resources

ZERO = Decimal(0)
# Requester and NodePool: how usage is collected (instance items carry both).
UsageKey = tuple[str, str]
# DynamoDB's bound on the items of one transaction, and the lease's items beside its quota usage
# items (the pool's usage, the lease, the pool's stored limits, the NodeClass's revision, the
# NodePools' generation, the quota generation: adapters/lease_admission.py): a group of
# MAX_FLAVORS pools keeps an admission within one transaction (a test holds it), and what is
# left bounds a cohort tree (kueue/cohorts.MAX_TREE_COHORTS).
TRANSACTION_ITEMS = 100
LEASE_ITEMS = 6


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
        self.check_group_limits(own, flavor, demand)
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
                    quota,
                    flavor,
                    term.name,
                    _over_limit(own, term, used, need, bound),
                    needed=after - bound,
                    ever=need <= bound,
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
                    needed=short,
                )
            if short > 0:
                reclaim[term.name] = short
                continue
            if more > 0:
                borrowed[term.name] = more
                already = self._lent(ledger, quota)
                lenders[term.name] = self._attribute(ledger, more, already, quota)
        if reclaim:
            raise lent_out(quota, flavor, f"cohort {own.spec.cohort}", reclaim)
        kind = AdmissionKind.BORROWING if borrowed else AdmissionKind.WITHIN_NOMINAL
        return Admission(quota, flavor, kind, borrowed, lenders)

    def check_group_limits(self, quota: CapacityQuota, flavor: str, demand: Resources) -> None:
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
                        needed=total.amount(resource) + demand.amount(resource) - bound,
                        ever=demand.amount(resource) <= bound,
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


def lent_out(quota: str, flavor: str, where: str, reclaim: dict[str, Decimal]) -> QuotaExceeded:
    """The refusal of a demand within ``quota``'s nominal quota that is lent out ``where``: it
    carries ``reclaim``, what must come back first (per resource)."""
    resource = min(reclaim)
    return QuotaExceeded(
        quota,
        flavor,
        resource,
        f"nominal quota is lent out in {where}: "
        f"{_shown(resource, reclaim[resource])} must be reclaimed first",
        reclaim=reclaim,
        needed=reclaim[resource],
    )


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
        gives = _gives_back(borrower, instance, short, ledgers)
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


def _gives_back(
    borrower: str,
    instance: QuotaInstance,
    short: Mapping[str, Decimal],
    ledgers: Mapping[str, Ledger],
) -> dict[str, Decimal]:
    """What releasing ``instance`` gives back to the pool of each resource ``short`` names: a
    resource the borrower's quota does not cover draws nothing from the pool."""
    return {
        r: instance.resources.amount(r) if borrower in ledgers[r].terms else ZERO for r in short
    }
