"""The settle loop (service/lease_settlement.py) over the in-memory lease port: each step of
`lease_settlement.settle_step`, and a write that meets a lease that moved, without moto."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from capacity_launcher.domain.accounting.lease_settlement import (
    SettleStep,
    left_to_count,
    settle_step,
)
from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.errors import LeaseReclaimed
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion
from capacity_launcher.service.lease_settlement import LeaseNotSettled, settle
from tests.fakes.leases import FakeLeases

POOL = "general"
ONE = Resources(cpu=2, memory_mib=8192, instances=1)


def leases_with_open_lease(count: int = 2) -> FakeLeases:
    fake = FakeLeases({POOL: None}, clock=lambda: 1_000.0)
    fake.leases[(POOL, "r-1")] = Lease(POOL, "r-1", count, ONE * count, 1_900)
    return fake


def instances(n: int) -> dict[str, Resources]:
    return {f"i-{k}": ONE for k in range(n)}


def test_each_step_from_the_lease_as_read():
    open_lease = Lease(POOL, "r-1", 1, ONE, 1_900)
    assert settle_step(open_lease, instances(1)) is SettleStep.WRITE
    assert settle_step(Lease(POOL, "r-1", 1, ONE, 1_900, settled=True), {}) is (
        SettleStep.ALREADY_SETTLED
    )
    assert settle_step(None, instances(1)) is SettleStep.RECLAIMED
    # A reclaimed lease with nothing left to count settles to its marker alone
    assert settle_step(None, {}) is SettleStep.WRITE
    assert left_to_count(instances(3), {"i-0", "i-2"}) == {"i-1": ONE}


def test_a_settle_puts_members_in_the_leases_place_once():
    fake = leases_with_open_lease()
    settle(fake, POOL, "r-1", instances(2))
    settle(fake, POOL, "r-1", instances(2))  # a redelivery's settle finds it settled
    assert fake.usage(POOL) == ONE * 2
    assert fake.counted(POOL) == {"i-0", "i-1"}
    assert fake.leases[(POOL, "r-1")].settled


def test_a_reclaimed_lease_with_instances_left_is_leased_again_by_the_caller():
    fake = FakeLeases({POOL: None}, clock=lambda: 1_000.0)
    with pytest.raises(LeaseReclaimed):
        settle(fake, POOL, "r-1", instances(1))
    assert fake.usage(POOL) == Resources.ZERO


class MovedOnce(FakeLeases):
    """Another delivery settles the lease between this one's read and its write, counting
    one instance of the two."""

    def __init__(self) -> None:
        super().__init__({POOL: None}, clock=lambda: 1_000.0)
        self.leases[(POOL, "r-1")] = Lease(POOL, "r-1", 2, ONE * 2, 1_900)
        self.writes = 0

    def write_settlement(
        self,
        pool: str,
        lease_id: str,
        lease: Lease | None,
        pending: Mapping[str, Resources],
        launched: int,
        records: Mapping[str, InstanceRecord] | None = None,
        completions: Sequence[IntentCompletion] = (),
    ) -> bool:
        self.writes += 1
        if self.writes == 1:
            super().write_settlement(pool, lease_id, lease, {"i-0": ONE}, launched)
        return super().write_settlement(
            pool, lease_id, lease, pending, launched, records, completions
        )


def test_a_write_that_meets_a_moved_lease_reads_again_and_counts_nothing_twice():
    fake = MovedOnce()
    settle(fake, POOL, "r-1", instances(2))
    # The first write failed (the lease had moved); the second read found it settled
    assert fake.writes == 1
    assert fake.counted(POOL) == {"i-0"}
    assert fake.usage(POOL) == ONE


class AlwaysMoved(FakeLeases):
    def write_settlement(self, *args: object, **kw: object) -> bool:
        return False


def test_a_lease_that_keeps_moving_is_handed_back_not_looped_on():
    fake = AlwaysMoved({POOL: None}, clock=lambda: 1_000.0)
    fake.leases[(POOL, "r-1")] = Lease(POOL, "r-1", 1, ONE, 1_900)
    with pytest.raises(LeaseNotSettled, match="r-1"):
        settle(fake, POOL, "r-1", instances(1))
