"""Issue 37: preemption by a waiting request, as Kueue decides it (domain/accounting/preemption.py,
pure): withinClusterQueue among its own quota's instances, borrowWithinCohort among the cohort's
borrowers, Kueue's candidate order, the fewest victims, and nothing preempted in vain; and the
sync's decision again before it terminates (reclaim_decision.redecide_preemption)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from capacity_launcher.domain.accounting.preemption import Preemptor, Running, Scope, plan
from capacity_launcher.domain.accounting.reclaim_decision import (
    FITS_NOW,
    NOT_BORROWED,
    ReclaimOutcome,
    redecide_preemption,
)
from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.quantities import Resources
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
