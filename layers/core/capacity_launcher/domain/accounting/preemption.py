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

Candidates are taken in Kueue's order (other quotas' before the request's own, lower priority
first, newest first, then instance id) until the request's admission (`Cohort.admit`) succeeds on
the usage left; then each taken but the last is put back, latest first, when the request still
fits without it (Kueue's minimal preemptions). No plan when the request fits already, when the
policies allow no candidate, or when all of them would not make it fit: nothing is preempted in
vain. An instance whose priority was not recorded (launched before instances carried it) is
never a victim. The reclaim of a request's own nominal quota lent out is the reclaim path's
(``Cohort.reclaim_plan``, reclaimWithinCohort), not this. `refusal` is the rule alone, which the
sync applies again, with the quotas of then, before it terminates (docs/quotas.md). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance, UsageKey
from capacity_launcher.domain.apis.quota_preemption import BorrowPolicy, WithinQuotaPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import Resources


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
) -> list[Victim] | None:
    """The fewest victims, in Kueue's order, whose release makes ``preemptor`` fit its quota in
    its pool (``usage``: the cohort's, by requester and pool); None when it fits already or no
    allowed choice makes it fit."""
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
        if _fits(preemptor, members, left):
            return _fill_back(preemptor, members, usage, taken)
    return None


def _candidates(
    preemptor: Preemptor, own: CapacityQuota, cohort: Cohort, running: Sequence[Running]
) -> list[Victim]:
    """Those the policies allow, in Kueue's order: another quota's first, then the lowest
    priority, then the newest, then instance id."""
    found = []
    for each in running:
        instance = each.instance
        owner = cohort.owner(instance.requester, preemptor.flavor)
        if instance.flavor != preemptor.flavor or owner is None or each.priority is None:
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
) -> list[Victim]:
    """Kueue's fill-back: the last victim is needed; each before it, latest first, is kept
    running when the request still fits without releasing it."""
    chosen = list(taken)
    for victim in reversed(taken[:-1]):
        without = [v for v in chosen if v is not victim]
        left = dict(usage)
        for other in without:
            _release(left, other)
        if _fits(preemptor, members, left) and _all_borrowed(members, usage, without, preemptor):
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
