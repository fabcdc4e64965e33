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
  calls `terminated`), and only under the policy in force then.

Checked when `Capacity Reclaim Requested` names victims (`preemption` set on each) and again for
every instance the sync terminates under one."""

from __future__ import annotations

from typing import Any

ALLOWED = "no preemption without the policy"
PRIORITY = "no preemption of equal or higher priority unless the policy allows"
FITS = "a preemption only when it makes the request fit"


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
