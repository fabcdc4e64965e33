"""Issue 37: preemption by a waiting request, as Kueue decides it (domain/accounting/preemption.py,
pure): withinClusterQueue among its own quota's instances, borrowWithinCohort among the cohort's
borrowers, Kueue's candidate order, the fewest victims, and nothing preempted in vain; and the
sync's decision again before it terminates (reclaim_decision.redecide_preemption)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from capacity_launcher.domain.accounting.pool_usage import Readiness
from capacity_launcher.domain.accounting.preemption import (
    PoolRoom,
    Preemptor,
    Running,
    Scope,
    Victim,
    fits_everything,
    plan,
)
from capacity_launcher.domain.accounting.quota_admission import QuotaInstance
from capacity_launcher.domain.accounting.reclaim_decision import (
    FITS_NOW,
    NOT_BORROWED,
    STILL_SHORT,
    ReclaimOutcome,
    redecide_preemption,
)
from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.quantities import PoolLimits, Resources
from tests.unit.test_quota_admission import POOL, instance, quota, usage

ARRIVAL = "2026-11-22T10:30:00+00:00"
BEFORE, AFTER = "2026-11-22T09:00:00+00:00", "2026-11-22T11:00:00+00:00"


def policies(
    base: CapacityQuota,
    within: str = "Never",
    borrow: str = "Never",
    threshold: int | None = None,
) -> CapacityQuota:
    document = to_document(base)
    rules: dict[str, Any] = {"withinClusterQueue": within, "borrowWithinCohort": {"policy": borrow}}
    if threshold is not None:
        rules["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    document["spec"]["preemption"] = rules
    return parse_quota(document)


def run(name: str, requester: str, gpus: int, at: str, priority: int | None) -> Running:
    return Running(instance(name, requester, gpus, at), priority)


def ask(gpus: int, priority: int = 5, quota_name: str = "team-a") -> Preemptor:
    return Preemptor(quota_name, POOL, Resources(gpu=gpus, instances=1), priority, ARRIVAL)


# team-a alone (no cohort), nominal 16 GPUs, all of them running: 4 instances of 4 GPUs.
ALONE = quota("team-a", 16, cohort=None, borrowing=False)
OWN = [
    run("a-low", "team-a", 4, BEFORE, 1),
    run("a-equal-old", "team-a", 4, BEFORE, 5),
    run("a-equal-new", "team-a", 4, AFTER, 5),
    run("a-high", "team-a", 4, BEFORE, 9),
]


@dataclass(frozen=True)
class Case:
    name: str
    within: str
    gpus: int
    victims: list[str] | None


WITHIN = [
    Case("default: no preemption", "Never", 4, None),
    Case("a lower-priority instance makes room", "LowerPriority", 4, ["a-low"]),
    Case("lower alone cannot make room: none in vain", "LowerPriority", 8, None),
    Case("equal and newer too", "LowerOrNewerEqualPriority", 8, ["a-low", "a-equal-new"]),
    Case("equal but older, or higher, never", "LowerOrNewerEqualPriority", 12, None),
]


@pytest.mark.parametrize("case", WITHIN, ids=[c.name for c in WITHIN])
def test_within_cluster_queue(case: Case) -> None:
    chosen = plan(ask(case.gpus), [policies(ALONE, case.within)], usage(**{"team-a": 16}), OWN)

    if case.victims is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert [v.instance.instance_id for v in chosen] == case.victims
        assert {v.scope for v in chosen} == {Scope.WITHIN_CLUSTER_QUEUE}


def test_the_fewest_victims_newest_first_then_filled_back() -> None:
    # Both lower; the newer one (2 GPUs) is taken first but cannot make room alone: once the
    # older one (8) makes it fit, the newer one is put back (Kueue's minimal preemptions).
    running = [run("small-new", "team-a", 2, AFTER, 1), run("big-old", "team-a", 8, BEFORE, 1)]
    own = policies(quota("team-a", 10, cohort=None, borrowing=False), "LowerPriority")

    chosen = plan(ask(8), [own], usage(**{"team-a": 10}), running)

    assert chosen is not None and [v.instance.instance_id for v in chosen] == ["big-old"]


def test_nothing_when_it_fits_already_or_a_priority_was_not_recorded() -> None:
    own = policies(ALONE, "LowerOrNewerEqualPriority")
    assert plan(ask(4), [own], usage(**{"team-a": 12}), OWN) is None  # 4 idle: it fits
    unrecorded = [run("a-low", "team-a", 4, BEFORE, None), *OWN[1:]]
    chosen = plan(ask(4), [own], usage(**{"team-a": 16}), unrecorded)
    # the instance of unknown priority is never a victim: the equal, newer one is
    assert chosen is not None and [v.instance.instance_id for v in chosen] == ["a-equal-new"]


# research: team-a (nominal 4, priority-5 requests) and team-b (nominal 4) borrow; team-c lends 8.
# team-a runs 4, team-b 12 (borrowing 8): the cohort's 16 are all used, team-a must borrow.
COHORT_USE = usage(**{"team-a": 4, "team-b": 12})
B_RUNNING = [
    run("b-old", "team-b", 4, "2026-11-22T08:00:00+00:00", 1),
    run("b-mid", "team-b", 4, "2026-11-22T09:00:00+00:00", 1),
    run("b-new", "team-b", 4, "2026-11-22T10:00:00+00:00", 1),
]


def cohort(borrow: str, threshold: int | None = None, b_priority: int = 1) -> list[CapacityQuota]:
    return [
        policies(quota("team-a", 4), borrow=borrow, threshold=threshold),
        quota("team-b", 4, priority=b_priority),
        quota("team-c", 8, borrowing=False),
    ]


@pytest.mark.parametrize(
    ("borrow", "threshold", "priority", "gpus", "victims"),
    [
        ("Never", None, 1, 4, None),
        ("LowerPriority", None, 1, 4, ["b-new"]),
        ("LowerPriority", None, 1, 8, ["b-new", "b-mid"]),
        # b-old is within team-b's own nominal quota once the other two go: never taken
        ("LowerPriority", None, 1, 12, None),
        ("LowerPriority", 0, 1, 4, None),  # over maxPriorityThreshold
        ("LowerPriority", 1, 1, 4, ["b-new"]),  # at the threshold
        ("LowerPriority", None, 5, 4, None),  # equal priority: never across quotas
    ],
)
def test_borrow_within_cohort(
    borrow: str, threshold: int | None, priority: int, gpus: int, victims: list[str] | None
) -> None:
    running = [run(r.instance.instance_id, "team-b", 4, r.instance.launched_at, priority)
               for r in B_RUNNING]  # fmt: skip

    chosen = plan(ask(gpus), cohort(borrow, threshold), COHORT_USE, running)

    if victims is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert [v.instance.instance_id for v in chosen] == victims
        assert {(v.scope, v.owner) for v in chosen} == {(Scope.BORROW_WITHIN_COHORT, "team-b")}


def test_other_quotas_victims_come_before_its_own() -> None:
    quotas = cohort("LowerPriority")
    quotas[0] = policies(quota("team-a", 4), within="LowerPriority", borrow="LowerPriority")
    own_low = run("a-low", "team-a", 4, AFTER, 0)

    chosen = plan(ask(4), quotas, COHORT_USE, [own_low, *B_RUNNING])

    assert chosen is not None and [v.instance.instance_id for v in chosen] == ["b-new"]


def test_every_plan_makes_the_request_fit_and_no_victim_could_be_spared() -> None:
    """The invariant behind the table: a plan admits the request, and without any one of its
    victims it would not (as fill-back leaves it)."""
    from capacity_launcher.domain.accounting.preemption import fits

    for gpus in (4, 8):
        quotas = cohort("LowerPriority")
        chosen = plan(ask(gpus), quotas, COHORT_USE, B_RUNNING)
        assert chosen is not None
        left = dict(COHORT_USE)
        for victim in chosen:
            left[("team-b", POOL)] -= victim.instance.resources
        assert fits(ask(gpus), quotas, left)
        for spared in chosen:
            partial = dict(COHORT_USE)
            for victim in chosen:
                if victim is not spared:
                    partial[("team-b", POOL)] -= victim.instance.resources
            assert not fits(ask(gpus), quotas, partial)


def test_the_sync_decides_again_before_it_terminates() -> None:
    named = B_RUNNING[2:]  # b-new, asked for a 4-GPU request of team-a
    terminate = redecide_preemption(ask(4), named, cohort("LowerPriority"), COHORT_USE)
    assert (terminate.terminate, terminate.outcome) == (["b-new"], ReclaimOutcome.TERMINATED)

    # the policy turned Never: withdrawn, saying so
    never = redecide_preemption(ask(4), named, cohort("Never"), COHORT_USE)
    assert (never.terminate, never.outcome) == ([], ReclaimOutcome.WITHDRAWN)
    assert "are Never now" in never.reason

    # team-b's priority is recorded per instance: a victim asked at priority 1 stays one, but a
    # request whose priority is now no higher (a new preemptor record) spares it
    equal = redecide_preemption(ask(4, priority=1), named, cohort("LowerPriority"), COHORT_USE)
    assert equal.terminate == [] and "not lower" in equal.reason

    # team-b released others meanwhile: b-new is within its nominal quota now
    released = usage(**{"team-a": 4, "team-b": 4})
    spared = redecide_preemption(ask(4), named, cohort("LowerPriority"), released)
    assert spared.terminate == []
    assert {s.reason for s in spared.spared} <= {NOT_BORROWED, FITS_NOW}

    # room appeared (team-c's idle quota returned when team-b shrank): nothing in vain
    fits_now = usage(**{"team-a": 4, "team-b": 8})
    vain = redecide_preemption(ask(4), B_RUNNING[1:], cohort("LowerPriority"), fits_now)
    assert vain.terminate == [] and vain.outcome == ReclaimOutcome.WITHDRAWN
    assert FITS_NOW in {s.reason for s in vain.spared}


# -- the full fit: the quota, the pool's limits, the group's limits, limits.unready ------------
#
# Kueue judges a preemption on every constraint the workload is admitted under; the lease here is
# admitted under the quota (with its group `limits` over several pools), then the pool's own
# `limits` and `limits.unready`. A victim frees the quota where it runs, and the pool's room only
# when it runs in the request's pool.

OTHER = "gpu-inference"


def pool_room(
    gpus: int, used: int, allowed: int | None = None, found: Readiness | None = None
) -> PoolRoom:
    """A pool limited to ``gpus`` using ``used``; ``allowed``: its `limits.unready`, ``found``:
    its count of instances and unready ones."""
    limits: dict[str, Any] = {"nvidia.com/gpu": str(gpus)}
    if allowed is not None:
        limits["unready"] = allowed
    return PoolRoom(PoolLimits.model_validate(limits), Resources(gpu=used), found)


def ids(chosen: list[Victim] | None) -> list[str] | None:
    return None if chosen is None else [v.instance.instance_id for v in chosen]


def test_the_pool_limits_take_as_many_victims_as_they_need() -> None:
    # team-a's 16 GPUs all run (OWN); its quota alone needs one victim for 4 more GPUs. Its pool
    # holds 24 GPUs against a limit lowered to 20: with a-low gone it holds 20 + 4 > 20, so the
    # request would still be refused by the pool. Two victims make it fit both.
    own = policies(ALONE, "LowerOrNewerEqualPriority")
    team = usage(**{"team-a": 16})
    assert ids(plan(ask(4), [own], team, OWN)) == ["a-low"]  # the quota alone
    chosen = plan(ask(4), [own], team, OWN, pool_room(gpus=20, used=24))
    assert ids(chosen) == ["a-low", "a-equal-new"]
    freed = [v.instance for v in chosen or []]
    assert fits_everything(ask(4), [own], team, pool_room(gpus=20, used=24), freed)
    assert not fits_everything(ask(4), [own], team, pool_room(gpus=20, used=24), freed[:1])


def test_no_victim_when_the_pool_limits_would_still_refuse_the_request() -> None:
    # The pool (limit 16) holds 24 GPUs, 8 of them another team's: the two allowed victims free
    # 8, and 16 + 4 > 16. Before, a-low was terminated and the request still waited.
    own = policies(ALONE, "LowerOrNewerEqualPriority")
    assert plan(ask(4), [own], usage(**{"team-a": 16}), OWN, pool_room(16, used=24)) is None


def test_the_unready_limit_is_judged_too_and_a_victim_counts_as_ready() -> None:
    # The pool has room in GPUs but 2 of its 4 instances are unready against `unready: 1`: the
    # lease would be refused; a victim is counted as ready (its state is not read), so no set of
    # victims is known to lift the refusal and nothing is preempted.
    own = policies(ALONE, "LowerOrNewerEqualPriority")
    team = usage(**{"team-a": 16})
    gated = pool_room(64, used=16, allowed=1, found=Readiness(unready=2, instances=4))
    assert plan(ask(4), [own], team, OWN, gated) is None
    ready = pool_room(64, used=16, allowed=1, found=Readiness(unready=1, instances=4))
    assert ids(plan(ask(4), [own], team, OWN, ready)) == ["a-low"]


def grouped(within: str = "LowerPriority") -> CapacityQuota:
    """team-a with 16 GPUs of nominal quota in each of two pools, and a group limit of 16
    across both."""
    document = to_document(policies(ALONE, within))
    group = document["spec"]["resourceGroups"][0]
    group["flavors"].append({**group["flavors"][0], "name": OTHER})
    group["limits"] = {"nvidia.com/gpu": "16"}
    return parse_quota(document)


def running_in(pool: str, name: str, priority: int, at: str) -> Running:
    return Running(QuotaInstance(name, "team-a", pool, Resources(gpu=4, instances=1), at), priority)


# 8 GPUs in each pool: the group's 16 are all used.
GROUP_USE = {("team-a", POOL): Resources(gpu=8), ("team-a", OTHER): Resources(gpu=8)}


def split(low: str, high: str) -> list[Running]:
    """team-a's two high-priority instances in pool ``high``, two low ones in pool ``low``."""
    return [
        running_in(high, "high-1", 9, BEFORE),
        running_in(high, "high-2", 9, BEFORE),
        running_in(low, "low-old", 1, BEFORE),
        running_in(low, "low-new", 1, AFTER),
    ]


