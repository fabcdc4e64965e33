"""limits.unready, decided in the domain (domain/accounting/pool_usage.py): a pool launches nothing
more while it has more unready instances than it allows, flat or as a percentage of its instances
(docs/provisioner.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.pool_usage import Readiness, unready_refusal
from capacity_launcher.domain.errors import UnreadyLimitReached
from capacity_launcher.domain.quantities import PoolLimits


def _limits(unready: int | str | None) -> PoolLimits:
    return PoolLimits.model_validate({"instances": 100, "unready": unready})


def test_leases_count_whole_and_members_until_marked_ready() -> None:
    found = Readiness.of(leased=3, members=["i-1", "i-2", "i-3"], ready=["i-2", "i-gone"])
    assert found == Readiness(unready=5, instances=6)


@pytest.mark.parametrize(
    ("unready", "found", "refused"),
    [
        (2, Readiness(unready=2, instances=10), False),  # at the limit: still launches
        (2, Readiness(unready=3, instances=10), True),
        (0, Readiness(unready=1, instances=1), True),
        ("20%", Readiness(unready=2, instances=10), False),  # 20% of 10 allows 2
        ("20%", Readiness(unready=2, instances=9), True),  # 20% of 9 allows 1 (rounded down)
    ],
)
def test_a_pool_refuses_while_more_are_unready_than_it_allows(unready, found, refused) -> None:
    refusal = unready_refusal("general", _limits(unready), found)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert isinstance(refusal, UnreadyLimitReached)
        assert "node pool general: limits.unready" in str(refusal)


@given(unready=st.integers(0, 50), instances=st.integers(0, 200))
def test_without_limits_unready_nothing_is_refused(unready: int, instances: int) -> None:
    found = Readiness(unready=min(unready, instances), instances=instances)
    assert unready_refusal("general", _limits(None), found) is None
    assert unready_refusal("general", None, found) is None
