"""Preemption by a waiting request, as Kueue decides it (issue 37): which running instances a
request refused by its quota may have terminated so that it fits, under its quota's
``preemption.withinClusterQueue`` and ``preemption.borrowWithinCohort``.

- **withinClusterQueue** (``LowerPriority``, ``LowerOrNewerEqualPriority``): the instances of the
  request's own quota of lower priority, or (the second) also of equal priority launched after
  the request arrived.
- **borrowWithinCohort** (``policy: LowerPriority``, ``maxPriorityThreshold``): when the request
  must borrow, the instances of other members of its cohort that borrow them (releasing one keeps
  its owner at or above its nominal quota, never within it), of lower priority than the request,
  and no higher than the threshold when one is set.

The request fits (`fits_everything`) when, on what is left with the victims gone, it passes every
check its lease is admitted under (as Kueue judges a preemption on every constraint the workload
is admitted under): its quota (`Cohort.admit`, with the group `limits` summed over the usage
items of the group's other pools), then its pool's `limits` on the pool's usage and the pool's
`limits.unready` (`PoolRoom`). A victim frees its amount in the quota usage of its own pool, and
in the pool's usage only when it runs in the request's pool. With group `limits`, the request's
own quota's instances in the group's other pools are candidates too (they free the group's
limit, not the pool's). Candidates are taken in Kueue's order (other quotas' before the
request's own, lower priority first, newest first, then instance id) until the request fits;
then each taken but the last is put back, latest first, when the request still fits without it
(Kueue's minimal preemptions). No plan when the quota admits the request already, when the
policies allow no candidate, or when all of them would not make it fit everything: nothing is
preempted in vain. An instance whose priority was not recorded (launched before instances
carried it) is never a victim. The reclaim of a request's own nominal quota lent out is the
reclaim path's (``Cohort.reclaim_plan``, reclaimWithinCohort), not this. `refusal` is the rule
alone, which the sync applies again, with the quotas of then, before it terminates
(docs/quotas.md). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from capacity_launcher.domain.accounting.pool_usage import Readiness, total, unready_refusal
from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance, UsageKey
from capacity_launcher.domain.accounting.quota_leases import usage_items
from capacity_launcher.domain.apis.quota_preemption import BorrowPolicy, WithinQuotaPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import PoolLimits, Resources


class Scope(StrEnum):
    """Which policy lets a victim be taken (the ``preemption`` of Capacity Reclaim Requested)."""

    WITHIN_CLUSTER_QUEUE = "withinClusterQueue"
    BORROW_WITHIN_COHORT = "borrowWithinCohort"


@dataclass(frozen=True)
class Running:
    """A running instance and its request's priority at launch (None: not recorded)."""

    instance: QuotaInstance
    priority: int | None


@dataclass(frozen=True)
class Preemptor:
    """The waiting request: its quota, the NodePool, what it asks, its priority, its arrival
    (ISO-8601; an equal-priority instance launched after it is newer)."""

    quota: str
    flavor: str
    demand: Resources
    priority: int
    arrival: str


@dataclass(frozen=True)
class PoolRoom:
    """The request's pool as its lease is admitted after its quota: the pool's stored
    ``limits``, its usage (``used``: leases and members) and, when ``limits.unready`` gates it,
    its count of instances and unready ones (``readiness``). The default: no limits.

    A victim in the pool frees its amount and one instance; it is counted as ready (the
    unready count is not lowered for it), so the unready limit is judged on the safe side: a
    victim is never taken on the hope that it was unready."""

    limits: PoolLimits | None = None
    used: Resources = Resources.ZERO
    readiness: Readiness | None = None

    def holds(self, pool: str, demand: Resources, freed: Sequence[QuotaInstance]) -> bool:
        """Whether the pool's limits admit ``demand`` with ``freed`` gone (those in ``pool``)."""
        if self.limits is None:
            return True
        gone = [i for i in freed if i.flavor == pool]
        left = self.used - total(i.resources for i in gone)
        if (left + demand).fits_within(self.limits):
            return False
        if self.readiness is None:
            return True
        after = Readiness(self.readiness.unready, max(0, self.readiness.instances - len(gone)))
        return unready_refusal(pool, self.limits, after) is None


UNLIMITED = PoolRoom()


