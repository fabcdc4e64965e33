"""Issue 37, preemption by a waiting request as Kueue defines it (withinClusterQueue,
borrowWithinCohort): the rule a preemption's victims must meet, judged from the operator's
documents as applied at that moment, never from the service's answer:

- **no preemption without the policy**: a victim of the request's own quota needs its
  `withinClusterQueue` other than `Never`; a victim of another quota needs `borrowWithinCohort`
  `LowerPriority`, the owner in the same cohort;
- **no preemption of equal or higher priority unless the policy allows**: a victim's priority is
  below the request's; equal only under `LowerOrNewerEqualPriority`, of the request's own quota,
  for an instance launched after the request arrived; never above `maxPriorityThreshold`;
- **a preemption only when it makes the request fit**: the sync terminates a preemption's victim
  only while its request still waits (one admitted, failed or gone needs nothing: edge_invariants
  calls `terminated`), and only under the policy in force then;
- **no victim is terminated for a preemptor that, with those victims gone, would still not fit**
  (`still_short`): judged from the world's state at the sync's TerminateInstances call (the
  managed instances EC2 held live then, restarted ones left out) and the documents as applied:
  with the victims that call terminates for one preemption gone, the request's `amount` must fit
  its pool's `limits`, its quota's bound in that pool (`nominalQuota`, plus `borrowingLimit`
  when it borrows) and its group's `limits` summed over the group's pools. Live instances are
  no more than what the service counts (leases and members), so a request these show would not
  fit would not fit the service's count either. Not judged here: the cohort's idle quota to
  borrow and `limits.unready` (the service takes a victim as ready: the safe side).

Checked when `Capacity Reclaim Requested` names victims (`preemption` set on each) and again for
every instance the sync terminates under one."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.apis.quotas import parse_amount

if TYPE_CHECKING:
    from tests.simulation.world import LiveAtCall

ALLOWED = "no preemption without the policy"
PRIORITY = "no preemption of equal or higher priority unless the policy allows"
FITS = "a preemption only when it makes the request fit"
STILL_FITS = (
    "no victim is terminated for a preemptor that, with those victims gone, would still not fit"
)


def refused(
    scope: str,
    preemptor: dict[str, Any] | None,
    owner: dict[str, Any] | None,
    victim: dict[str, Any],
    detail: dict[str, Any],
) -> tuple[str, str] | None:
    """(invariant, why) when the documents as applied now do not allow ``victim`` (an instance
    of a preemption ``detail``) to be taken from ``owner`` for ``preemptor``; None when they do."""
    if preemptor is None:
        return ALLOWED, f"{detail['quota']} is deleted"
    rules = preemptor["spec"].get("preemption") or {}
    mine, theirs = detail.get("priority"), victim.get("priority")
    if mine is None or theirs is None:
        return PRIORITY, "a priority is not recorded"
    if scope == "withinClusterQueue":
        policy = rules.get("withinClusterQueue", "Never")
        if policy == "Never" or victim["quota"] != detail["quota"]:
            return ALLOWED, f"withinClusterQueue {policy}, victim of {victim['quota']}"
        newer = theirs == mine and victim["launchedAt"] > (detail.get("arrivedAt") or "")
        if theirs < mine or (policy == "LowerOrNewerEqualPriority" and newer):
            return None
        return PRIORITY, f"victim priority {theirs}, request {mine}, withinClusterQueue {policy}"
    borrow = rules.get("borrowWithinCohort") or {}
    policy = borrow.get("policy", "Never")
    cohort = preemptor["spec"].get("cohort")
    if policy == "Never" or owner is None or owner["spec"].get("cohort") != cohort:
        return ALLOWED, f"borrowWithinCohort {policy}, victim of {victim['quota']}"
    if victim["quota"] == detail["quota"]:
        return ALLOWED, "a borrowWithinCohort victim of the request's own quota"
    threshold = borrow.get("maxPriorityThreshold")
    if theirs >= mine or (threshold is not None and theirs > threshold):
        return PRIORITY, f"victim priority {theirs}, request {mine}, threshold {threshold}"
    return None


def still_short(
    detail: Mapping[str, Any],
    gone: Collection[str],
    live: Sequence[LiveAtCall],
    quota: Mapping[str, Any] | None,
    pool_document: Mapping[str, Any] | None,
    resources: Callable[[str], Mapping[str, int]],
) -> str | None:
    """Why the request of preemption ``detail`` would still not fit with ``gone`` (its victims
    the sync terminated in one call) terminated, judged on ``live`` (the managed instances live
    at that call), its ``quota`` and its pool's ``pool_document`` as applied (``resources``: what
    one instance of a type counts); None when nothing shows it would not."""
    pool = str(detail["nodePool"])
    asks = {a["name"]: parse_amount(a["name"], a["total"]) for a in detail.get("amount") or []}
    left = [i for i in live if i.instance_id not in gone]

    def used(where: Collection[str], requesters: Collection[str] | None, resource: str) -> Decimal:
        return sum(
            (
                Decimal(resources(i.instance_type).get(resource, 0))
                for i in left
                if i.pool in where and (requesters is None or i.requester in requesters)
            ),
            Decimal(0),
        )

    limits = ((pool_document or {}).get("spec") or {}).get("limits") or {}
    for resource, bound in limits.items():
        if resource == "unready":
            continue
        short = _over(used([pool], None, resource), asks, resource, bound)
        if short:
            return f"NodePool {pool}'s limits: {short}"
    if quota is None:
        return None
    spec = quota["spec"]
    requesters = set(spec.get("requesters") or [])
    borrows = bool(spec.get("allowBorrowing")) and bool(spec.get("cohort"))
    for group in spec.get("resourceGroups") or []:
        flavors = {f["name"]: f for f in group.get("flavors") or []}
        if pool not in flavors:
            continue
        for term in flavors[pool].get("resources") or []:
            bound = parse_amount(term["name"], term["nominalQuota"])
            if borrows and term.get("borrowingLimit") is None:
                continue  # only the cohort's idle quota bounds it: not judged here
            if borrows:
                bound += parse_amount(term["name"], term["borrowingLimit"])
            short = _over(used([pool], requesters, term["name"]), asks, term["name"], bound)
            if short:
                return f"CapacityQuota {quota['metadata']['name']} in {pool}: {short}"
        for resource, bound in (group.get("limits") or {}).items():
            short = _over(used(list(flavors), requesters, resource), asks, resource, bound)
            if short:
                return f"CapacityQuota {quota['metadata']['name']}'s group limits: {short}"
    return None


def _over(used: Decimal, asks: Mapping[str, Decimal], resource: str, bound: Any) -> str:
    """'' when ``used`` plus what the request asks of ``resource`` is within ``bound``."""
    limit = bound if isinstance(bound, Decimal) else parse_amount(resource, bound)
    asked = asks.get(resource, Decimal(0))
    if used + asked <= limit:
        return ""
    return f"{resource} {used} used with the victims gone, asking {asked}, limit {limit}"
