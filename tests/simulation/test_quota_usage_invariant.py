"""The quiescent `quota usage == EC2` check on its own, over a stand-in for the world: a
requester whose quota is not applied (deleted, its re-apply refused) holds no quota usage, as
the sync drops a member's hold when no quota covers it (docs/quotas.md); once applied, every
live instance of it counts (issue24-quota-freshness seed 1, step 10)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from tests.simulation.capacity_invariants import ATTRIBUTES
from tests.simulation.cohort_invariants import LEVEL
from tests.simulation.emulator import START
from tests.simulation.invariants import Invariants, Ledger
from tests.simulation.operations import COHORT, QUOTAS, Catalog, quota_document
from tests.simulation.world import Observed, World

CHECK = "quota usage == EC2 (quiescent)"
C5_LARGE = {"instances": 1, "cpu": 2}


@dataclass
class StandIn:
    """What the check reads of the world: EC2's instances, the stored quota usage, members."""

    instances: dict[str, Observed] = field(default_factory=dict)
    restarted: set[str] = field(default_factory=set)
    quota_usage: dict[tuple[str, str], float] = field(default_factory=dict)
    now: float = START.timestamp()

    def instance_resources(self, instance_type: str) -> dict[str, int]:
        return dict(C5_LARGE)

    def stored_quota_usage(self) -> dict[tuple[str, str], float]:
        return dict(self.quota_usage)

    def counted_items(self, pool: str) -> list[dict[str, Any]]:
        return [{"sk": f"Member#{i}", "instances": "1"} for i in self.instances]

    def partition(self, pk: str) -> dict[str, dict[str, Any]]:
        """The quota usage partition `pk` as stored: its `Usage` item, `u:<attribute>:<who>`."""
        held = {f"u:{name}": v for (p, name), v in self.quota_usage.items() if p == pk}
        return {"Usage": held} if held else {}


def _ci_running_in_pool_1(held: bool) -> tuple[Invariants, StandIn]:
    """ci runs one c5.large in pool-1; its quota usage counts it when `held`."""
    world = StandIn()
    world.instances["i-1"] = Observed(
        "i-1", "req-1-4", "pool-1", "running", "c5.large", "us-east-1a", None, requester="ci"
    )
    if held:
        pk = f"QuotaUsage#{COHORT}#pool-1"
        for resource, amount in C5_LARGE.items():
            world.quota_usage[(pk, f"{ATTRIBUTES[resource]}:ci")] = float(amount)
    catalog = Catalog()
    catalog.quotas = {name: quota_document(name) for name in QUOTAS}
    invariants = Invariants(cast(World, world), Ledger(), seed=1, catalog=catalog)
    return invariants, world


def _findings(invariants: Invariants) -> list[str]:
    return [v.detail for v in invariants.violations if v.invariant == CHECK]


def test_a_requester_whose_quota_is_not_applied_holds_no_quota_usage() -> None:
    # Given ci's quota deleted (its re-apply refused), its instance still running in pool-1
    invariants, _ = _ci_running_in_pool_1(held=False)
    ci = next(name for name, (requesters, *_) in QUOTAS.items() if "ci" in requesters)
    invariants.catalog.quotas.pop(ci)
    # When the check runs at quiescence, the sync having dropped the instance's hold
    invariants.capacity._quota_usage_matches_ec2()
    # Then it is no finding
    assert _findings(invariants) == []


def test_a_covered_requester_whose_running_instance_holds_no_quota_usage_is_a_finding() -> None:
    # Given ci's quota applied, its instance running in pool-1 and counted for no quota
    invariants, _ = _ci_running_in_pool_1(held=False)
    # When the check runs at quiescence
    invariants.capacity._quota_usage_matches_ec2()
    # Then both resources are findings
    assert [d.split(":")[0] for d in _findings(invariants)] == [
        f"QuotaUsage#{COHORT}#pool-1 ci instances",
        f"QuotaUsage#{COHORT}#pool-1 ci cpu",
    ]


def test_a_quota_that_is_not_applied_must_not_count_what_its_requester_runs() -> None:
    # Given ci's quota deleted, but its usage still counting its instance
    invariants, _ = _ci_running_in_pool_1(held=True)
    ci = next(name for name, (requesters, *_) in QUOTAS.items() if "ci" in requesters)
    invariants.catalog.quotas.pop(ci)
    # When the check runs at quiescence
    invariants.capacity._quota_usage_matches_ec2()
    # Then that stale hold is a finding
    assert len(_findings(invariants)) == 2


COHORT_CHECK = LEVEL  # the flat cohort's bound is the sum of nominal quotas


def _cohort_full_in_pool_1() -> tuple[Invariants, StandIn]:
    """pool-1 runs team-a 2, team-b 4 (2 borrowed) and ci 2: 8 instances, where the three
    quotas' nominal amounts sum to 7 (short seed 1 step 194 on wip/calls-records-txn)."""
    invariants, world = _ci_running_in_pool_1(held=True)
    runs = [("team-a", 2), ("team-b", 4), ("ci", 1)]  # ci's first is _ci_running_in_pool_1's
    for requester, count in runs:
        for at in range(count):
            instance_id = f"i-{requester}-{at}"
            world.instances[instance_id] = Observed(
                instance_id, f"req-{requester}", "pool-1", "running", "m5.large", "us-east-1a",
                None, requester=requester,
            )  # fmt: skip
    return invariants, world


def test_a_deleted_quotas_requesters_are_not_counted_in_its_cohort() -> None:
    # Given team-b's quota deleted (its re-apply refused): its 4 instances count for the pool
    invariants, _ = _cohort_full_in_pool_1()
    invariants.catalog.quotas.pop("quota-b")
    # When the step's checks run
    invariants.capacity._quotas_hold()
    # Then the cohort is quota-a and quota-ci: 4 instances of their 5 nominal, no finding
    assert invariants.checks[COHORT_CHECK] > 0
    assert [v for v in invariants.violations if v.invariant == COHORT_CHECK] == []


def test_a_cohort_over_the_sum_of_its_applied_quotas_is_a_finding() -> None:
    # Given the same instances with all three quotas applied
    invariants, _ = _cohort_full_in_pool_1()
    # When the step's checks run
    invariants.capacity._quotas_hold()
    # Then 8 instances over the nominal 7 is an overrun
    [found] = [v for v in invariants.violations if v.invariant == COHORT_CHECK]
    assert "instances used 8, bound 7" in found.detail
