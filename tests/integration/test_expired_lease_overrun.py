"""A pool's limits hold through an expired lease (issue 34, item 1).

`general` has room for 2 instances. A request's first delivery leases both and is killed before
it writes its intent; its lease outlives its worker until it expires (15 minutes), and the sync,
which reclaims expired leases, may come late. The attack, step by step:

1. the redelivery takes up the expired lease the sync has not reclaimed yet;
2. the sync runs under its launch and reclaims that lease (expired, so reclaimable);
3. another request leases the room the reclaim freed, and launches;
4. the redelivery launches too and settles a lease it no longer finds.

Before the fix 4 instances ran in a pool limited to 2. Closed at both ends: a take-up is
conditioned on the lease being unexpired and extends it (an expired one is given back and a new
lease is taken under the limits), and a settle that finds its lease reclaimed takes a lease for
its instances again, as a new request's is taken, and keeps only what that lease holds,
terminating the rest (`LeaseReclaimedOverLimit`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from local_cloud.lambda_runtime import running
from tests.integration.test_launch_into_reservations import expire_idempotency_claims, setup_pool
from tests.support.cloud import Cloud, launch_request
from tests.support.crashes import worker_dies_at


def limited_pool(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """`general`: m5.large on-demand, room for 2 instances."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})


def running_in_general(cloud: Cloud) -> list[str]:
    return [
        i["InstanceId"]
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": "capacity-launcher:node-pool", "Value": "general"} in i.get("Tags", [])
    ]


def usage() -> int:
    return PoolUsageStore(get_settings().state_table_name).usage("general").instances


def past_the_lease() -> None:
    moto_capacity.advance_clock(get_settings().limit_lease_seconds + 5)


@contextmanager
def after_its_lease(
    monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Any]
) -> Iterator[None]:
    """The next lease taken or taken up (its launch is under way) runs `meanwhile` as soon as
    it is: what other workers do while this one launches."""
    fired: list[bool] = []
    with monkeypatch.context() as patch:
        for step in ("write", "extend"):
            original = getattr(PoolLeaseStore, step)

            def leased(self: PoolLeaseStore, *args: Any, _step: Any = original, **kw: Any) -> Any:
                lease = _step(self, *args, **kw)
                if lease is not None and not fired:
                    fired.append(True)
                    meanwhile()
                return lease

            patch.setattr(PoolLeaseStore, step, leased)
        yield
    assert fired, "the launch took no lease"


def sync_then_other(cloud: Cloud) -> Callable[[], None]:
    """The late sync runs (reclaiming what expired), then another container serves another
    request for both instances."""

    def meanwhile() -> None:
        with running("ReservationSyncFunction", cloud.environment, cloud.names.account_id):
            cloud.adapters().reservation_sync().run()
        cloud.send(launch_request("other", count=2, nodePool="general"), batch=cloud.fresh_batch())

    return meanwhile


def test_an_expired_lease_taken_up_never_lets_the_pool_run_over_its_limit(
    cloud, subnets, image, monkeypatch
):
    # Given a request whose first delivery leased both of `general`'s instances and was
    # killed before it wrote its intent, and its lease expired, the sync not run since
    limited_pool(cloud, subnets, image)
    first = launch_request("first", count=2, nodePool="general")
    with worker_dies_at(monkeypatch, "write_intent"):
        cloud.send(first)
    leases = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases()
    assert [lease.count for lease in leases] == [2]
    past_the_lease()
    # When it is delivered again, and under its launch the late sync runs and another request
    # asks for both instances
    expire_idempotency_claims(cloud)
    with after_its_lease(monkeypatch, sync_then_other(cloud)):
        cloud.send(first, batch=cloud.fresh_batch())
    # Then the pool never runs more than its limit
    running = running_in_general(cloud)
    assert len(running) <= 2, running
    assert usage() <= 2
    # And the redelivery launched under a lease of its own (the expired one given back and a
    # new one taken): the other request found no room
    record = cloud.record("first")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert len(running) == 2 and usage() == 2
    other = cloud.record("other")
    assert other is not None and other.launched == 0, other.to_detail()
    assert [e.code for e in other.errors] == ["LimitExceeded"], other.to_detail()


def test_a_settle_that_finds_its_lease_reclaimed_terminates_what_the_limits_no_longer_hold(
    cloud, subnets, image, monkeypatch
):
    # Given a request whose worker is so slow that its lease expires under its launch, the
    # sync reclaims it, and another request leases the room and launches both instances
    limited_pool(cloud, subnets, image)

    def meanwhile() -> None:
        past_the_lease()
        sync_then_other(cloud)()

    with after_its_lease(monkeypatch, meanwhile):
        cloud.send(launch_request("slow", count=2, nodePool="general"))
    # Then the pool never runs more than its limit: the slow request's instances were
    # terminated, as its record says
    running = running_in_general(cloud)
    assert len(running) <= 2, running
    assert usage() <= 2
    slow = cloud.record("slow")
    assert slow is not None and slow.launched == 0, slow.to_detail()
    assert slow.status is RequestStatus.FAILED, slow.to_detail()
    codes = [e.code for e in slow.errors]
    assert "LeaseReclaimedOverLimit" in codes, slow.to_detail()
    other = cloud.record("other")
    assert other is not None and other.launched == 2, other.to_detail()
