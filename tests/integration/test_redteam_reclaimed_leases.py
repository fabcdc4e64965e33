"""Red team on issue 34.1 (an expired lease never launched under): what a settle that finds its
lease reclaimed counts, beyond the pool's limits.

The reclaim gave the lease's room and quota usage back, and another request (of the same
requester) may have been admitted into them since: a settle that finds its lease reclaimed
takes a lease for its instances again, as a new request's is taken (the pool's limits and the
requester's quota), keeps what that lease holds and terminates the rest (before the fix it
fitted them to the pool's limits alone and counted them for the pool only)."""

from __future__ import annotations

import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from local_cloud.documents import capacity_quota
from local_cloud.lambda_runtime import running
from tests.integration.test_expired_lease_overrun import after_its_lease, past_the_lease
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import Cloud, launch_request

POOL = "general"


def running_for(cloud: Cloud, requester: str) -> list[str]:
    """The instances running (or pending) in `general` for `requester`."""
    return [
        i["InstanceId"]
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": "capacity-launcher:node-pool", "Value": POOL} in i.get("Tags", [])
        and {"Key": "capacity-launcher:requester", "Value": requester} in i.get("Tags", [])
    ]


def the_sync(cloud: Cloud) -> None:
    with running("ReservationSyncFunction", cloud.environment, cloud.names.account_id):
        cloud.adapters().reservation_sync().run()


def test_a_settle_that_finds_its_lease_reclaimed_never_runs_its_requester_over_its_quota(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a pool with room for 10, and team-a's quota of 2 instances in it
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    cloud.apply(capacity_quota("team-a", POOL, {"instances": "2"}))

    # When team-a's slow request leases its whole quota, its lease expires under its launch,
    # the sync reclaims it (giving the quota back), and team-a's other request is admitted
    # into that quota and launches
    def meanwhile() -> None:
        past_the_lease()
        the_sync(cloud)
        cloud.send(
            launch_request("other", count=2, nodePool=POOL, requester="team-a"),
            batch=cloud.fresh_batch(),
        )

    with after_its_lease(monkeypatch, meanwhile):
        cloud.send(launch_request("slow", count=2, nodePool=POOL, requester="team-a"))
    other = cloud.record("other")
    assert other is not None and other.launched == 2, other.to_detail()

    # Then team-a never runs more than its quota, even once the sync has counted everything
    the_sync(cloud)
    mine = running_for(cloud, "team-a")
    assert len(mine) <= 2, (mine, cloud.record("slow").to_detail())  # type: ignore[union-attr]
    slow = cloud.record("slow")
    assert slow is not None and slow.status is not RequestStatus.FULFILLED, slow.to_detail()


def test_a_gang_whose_lease_was_reclaimed_keeps_all_or_nothing_within_the_limits(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a pool with room for 4, and a gang of 3 (minCount 3) whose lease expires under its
    # launch, is reclaimed by the sync, and 2 of the room it freed are leased by another request
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "4"})

    def meanwhile() -> None:
        past_the_lease()
        the_sync(cloud)
        cloud.send(launch_request("other", count=2, nodePool=POOL), batch=cloud.fresh_batch())

    with after_its_lease(monkeypatch, meanwhile):
        cloud.send(launch_request("gang", count=3, minCount=3, nodePool=POOL))
    # Then the limits hold 2 of the gang's 3 at most: fewer than its minCount, so it keeps none
    the_sync(cloud)
    running_now = [
        i["InstanceId"]
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
    ]
    assert len(running_now) <= 4, running_now
    gang = cloud.record("gang")
    assert gang is not None and gang.launched == 0, gang.to_detail()
    assert gang.status is RequestStatus.FAILED, gang.to_detail()
    assert "LeaseReclaimedOverLimit" in [e.code for e in gang.errors], gang.to_detail()
