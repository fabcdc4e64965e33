"""Instances launched under a lease reclaimed before it settled count only as far as the lease
taken for them again holds them (`pool_usage.kept_under`, issue 34): the types it covers, in
the order of their ids, never more than its count and amount, and none when fewer than the
gang's minCount are held, or no lease was granted."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.pool_usage import Lease, UnleasedFit, kept_under, total
from capacity_launcher.domain.quantities import Resources


def size(cpu: int) -> Resources:
    return Resources(cpu=Decimal(cpu), memory_mib=1024 * cpu, gpu=0, instances=1)


def lease(count: int, each: Resources, types: frozenset[str] | None = None) -> Lease:
    return Lease("general", "r", count, each * count, 0, instance_types=types)


def test_no_lease_granted_keeps_none():
    launched = {"i-1": size(2), "i-2": size(2)}
    fit = kept_under(None, launched, dict.fromkeys(launched, "m5.large"), 0)
    assert fit == UnleasedFit((), ("i-1", "i-2"))


def test_as_many_as_the_lease_counts_in_the_order_of_their_ids():
    launched = {"i-b": size(2), "i-a": size(2), "i-c": size(2)}
    fit = kept_under(lease(2, size(2)), launched, dict.fromkeys(launched, "m5.large"), 1)
    assert fit == UnleasedFit(("i-a", "i-b"), ("i-c",))


def test_only_the_types_the_lease_covers():
    launched = {"i-1": size(4), "i-2": size(2), "i-3": size(2)}
    types = {"i-1": "m5.xlarge", "i-2": "m5.large", "i-3": "m5.large"}
    fit = kept_under(lease(3, size(2), frozenset({"m5.large"})), launched, types, 1)
    assert fit == UnleasedFit(("i-2", "i-3"), ("i-1",))


def test_a_gang_short_of_its_min_count_keeps_nothing():
    launched = {"i-1": size(1), "i-2": size(1), "i-3": size(1)}
    fit = kept_under(lease(2, size(1)), launched, dict.fromkeys(launched, "t"), 3)
    assert fit == UnleasedFit((), ("i-1", "i-2", "i-3"))


@given(
    cpus=st.lists(st.integers(1, 8), max_size=8),
    count=st.integers(1, 8),
    each=st.integers(1, 8),
    least=st.integers(0, 4),
)
def test_never_more_than_the_lease_holds_and_every_instance_is_decided(cpus, count, each, least):
    launched = {f"i-{n}": size(c) for n, c in enumerate(cpus)}
    held = lease(count, size(each))
    fit = kept_under(held, launched, dict.fromkeys(launched, "t"), least)
    assert sorted(fit.kept + fit.over) == sorted(launched)
    kept = total(launched[i] for i in fit.kept)
    assert len(fit.kept) <= count
    assert all(v >= 0 for v in (held.amount - kept).amounts().values())
    assert not fit.kept or len(fit.kept) >= least