def test_a_group_limit_is_judged_on_every_pool_and_a_victim_elsewhere_frees_it() -> None:
    # The request's pool runs team-a's high-priority instances, the other pool its low ones: one
    # of those frees the group's limit, and the request's pool has room (limit 16, 8 used).
    running = split(low=OTHER, high=POOL)
    chosen = plan(ask(4), [grouped()], GROUP_USE, running, pool_room(16, used=8))
    assert ids(chosen) == ["low-new"]
    assert chosen is not None and chosen[0].instance.flavor == OTHER
    # The request's pool at its limit (8 of 8): a victim in the other pool frees the group's
    # limit but not this pool's, so nothing is preempted in vain.
    assert plan(ask(4), [grouped()], GROUP_USE, running, pool_room(8, used=8)) is None


def test_a_victim_in_the_request_pool_frees_both_the_group_and_the_pool() -> None:
    running = split(low=POOL, high=OTHER)
    chosen = plan(ask(4), [grouped()], GROUP_USE, running, pool_room(8, used=8))
    assert ids(chosen) == ["low-new"]
    assert chosen is not None and chosen[0].instance.flavor == POOL


def test_the_sync_decides_again_on_the_full_fit() -> None:
    own = policies(ALONE, "LowerOrNewerEqualPriority")
    team = usage(**{"team-a": 16})
    named = [OWN[0], OWN[2]]  # a-low and a-equal-new, asked when the pool needed both
    # the pool's limit was lowered further meanwhile: with both gone it would still refuse
    short = redecide_preemption(ask(4), named, [own], team, pool_room(16, used=24))
    assert (short.terminate, short.outcome) == ([], ReclaimOutcome.WITHDRAWN)
    assert {s.reason for s in short.spared} == {STILL_SHORT}
    # as asked: both are needed, both terminated
    both = redecide_preemption(ask(4), named, [own], team, pool_room(20, used=24))
    assert both.terminate == ["a-low", "a-equal-new"]
    # the pool's room grew meanwhile: the quota needs one, the pool none; the other is spared
    one = redecide_preemption(ask(4), named, [own], team, pool_room(40, used=24))
    assert one.terminate == ["a-low"]
    assert [(s.instance_id, s.reason) for s in one.spared] == [("a-equal-new", FITS_NOW)]