@dataclass(frozen=True)
class Victim:
    instance: QuotaInstance
    owner: str
    priority: int
    scope: Scope


def refusal(
    preemptor: CapacityQuota, owner: CapacityQuota, request: Preemptor, victim: Running
) -> str | None:
    """Why ``preemptor``'s policies do not let ``request`` (of that quota) preempt ``victim``, an
    instance of ``owner``; None when they do. Whether the owner still borrows it is the
    caller's (it depends on usage)."""
    priority, arrival = request.priority, request.arrival
    victim_priority, launched_at = victim.priority, victim.instance.launched_at
    if victim_priority is None:
        return "its priority was not recorded at launch"
    rules = preemptor.spec.preemption
    if owner.name == preemptor.name:
        policy = rules.within_cluster_queue
        if policy is WithinQuotaPolicy.NEVER:
            return f"CapacityQuota {preemptor.name}'s withinClusterQueue is Never"
        if victim_priority < priority:
            return None
        newer = victim_priority == priority and launched_at > arrival
        if policy is WithinQuotaPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY and newer:
            return None
        return (
            f"priority {victim_priority} is not lower than the request's {priority}"
            + (
                " nor equal and newer"
                if policy is WithinQuotaPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                else ""
            )
            + f" (withinClusterQueue {policy.value})"
        )
    borrow = rules.borrow_within_cohort
    if borrow.policy is BorrowPolicy.NEVER or not preemptor.spec.cohort:
        return f"CapacityQuota {preemptor.name}'s borrowWithinCohort is Never"
    if owner.cohort_key != preemptor.cohort_key:
        return f"CapacityQuota {owner.name} is not in cohort {preemptor.spec.cohort}"
    if victim_priority >= priority:
        return (
            f"priority {victim_priority} is not lower than the request's {priority} "
            "(borrowWithinCohort LowerPriority)"
        )
    threshold = borrow.max_priority_threshold
    if threshold is not None and victim_priority > threshold:
        return (
            f"priority {victim_priority} is over borrowWithinCohort.maxPriorityThreshold "
            f"{threshold}"
        )
    return None


def plan(
    preemptor: Preemptor,
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    running: Sequence[Running],
    room: PoolRoom = UNLIMITED,
) -> list[Victim] | None:
    """The fewest victims, in Kueue's order, whose release makes ``preemptor`` fit everything
    (`fits_everything`: its quota, ``usage`` being the cohort's by requester and pool in every
    pool `quota_leases.usage_items` names, and its pool's ``room``); None when its quota admits
    it already or no allowed choice makes it fit everything."""
    own = next(q for q in quotas if q.name == preemptor.quota)
    members = [q for q in quotas if q.cohort_key == own.cohort_key]
    if fits(preemptor, quotas, usage):
        return None
    cohort = Cohort(members, usage)
    candidates = _candidates(preemptor, own, cohort, running)
    if not candidates:
        return None
    needed = [r for r in _covered(own, preemptor.flavor) if preemptor.demand.amount(r) > 0]
    left = dict(usage)
    taken: list[Victim] = []
    for victim in candidates:
        if victim.scope is Scope.BORROW_WITHIN_COHORT and not _borrowed(
            Cohort(members, left), victim, needed
        ):
            continue  # its owner no longer borrows it, the victims before it released
        _release(left, victim)
        taken.append(victim)
        if _fits_all(preemptor, members, left, room, taken):
            return _fill_back(preemptor, members, usage, taken, room)
    return None


def _candidates(
    preemptor: Preemptor, own: CapacityQuota, cohort: Cohort, running: Sequence[Running]
) -> list[Victim]:
    """Those the policies allow, in Kueue's order: another quota's first, then the lowest
    priority, then the newest, then instance id. In the group's other pools (when its
    ``limits`` span them) only the request's own quota's instances: they free its group limit."""
    found = []
    elsewhere = group_pools(own, preemptor.flavor)
    for each in running:
        instance = each.instance
        owner = cohort.owner(instance.requester, instance.flavor)
        if owner is None or each.priority is None:
            continue
        if instance.flavor != preemptor.flavor and not (
            instance.flavor in elsewhere and owner == own.name
        ):
            continue
        if refusal(own, cohort.quotas[owner], preemptor, each) is None:
            scope = Scope.WITHIN_CLUSTER_QUEUE if owner == own.name else Scope.BORROW_WITHIN_COHORT
            found.append(Victim(instance, owner, each.priority, scope))
    found.sort(key=lambda v: (v.instance.launched_at, v.instance.instance_id), reverse=True)
    found.sort(key=lambda v: (v.scope is Scope.WITHIN_CLUSTER_QUEUE, v.priority))
    return found


