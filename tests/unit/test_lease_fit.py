"""A lease the room left cannot hold at the largest candidate covers only the types that fit
(`pool_usage.fit_lease`, `quota_leases.fit_quota_lease`): it never exceeds the room, never
leaves out a type that fits, and keeps minCount's meaning."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    LeaseFit,
    fit_lease,
    held_by,
    largest,
    room_left,
)
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk, fit_quota_lease
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import PoolLimits, Resources

POOL = "limitcpu100"


def size(cpu: int, memory_gib: int = 0, gpu: int = 0) -> Resources:
    return Resources(cpu=Decimal(cpu), memory_mib=memory_gib * 1024, gpu=gpu, instances=1)


# The 100-cpu-limit example's shape: a 2-vCPU type up to a 96-vCPU one.
EXAMPLE = {"c5.large": size(2, 4), "c5.2xlarge": size(8, 16), "c5.24xlarge": size(96, 192)}
CPU_100 = PoolLimits(cpu=100)


def covered(fit: LeaseFit, sizes: dict[str, Resources]) -> set[str]:
    return set(sizes) if fit.instance_types is None else set(fit.instance_types)


def test_a_lease_of_eight_in_an_empty_100_cpu_pool_leaves_out_the_96_vcpu_type() -> None:
    fit = fit_lease(EXAMPLE, 8, 1, room_left(CPU_100, Resources.ZERO))
    assert fit == LeaseFit(
        8, size(8, 16), frozenset({"c5.large", "c5.2xlarge"}), left_out=("c5.24xlarge",)
    )


def test_the_whole_lease_is_sized_by_the_largest_while_it_fits() -> None:
    fit = fit_lease(EXAMPLE, 1, 1, room_left(CPU_100, Resources.ZERO))
    assert fit == LeaseFit(1, size(96, 192))


def test_when_no_type_fits_the_count_the_most_of_the_smallest_are_leased() -> None:
    used = Resources(cpu=Decimal(94))
    fit = fit_lease(EXAMPLE, 8, 1, room_left(CPU_100, used))
    assert fit == LeaseFit(3, size(2, 4), frozenset({"c5.large"}), ("c5.24xlarge", "c5.2xlarge"))


def test_min_count_that_fits_in_no_narrowing_is_full() -> None:
    used = Resources(cpu=Decimal(94))
    assert fit_lease(EXAMPLE, 8, 4, room_left(CPU_100, used)) is None


def test_types_are_chosen_so_that_the_requests_launched_with_it_fit_too() -> None:
    # 26 instances in all: only the 2-vCPU type leaves room for every one of them
    room = room_left(CPU_100, Resources.ZERO)
    fit = fit_lease(EXAMPLE, 8, 1, room, beside=18)
    assert fit is not None and fit.instance_types == {"c5.large"} and fit.count == 8
    # When none fits them all, the request is fitted alone
    assert fit_lease(EXAMPLE, 8, 1, room, beside=100) == fit_lease(EXAMPLE, 8, 1, room)


sizes_strategy = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(8)]),
    st.builds(size, st.integers(1, 96), st.integers(0, 768), st.sampled_from([0, 0, 1, 8])),
    min_size=1,
)
limits_strategy = st.builds(
    PoolLimits,
    cpu=st.one_of(st.none(), st.integers(0, 400)),
    memory=st.one_of(st.none(), st.integers(0, 2048).map(lambda g: g * 1024)),
    gpu=st.one_of(st.none(), st.integers(0, 16)),
    instances=st.one_of(st.none(), st.integers(0, 40)),
)
used_strategy = st.builds(
    Resources,
    cpu=st.integers(0, 200).map(Decimal),
    memory_mib=st.integers(0, 1024).map(lambda g: g * 1024),
    gpu=st.integers(0, 8),
    instances=st.integers(0, 20),
)


@settings(max_examples=400, deadline=None)
@given(
    sizes=sizes_strategy,
    limits=limits_strategy,
    used=used_strategy,
    count=st.integers(1, 30),
    least_share=st.floats(0, 1),
    beside=st.sampled_from([0, 0, 3, 20]),
)
def test_a_fitted_lease_never_exceeds_the_room_and_never_leaves_out_a_type_that_fits(
    sizes: dict[str, Resources],
    limits: PoolLimits,
    used: Resources,
    count: int,
    least_share: float,
    beside: int,
) -> None:
    least = max(1, round(count * least_share))
    room = room_left(limits, used)
    fit = fit_lease(sizes, count, least, room, beside)
    if fit is None:
        # Full: not even `least` of any one type fits (minCount is never cut)
        assert not any(room(s * least) for s in sizes.values())
        return
    kept = covered(fit, sizes)
    # The lease fits the room, and so does `count` of every type it covers
    assert least <= fit.count <= count
    assert room(fit.per_instance * fit.count)
    assert fit.per_instance == largest(sizes[t] for t in kept)
    assert all(room(sizes[t] * fit.count) for t in kept)
    # A type left out does not fit (the count leased, or the whole group's when that was
    # the choice), and the count is the most any type fits
    assert set(fit.left_out) == set(sizes) - kept
    group = count + beside
    together = beside > 0 and any(room(s * group) for s in sizes.values())
    for name in fit.left_out:
        assert not room(sizes[name] * (group if together else fit.count))
    if fit.count < count:
        assert not any(room(s * (fit.count + 1)) for s in sizes.values())
    # Nothing is narrowed while the whole lease fits at the largest
    if room(largest(sizes.values()) * group):
        assert fit == LeaseFit(count, largest(sizes.values()))


def cpu_quota(nominal: int) -> CapacityQuota:
    flavor = {"name": POOL, "resources": [{"name": "cpu", "nominalQuota": str(nominal)}]}
    group = {"coveredResources": ["cpu"], "flavors": [flavor]}
    spec = {"requesters": ["team-a"], "resourceGroups": [group]}
    document = {"kind": "CapacityQuota", "metadata": {"name": "team-a"}, "spec": spec}
    return parse_quota({"apiVersion": "capacity-launcher/v1", **document})


def test_the_requesters_quota_narrows_the_types_as_the_pools_room_does() -> None:
    # A pool with room for everything, a quota of 20 cpu: 8 fit only of the 2-vCPU type
    ask = LeaseAsk(POOL, "team-a", size(96, 192), 8, 1, EXAMPLE)
    fit = fit_quota_lease([cpu_quota(20)], ask, {}, room_left(None, Resources.ZERO))
    assert fit == LeaseFit(8, size(2, 4), frozenset({"c5.large"}), ("c5.24xlarge", "c5.2xlarge"))


def test_a_quota_that_holds_min_count_of_no_type_refuses_with_its_reason() -> None:
    ask = LeaseAsk(POOL, "team-a", size(96, 192), 8, 8, EXAMPLE)
    with pytest.raises(QuotaExceeded, match="cpu"):
        fit_quota_lease([cpu_quota(10)], ask, {}, room_left(None, Resources.ZERO))
    # And the pool's own room, when it is what holds too few, says full (no quota refusal)
    full = room_left(CPU_100, Resources(cpu=Decimal(100)))
    assert fit_quota_lease([cpu_quota(10)], ask, {}, full) is None


def test_a_partial_ask_names_the_types_it_was_asked_over_even_when_all_fit() -> None:
    some = {"c5.large": EXAMPLE["c5.large"]}
    ask = LeaseAsk(POOL, None, size(2, 4), 2, 1, some, partial=True)
    fit = fit_quota_lease([], ask, {}, room_left(CPU_100, Resources.ZERO))
    assert fit == LeaseFit(2, size(2, 4), frozenset({"c5.large"}))


def test_a_lease_taken_up_again_covers_only_the_types_it_holds_room_for() -> None:
    # Given a lease an earlier delivery took for 2 instances of c5.2xlarge (8 cpu, 16 GiB each)
    lease = Lease(POOL, "earlier", 2, EXAMPLE["c5.2xlarge"] * 2, expires_at=0)
    # When the candidates are the example's (a pool applied since allows a 96-cpu type too)
    held = held_by(lease, EXAMPLE)
    # Then it covers the types 2 instances of which fit what it holds, not the larger one
    assert held == {"c5.large", "c5.2xlarge"}
    # and a lease narrowed to some types covers none beyond them
    narrowed = Lease(
        POOL, "narrowed", 2, EXAMPLE["c5.2xlarge"] * 2, 0, instance_types=frozenset({"c5.large"})
    )
    assert held_by(narrowed, EXAMPLE) == {"c5.large"}
    # and one sized for 2 cpu holds none of a pool that now allows only larger types
    small = Lease(POOL, "small", 1, size(2, 4), expires_at=0)
    assert held_by(small, {"c5.24xlarge": EXAMPLE["c5.24xlarge"]}) == frozenset()