def test_a_preemption_is_decided_under_the_policies_stored_now() -> None:
    """Queue seed 2 (simulation): a container's copy of the quotas, read before the policy was
    applied as Never, let a woken request ask for victims. The copy only says whether a policy
    may allow it; the policies stored now decide."""
    from datetime import UTC, datetime

    from capacity_launcher.domain.errors import QuotaExceeded
    from capacity_launcher.service.quota_reclaim import ReclaimRequests

    reads: list[str] = []

    def stored() -> list[CapacityQuota]:
        reads.append("stored")
        return [policies(ALONE, "Never")]

    copy = [policies(ALONE, "LowerPriority")]
    unused: Any = None  # nothing else is read once the stored policy says Never
    requests = ReclaimRequests(
        lambda: copy, unused, unused, unused, unused, unused, lambda: datetime.now(UTC),
        stored=stored,
    )  # fmt: skip
    refused = QuotaExceeded("team-a", POOL, "nvidia.com/gpu", "over nominalQuota 16")
    refused.demand = Resources(gpu=4, instances=1)

    assert requests.preempt(refused, "urgent", "team-a", 5, datetime.now(UTC)) == ""
    assert reads == ["stored"]
    # a copy saying Never asks nothing, and reads nothing more
    copy[0] = policies(ALONE, "Never")
    assert requests.preempt(refused, "urgent", "team-a", 5, datetime.now(UTC)) == ""
    assert reads == ["stored"]