def _fill_back(
    preemptor: Preemptor,
    members: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    taken: list[Victim],
    room: PoolRoom,
) -> list[Victim]:
    """Kueue's fill-back: the last victim is needed; each before it, latest first, is kept
    running when the request still fits everything without releasing it."""
    chosen = list(taken)
    for victim in reversed(taken[:-1]):
        without = [v for v in chosen if v is not victim]
        left = dict(usage)
        for other in without:
            _release(left, other)
        if _fits_all(preemptor, members, left, room, without) and _all_borrowed(
            members, usage, without, preemptor
        ):
            chosen = without
    return chosen


def _all_borrowed(
    members: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    victims: Sequence[Victim],
    preemptor: Preemptor,
) -> bool:
    """Every cross-quota victim is still borrowed by its owner with the others released."""
    own = next(q for q in members if q.name == preemptor.quota)
    needed = [r for r in _covered(own, preemptor.flavor) if preemptor.demand.amount(r) > 0]
    cohort = Cohort(members, usage)
    cross = [v.instance for v in victims if v.scope is Scope.BORROW_WITHIN_COHORT]
    return len(cohort.releasable(preemptor.flavor, needed, cross)) == len(cross)


def _borrowed(cohort: Cohort, victim: Victim, resources: Sequence[str]) -> bool:
    return bool(cohort.releasable(victim.instance.flavor, resources, [victim.instance]))


def _release(usage: dict[UsageKey, Resources], victim: Victim) -> None:
    where = (victim.instance.requester, victim.instance.flavor)
    usage[where] = usage.get(where, Resources.ZERO) - victim.instance.resources


def fits(
    preemptor: Preemptor,
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
) -> bool:
    """Whether the request's quota admits it on ``usage`` (its cohort's, in its pool)."""
    own = next((q for q in quotas if q.name == preemptor.quota), None)
    if own is None:
        return False
    return _fits(preemptor, [q for q in quotas if q.cohort_key == own.cohort_key], usage)


def fits_everything(
    preemptor: Preemptor,
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    room: PoolRoom,
    freed: Sequence[QuotaInstance] = (),
) -> bool:
    """Whether, with ``freed`` gone, the request's quota admits it (``usage``: its cohort's, in
    every pool its admission reads) and its pool's ``room`` holds it: every check its lease is
    admitted under."""
    own = next((q for q in quotas if q.name == preemptor.quota), None)
    if own is None:
        return False
    left = dict(usage)
    for instance in freed:
        where = (instance.requester, instance.flavor)
        left[where] = left.get(where, Resources.ZERO) - instance.resources
    members = [q for q in quotas if q.cohort_key == own.cohort_key]
    return _fits(preemptor, members, left) and room.holds(preemptor.flavor, preemptor.demand, freed)


def group_pools(quota: CapacityQuota, pool: str) -> list[str]:
    """The other pools whose usage the quota's admission in ``pool`` sums (its group naming
    ``pool`` has ``limits``), in the group's order."""
    return [name for _, name in usage_items(quota, pool)[1:]]


def _fits_all(
    preemptor: Preemptor,
    members: Sequence[CapacityQuota],
    left: Mapping[UsageKey, Resources],
    room: PoolRoom,
    taken: Sequence[Victim],
) -> bool:
    """The request fits ``left`` (the usage with ``taken`` released) and its pool's room."""
    freed = [v.instance for v in taken]
    return _fits(preemptor, members, left) and room.holds(preemptor.flavor, preemptor.demand, freed)


def _fits(
    preemptor: Preemptor,
    members: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
) -> bool:
    try:
        Cohort(members, usage).admit(preemptor.quota, preemptor.flavor, preemptor.demand)
    except QuotaExceeded:
        return False
    return True


def _covered(quota: CapacityQuota, flavor: str) -> list[str]:
    spec = quota.flavor(flavor)
    return [] if spec is None else [t.name for t in spec.resources]
