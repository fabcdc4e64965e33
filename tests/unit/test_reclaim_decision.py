"""Issue 24, defect 4: an enforced reclaim is decided again, on the quotas and usage of now,
before the sync terminates anything (domain/accounting/reclaim_decision.py, pure)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.quota_admission import Cohort, UsageKey
from capacity_launcher.domain.accounting.reclaim_decision import (
    NOT_BORROWED,
    ReclaimOutcome,
    Spared,
    redecide,
)
from capacity_launcher.domain.accounting.reclaim_policy import reclaim_refusal
from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.quantities import GPU, Resources
from tests.unit.test_quota_admission import POOL, instance, quota, usage

# team-b (nominal 4 GPUs, priority 10) runs 12: it borrows 8, on i-b-new and i-b-mid.
NAMED = [
    instance("i-b-new", "team-b", 4, "2026-11-22T11:00:00Z"),
    instance("i-b-mid", "team-b", 4, "2026-11-22T10:00:00Z"),
]
BORROWING = usage(**{"team-b": 12})


def decide(
    *quotas_now: CapacityQuota, used: Mapping[UsageKey, Resources] = BORROWING
) -> tuple[list[str], list[Spared], str]:
    decision = redecide("team-a", POOL, [GPU], NAMED, list(quotas_now), used)
    return decision.terminate, decision.spared, decision.outcome


def test_unchanged_quotas_terminate_what_was_named() -> None:
    terminate, spared, outcome = decide(
        quota("team-a", 16, priority=100, reclaim="LowerPriority"), quota("team-b", 4, priority=10)
    )
    assert (terminate, spared, outcome) == (["i-b-new", "i-b-mid"], [], "terminated")


def test_a_lender_now_never_terminates_nothing_and_says_so() -> None:
    terminate, spared, outcome = decide(
        quota("team-a", 16, priority=100, reclaim="Never"), quota("team-b", 4, priority=10)
    )
    assert (terminate, outcome) == ([], ReclaimOutcome.WITHDRAWN)
    why = "CapacityQuota team-a's reclaimWithinCohort is Never now"
    assert spared == [Spared("i-b-new", why), Spared("i-b-mid", why)]


def test_a_borrower_now_of_no_lower_priority_is_spared() -> None:
    for priority in (100, 200):
        terminate, spared, outcome = decide(
            quota("team-a", 16, priority=100, reclaim="LowerPriority"),
            quota("team-b", 4, priority=priority),
        )
        assert (terminate, outcome) == ([], "withdrawn")
        assert {s.reason for s in spared} == {
            f"CapacityQuota team-b's priority {priority} is not lower than team-a's 100 "
            "(reclaimWithinCohort LowerPriority)"
        }
    # Any does not look at priorities
    terminate, _, _ = decide(
        quota("team-a", 16, priority=100, reclaim="Any"), quota("team-b", 4, priority=200)
    )
    assert terminate == ["i-b-new", "i-b-mid"]


def test_a_lender_deleted_or_no_longer_naming_the_pool_terminates_nothing() -> None:
    terminate, spared, outcome = decide(quota("team-b", 4, priority=10))
    assert (terminate, outcome) == ([], "withdrawn")
    assert {s.reason for s in spared} == {"CapacityQuota team-a was deleted"}
    document = to_document(quota("team-a", 16, priority=100, reclaim="Any"))
    document["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "other-pool"
    elsewhere = parse_quota(document)
    terminate, spared, outcome = decide(elsewhere, quota("team-b", 4))
    assert (terminate, outcome) == ([], "withdrawn")
    assert {s.reason for s in spared} == {"CapacityQuota team-a no longer names NodePool " + POOL}


def test_a_borrower_that_left_the_cohort_is_spared() -> None:
    terminate, spared, outcome = decide(
        quota("team-a", 16, priority=100, reclaim="Any"),
        quota("team-b", 4, cohort="other"),
    )
    assert (terminate, outcome) == ([], "withdrawn")
    assert {s.reason for s in spared} == {
        f"requester team-b is covered by no quota of cohort research in NodePool {POOL} now"
    }


def test_an_owner_that_no_longer_borrows_keeps_its_instances_released_not_withdrawn() -> None:
    lender = quota("team-a", 16, priority=100, reclaim="Any")
    # team-b now runs 8: it borrows 4, so only the first named goes
    terminate, spared, outcome = decide(lender, quota("team-b", 4), used=usage(**{"team-b": 8}))
    assert (terminate, spared, outcome) == (
        ["i-b-new"],
        [Spared("i-b-mid", NOT_BORROWED)],
        "terminated",
    )
    # team-b now runs 4: nothing borrowed, nothing terminated, closed as released
    terminate, spared, outcome = decide(lender, quota("team-b", 4), used=usage(**{"team-b": 4}))
    assert (terminate, outcome) == ([], "released")
    assert [s.reason for s in spared] == [NOT_BORROWED, NOT_BORROWED]


@settings(max_examples=200, deadline=None)
@given(
    policy=st.sampled_from(["Never", "LowerPriority", "Any"]),
    lender_priority=st.integers(0, 3),
    priorities=st.lists(st.integers(0, 3), min_size=2, max_size=2),
    running=st.lists(st.integers(1, 3), min_size=1, max_size=6),
)
def test_only_what_the_current_policy_allows_is_terminated(
    policy: str, lender_priority: int, priorities: list[int], running: list[int]
) -> None:
    # Given team-b and team-c (nominal 2 GPUs each) running 1-GPU..3-GPU instances, named in
    # order, and team-a's policy and every priority drawn anew
    quotas = [
        quota("team-a", 16, priority=lender_priority, reclaim=policy),
        quota("team-b", 2, priority=priorities[0]),
        quota("team-c", 2, priority=priorities[1]),
    ]
    named = [
        instance(f"i-{n}", ("team-b", "team-c")[n % 2], g, f"2026-11-22T10:00:{n:02}Z")
        for n, g in enumerate(running)
    ]
    used: dict[str, int] = {}
    for i in named:
        used[i.requester] = used.get(i.requester, 0) + int(i.resources.gpu)
    cohort_usage = usage(**used)
    decision = redecide("team-a", POOL, [GPU], named, quotas, cohort_usage)
    by_name = {q.name: q for q in quotas}
    cohort = Cohort(quotas, cohort_usage)
    # Then every instance terminated is one the current policy lets team-a reclaim, and its
    # owner still borrows at least what is terminated of it
    for instance_id in decision.terminate:
        victim = next(i for i in named if i.instance_id == instance_id)
        assert reclaim_refusal(by_name["team-a"], by_name[victim.requester]) is None
    for owner in ("team-b", "team-c"):
        freed = sum(
            (
                i.resources.gpu
                for i in named
                if i.requester == owner and i.instance_id in decision.terminate
            ),
            Decimal(0),
        )
        assert freed <= cohort.ledger(POOL, GPU).borrowed(owner)
    # and every named instance is either terminated or spared with a reason, once
    assert sorted([*decision.terminate, *(s.instance_id for s in decision.spared)]) == sorted(
        i.instance_id for i in named
    )
    assert all(s.reason for s in decision.spared)
    if policy == "Never":
        assert decision.terminate == [] and decision.outcome == "withdrawn"
