"""Instances launched under a lease reclaimed before it settled count only as far as the pool's
limits still hold them (`pool_usage.fit_unleased`, issue 34): never over the limits, as many as
fit in the order of their ids, and none when fewer than the gang's minCount fit."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from capacity_launcher.domain.pool_usage import UnleasedFit, fit_unleased, total
from capacity_launcher.domain.quantities import PoolLimits, Resources


def size(cpu: int) -> Resources:
    return Resources(cpu=Decimal(cpu), memory_mib=1024 * cpu, gpu=0, instances=1)


def test_another_lease_took_the_room_none_fit():
    launched = {"i-1": size(2), "i-2": size(2)}
    used = size(2) * 2  # the other request's two instances
    fit = fit_unleased(PoolLimits(instances=2), used, launched, 0)
    assert fit == UnleasedFit((), ("i-1", "i-2"))


def test_as_many_as_fit_in_the_order_of_their_ids():
    launched = {"i-b": size(2), "i-a": size(2), "i-c": size(2)}
    fit = fit_unleased(PoolLimits(cpu=Decimal(6)), size(2), launched, 0)
    assert fit == UnleasedFit(("i-a", "i-b"), ("i-c",))


def test_a_gang_short_of_its_min_count_keeps_nothing():
    launched = {"i-1": size(1), "i-2": size(1), "i-3": size(1)}
    fit = fit_unleased(PoolLimits(instances=3), size(1), launched, 3)
    assert fit == UnleasedFit((), ("i-1", "i-2", "i-3"))


def test_no_limits_hold_everything():
    launched = {"i-1": size(8)}
    assert fit_unleased(None, size(100), launched, 1) == UnleasedFit(("i-1",), ())


@given(
    cpus=st.lists(st.integers(1, 8), max_size=8),
    used=st.integers(0, 20),
    limit=st.integers(0, 24),
    least=st.integers(0, 4),
)
def test_never_over_the_limits_and_every_instance_is_decided(cpus, used, limit, least):
    launched = {f"i-{n}": size(c) for n, c in enumerate(cpus)}
    limits = PoolLimits(cpu=Decimal(limit))
    fit = fit_unleased(limits, size(used), launched, least)
    assert sorted(fit.kept + fit.over) == sorted(launched)
    kept = total(launched[i] for i in fit.kept)
    if fit.kept:
        assert not (size(used) + kept).fits_within(limits)
        assert len(fit.kept) >= least
