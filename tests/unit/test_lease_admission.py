"""Issue 24, defect 1: the lease's quota decision is a pure function over every usage it depends
on (each pool of the quota's group, and the cohort's use of the pool), compared here with the old
decision, which saw the current pool's usage only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.quota_admission import (
    LEASE_ITEMS,
    TRANSACTION_ITEMS,
    Cohort,
    UsageKey,
)
from capacity_launcher.domain.accounting.quota_leases import (
    LeaseAsk,
    admit_lease,
    governing,
    most_admitted,
    usage_items,
)
from capacity_launcher.domain.apis.quotas import MAX_FLAVORS, CapacityQuota, parse_quota
from capacity_launcher.domain.errors import ConfigValidationError, QuotaExceeded
from capacity_launcher.domain.quantities import INSTANCES, Resources

POOLS = ("pa", "pb", "pc")
ONE = Resources(cpu=2, memory_mib=8192, instances=1)


def quota(
    name: str,
    nominal: dict[str, int],
    *,
    limit: int | None = None,
    cohort: str | None = "research",
    borrowing: bool = False,
) -> CapacityQuota:
    group: dict[str, Any] = {
        "coveredResources": [INSTANCES],
        "flavors": [
            {"name": pool, "resources": [{"name": INSTANCES, "nominalQuota": str(n)}]}
            for pool, n in nominal.items()
        ],
    }
    if limit is not None:
        group["limits"] = {INSTANCES: str(limit)}
    spec: dict[str, Any] = {"requesters": [name], "resourceGroups": [group]}
    if cohort is not None:
        spec |= {"cohort": cohort, "allowBorrowing": borrowing}
    document = {"kind": "CapacityQuota", "metadata": {"name": name}, "spec": spec}
    return parse_quota({"apiVersion": "capacity-launcher/v1", **document})


def old_decision(
    quotas: list[CapacityQuota], ask: LeaseAsk, usage: dict[UsageKey, Resources]
) -> int:
    """What the lease decided before: the cohort's usage of the current pool only."""
    own = governing(quotas, ask.requester, ask.pool)
    if own is None:
        return ask.count
    seen = {k: v for k, v in usage.items() if k[1] == ask.pool}
    cohort = Cohort.of(own, quotas, seen)
    return most_admitted(cohort, own.name, ask.pool, ask.per_instance, ask.count, ask.least)


def decided(decide: Any, *args: Any) -> int:
    """A decision's count, 0 for a refusal."""
    try:
        return int(decide(*args))
    except QuotaExceeded:
        return 0


def test_the_admission_reads_the_cohorts_item_of_every_pool_of_a_limited_group() -> None:
    budget = quota("team-a", {"pa": 4, "pb": 4, "pc": 4}, limit=4)
    assert usage_items(budget, "pb") == [
        ("QuotaUsage#research#pb", "pb"),
        ("QuotaUsage#research#pa", "pa"),
        ("QuotaUsage#research#pc", "pc"),
    ]
    # Without group limits each pool is decided alone: its own item is all it reads
    split = quota("team-a", {"pa": 4, "pb": 4}, cohort=None)
    assert usage_items(split, "pb") == [("QuotaUsage#quota/team-a#pb", "pb")]


def test_the_largest_group_fits_one_transaction() -> None:
    assert MAX_FLAVORS + LEASE_ITEMS <= TRANSACTION_ITEMS
    # and apply refuses a larger group, naming the field
    with pytest.raises(ConfigValidationError, match=r"spec\.resourceGroups\[0\]\.flavors: "):
        quota("team-a", {f"p{i}": 1 for i in range(MAX_FLAVORS + 1)}, limit=4)


def test_a_group_limit_across_pools_refuses_what_the_old_reading_admitted() -> None:
    # Given the quota: 4 instances across pa and pb, 4 running in pa
    budget = quota("team-a", {"pa": 4, "pb": 4}, limit=4)
    usage = {("team-a", "pa"): ONE * 4}
    ask = LeaseAsk("pb", "team-a", ONE, 4, 1)
    # Then the old decision, blind to pa, admitted 4 more in pb; the new one refuses
    assert old_decision([budget], ask, usage) == 4
    with pytest.raises(QuotaExceeded, match="across NodePools pa, pb"):
        admit_lease([budget], ask, usage)
    # and admits what is left once pa gives some back
    assert admit_lease([budget], ask, {("team-a", "pa"): ONE * 3}) == 1


def test_no_quota_naming_the_pool_admits_the_whole_count() -> None:
    budget = quota("team-a", {"pa": 1})
    assert admit_lease([budget], LeaseAsk("elsewhere", None, ONE, 7, 7), {}) == 7


# -- properties -------------------------------------------------------------------------------

nominals = st.fixed_dictionaries({pool: st.integers(0, 6) for pool in POOLS})
teams = st.lists(
    st.tuples(nominals, st.none() | st.integers(0, 10), st.booleans()), min_size=1, max_size=3
)
asks = st.lists(
    st.tuples(
        st.integers(0, 2),  # which team
        st.sampled_from(POOLS),
        st.integers(1, 5),  # count
        st.integers(1, 5),  # least (at most count)
    ),
    min_size=1,
    max_size=20,
)


def _quotas(drawn: list[tuple[dict[str, int], int | None, bool]]) -> list[CapacityQuota]:
    return [
        quota(f"team-{i}", nominal, limit=limit, borrowing=borrowing)
        for i, (nominal, limit, borrowing) in enumerate(drawn)
    ]


def _add(usage: dict[UsageKey, Resources], key: UsageKey, amount: Resources) -> None:
    usage[key] = usage.get(key, Resources.ZERO) + amount


@settings(max_examples=200, deadline=None)
@given(drawn=teams, plan=asks)
def test_admitted_leases_keep_every_group_within_its_limits_and_agree_with_the_old_decision(
    drawn: list[tuple[dict[str, int], int | None, bool]],
    plan: list[tuple[int, str, int, int]],
) -> None:
    quotas = _quotas(drawn)
    usage: dict[UsageKey, Resources] = {}
    for which, pool, count, least in plan:
        team = quotas[which % len(quotas)]
        ask = LeaseAsk(pool, team.name, ONE, count, min(least, count))
        new = decided(admit_lease, quotas, ask, usage)
        old = decided(old_decision, quotas, ask, usage)
        # Knowing every pool's usage can only refuse more, never admit more
        assert new <= old
        others = sum(
            usage.get((team.name, p), Resources.ZERO).instances for p in POOLS if p != pool
        )
        group = team.spec.resource_groups[0]
        if group.limits is None or others == 0:
            assert new == old  # where the old reading saw all that mattered, they agree
        _add(usage, (team.name, pool), ONE * new)
        # Every group within its limits after every admission
        for q in quotas:
            limits = q.spec.resource_groups[0].limits
            bound = None if limits is None else limits.limit_for(INSTANCES)
            total = sum(usage.get((q.name, p), Resources.ZERO).instances for p in POOLS)
            assert bound is None or total <= bound
