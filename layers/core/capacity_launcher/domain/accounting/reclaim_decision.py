"""An enforced reclaim decided again when its grace period has passed, before the sync terminates.

A reclaim is chosen under the quotas of the moment it is requested. By the time it is enforced the
lender's ``reclaimWithinCohort`` may be ``Never``, a borrower's priority may be no lower than the
lender's, the lender's quota may be deleted or no longer name the NodePool, a borrower may have
left the lender's cohort, or an owner may have released other instances and no longer borrow.
`redecide` takes the quotas and quota usage of now and keeps only what the current policy still
allows: the rest is spared, each with its reason. Pure: no I/O (docs/quotas.md, Reclaim).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting import preemption
from capacity_launcher.domain.accounting.cohort_tree import lenders_circle
from capacity_launcher.domain.accounting.preemption import (
    UNLIMITED,
    PoolRoom,
    Preemptor,
    Running,
    fits_everything,
)
from capacity_launcher.domain.accounting.quota_admission import (
    Cohort,
    QuotaInstance,
    UsageKey,
)
from capacity_launcher.domain.accounting.reclaim_policy import reclaim_refusal
from capacity_launcher.domain.apis.quota_preemption import (
    BorrowPolicy,
    ReclaimPolicy,
    WithinQuotaPolicy,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_amount
from capacity_launcher.domain.quantities import DIMENSIONS, Resources
from capacity_launcher.domain.records.reclaims import ReclaimRequested

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort as CohortDocument

# Applied Cohort documents by name; none: every cohort is flat.
NO_COHORTS: Mapping[str, CohortDocument] = {}

NOT_BORROWED = "within its owner's nominal quota now: no longer borrowed"
FITS_NOW = "the preempting request fits without it now: nothing is preempted in vain"
STILL_SHORT = (
    "the preempting request would still not fit with them gone (its quota, its NodePool's "
    "limits or limits.unready): nothing is preempted in vain"
)


class ReclaimOutcome(StrEnum):
    """How a reclaim is closed (the `outcome` of Capacity Reclaim Closed)."""

    RELEASED = "released"  # its owners released what it names, or no longer borrow it
    EXPIRED = "expired"  # only asked (not enforced): its grace period passed
    STALE = "stale"  # enforced, but found too long after releaseBy
    TERMINATED = "terminated"  # the sync terminated what the current policy still allows
    WITHDRAWN = "withdrawn"  # the current policy allows none of it: nothing terminated


@dataclass(frozen=True)
class Spared:
    instance_id: str
    reason: str


@dataclass(frozen=True)
class ReclaimDecision:
    """What an enforced reclaim terminates now, and what it spares and why."""

    terminate: list[str]
    spared: list[Spared]
    # Spared by the policy (not because their owners no longer borrow them).
    refused: bool

    @property
    def outcome(self) -> ReclaimOutcome:
        if self.terminate:
            return ReclaimOutcome.TERMINATED
        return ReclaimOutcome.WITHDRAWN if self.refused else ReclaimOutcome.RELEASED

    @property
    def reason(self) -> str:
        """Every distinct reason something was spared, in order."""
        return "; ".join(dict.fromkeys(s.reason for s in self.spared))


def redecide(
    lender_name: str,
    pool: str,
    resources: Iterable[str],
    named: Sequence[QuotaInstance],
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    cohorts: Mapping[str, CohortDocument] = NO_COHORTS,
) -> ReclaimDecision:
    """Which of ``named`` (the reclaim's instances still counted, in its order) the lender's
    reclaim may terminate now, under ``quotas`` and the lender's cohort's ``usage`` in ``pool``
    (through a tree of ``cohorts``, every cohort's of the tree).

    An instance is terminated only if the lender's quota still names the pool with a policy
    other than Never, its owner is another member of the lender's cohort (or of its tree) that
    the policy lets the lender reclaim from, and its owner still borrows it
    (`Cohort.releasable`)."""
    lender = next((q for q in quotas if q.name == lender_name), None)
    whole = _refusal(lender, lender_name, pool)
    if lender is None or whole is not None:
        spared = [Spared(i.instance_id, str(whole)) for i in named]
        return ReclaimDecision([], spared, refused=True)
    cohort = lenders_circle(lender, quotas, cohorts, usage)
    allowed: list[QuotaInstance] = []
    spared = []
    for instance in named:
        why = _instance_refusal(cohort, lender, pool, instance)
        if why is None:
            allowed.append(instance)
        else:
            spared.append(Spared(instance.instance_id, why))
    refused = bool(spared)  # before those no longer borrowed join them
    kept = {i.instance_id for i in cohort.releasable(pool, resources, allowed)}
    spared += [Spared(i.instance_id, NOT_BORROWED) for i in allowed if i.instance_id not in kept]
    terminate = [i.instance_id for i in allowed if i.instance_id in kept]
    return ReclaimDecision(terminate, spared, refused=refused)


def _refusal(lender: CapacityQuota | None, name: str, pool: str) -> str | None:
    """Why the lender's reclaim in ``pool`` terminates nothing at all now; None if it may."""
    if lender is None:
        return f"CapacityQuota {name} was deleted"
    if lender.flavor(pool) is None:
        return f"CapacityQuota {name} no longer names NodePool {pool}"
    if lender.spec.preemption.reclaim_within_cohort is ReclaimPolicy.NEVER:
        return reclaim_refusal(lender, lender)
    return None


def _instance_refusal(
    cohort: Cohort, lender: CapacityQuota, pool: str, instance: QuotaInstance
) -> str | None:
    """Why the current policy does not let ``lender`` reclaim ``instance``; None if it does."""
    owner = cohort.owner(instance.requester, pool)
    if owner is None:
        where = f"cohort {lender.spec.cohort}" if lender.spec.cohort else f"{lender.name} alone"
        return (
            f"requester {instance.requester} is covered by no quota of {where} in "
            f"NodePool {pool} now"
        )
    if owner == lender.name:
        return f"requester {instance.requester} is covered by {lender.name} itself now"
    return reclaim_refusal(lender, cohort.quotas[owner])


def redecide_preemption(
    preemptor: Preemptor,
    named: Sequence[Running],
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    room: PoolRoom = UNLIMITED,
) -> ReclaimDecision:
    """Which of ``named`` (a waiting request's preemption's instances still counted) the sync may
    terminate now, under ``quotas``, the cohort's ``usage`` of now (in every pool the request's
    admission reads) and its pool's ``room`` of now: the preemptor's quota still names the pool,
    its withinClusterQueue or borrowWithinCohort still allows each victim
    (`preemption.refusal`, with the priorities recorded), another quota's victim is still
    borrowed by its owner, the request's quota does not admit it without them, and with them
    gone it fits everything (`preemption.fits_everything`); of those, the fewest (each, latest
    first, kept when the request fits without it). Otherwise nothing (nothing in vain)."""
    own = next((q for q in quotas if q.name == preemptor.quota), None)
    whole = _refusal_to_preempt(own, preemptor)
    if own is None or whole is not None:
        return ReclaimDecision(
            [], [Spared(n.instance.instance_id, str(whole)) for n in named], True
        )
    cohort = Cohort.of(own, quotas, usage)
    allowed, spared = _allowed_victims(cohort, own, preemptor, named)
    refused = bool(spared)
    gone = _no_longer_borrowed(cohort, own, preemptor, allowed)
    spared += [Spared(i.instance_id, NOT_BORROWED) for i in gone]
    terminate = [i for i in allowed if i not in gone]
    if terminate and preemption.fits(preemptor, quotas, usage):
        spared += [Spared(i.instance_id, FITS_NOW) for i in terminate]
        return ReclaimDecision([], spared, refused=True)
    if terminate and not fits_everything(preemptor, quotas, usage, room, terminate):
        spared += [Spared(i.instance_id, STILL_SHORT) for i in terminate]
        return ReclaimDecision([], spared, refused=True)
    needed = list(terminate)
    for victim in reversed(terminate):
        without = [i for i in needed if i is not victim]
        if fits_everything(preemptor, quotas, usage, room, without):
            needed = without
            spared.append(Spared(victim.instance_id, FITS_NOW))
    return ReclaimDecision([i.instance_id for i in needed], spared, refused=refused)


def preemptor_of(reclaim: ReclaimRequested) -> Preemptor:
    """The waiting request a preemption was asked for, as the reclaim recorded it."""
    demand = {a.name: parse_amount(a.name, a.total) for a in reclaim.amount}
    arrived = reclaim.arrived_at or reclaim.requested_at
    return Preemptor(
        reclaim.quota,
        reclaim.node_pool,
        Resources.from_amounts(demand),
        reclaim.priority or 0,
        arrived.isoformat(),
    )


def preemption_refused_now(
    reclaim: ReclaimRequested, quotas: Sequence[CapacityQuota]
) -> str | None:
    """Why the policies of now (``quotas``) no longer let an open preemption take one of the
    instances it names (`preemption.refusal`, with the priorities recorded); None when they all
    still may, or ``reclaim`` is no preemption. Usage is not read: whether the request still
    needs them is the sync's to decide again (`redecide_preemption`)."""
    if not reclaim.preempts:
        return None
    by_name = {q.name: q for q in quotas}
    own = by_name.get(reclaim.quota)
    preemptor = preemptor_of(reclaim)
    whole = _refusal_to_preempt(own, preemptor)
    if own is None or whole is not None:
        return whole
    for named in reclaim.instances:
        owner = by_name.get(named.quota)
        if owner is None:
            return f"CapacityQuota {named.quota} was deleted"
        victim = QuotaInstance(
            named.instance_id,
            named.requester,
            named.node_pool,
            Resources.ZERO,
            named.launched_at.isoformat(),
        )
        why = preemption.refusal(own, owner, preemptor, Running(victim, named.priority))
        if why is not None:
            return f"{named.instance_id}: {why}"
    return None


def _allowed_victims(
    cohort: Cohort, own: CapacityQuota, preemptor: Preemptor, named: Sequence[Running]
) -> tuple[list[QuotaInstance], list[Spared]]:
    """The victims the policies of now still let ``preemptor`` take, and the others spared
    (each saying why): one of no quota now by its requester's, the others by
    `preemption.refusal` with the priorities recorded."""
    allowed: list[QuotaInstance] = []
    spared = []
    for each in named:
        instance = each.instance
        owner = cohort.owner(instance.requester, instance.flavor)
        why = (
            _instance_refusal(cohort, own, instance.flavor, instance)
            if owner is None
            else preemption.refusal(own, cohort.quotas[owner], preemptor, each)
        )
        if why is None:
            allowed.append(instance)
        else:
            spared.append(Spared(instance.instance_id, why))
    return allowed, spared


def _no_longer_borrowed(
    cohort: Cohort, own: CapacityQuota, preemptor: Preemptor, allowed: Sequence[QuotaInstance]
) -> list[QuotaInstance]:
    """Of the allowed victims of other quotas, those their owners no longer borrow: what they
    keep is within their nominal quota now (in the resources the request asks for)."""
    resources = [r for r in DIMENSIONS if preemptor.demand.amount(r) > 0]
    cross = [i for i in allowed if cohort.owner(i.requester, preemptor.flavor) != own.name]
    kept = {i.instance_id for i in cohort.releasable(preemptor.flavor, resources, cross)}
    return [i for i in cross if i.instance_id not in kept]


def _refusal_to_preempt(quota: CapacityQuota | None, preemptor: Preemptor) -> str | None:
    """Why a preemption terminates nothing at all now; None if it may."""
    if quota is None:
        return f"CapacityQuota {preemptor.quota} was deleted"
    if quota.flavor(preemptor.flavor) is None:
        return f"CapacityQuota {quota.name} no longer names NodePool {preemptor.flavor}"
    rules = quota.spec.preemption
    if (
        rules.within_cluster_queue is WithinQuotaPolicy.NEVER
        and rules.borrow_within_cohort.policy is BorrowPolicy.NEVER
    ):
        return (
            f"CapacityQuota {quota.name}'s withinClusterQueue and borrowWithinCohort are Never now"
        )
    return None
