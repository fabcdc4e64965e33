"""Issue 5: reconciliation inside the sync repairs pool usage and adopts orphans."""

from __future__ import annotations

import time

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.tags import REQUEST_ID
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_reservation_sync import (
    run_into,
    snapshot,
    sync,
    targeted_pool,
    use_snapshots,
)
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def limits(clock: float | None = None) -> PoolLeaseStore:
    settings = get_settings()
    return PoolLeaseStore(
        settings.state_table_name, settings.limit_lease_seconds, clock=lambda: clock or time.time()
    )


def usage_store() -> PoolUsageStore:
    return PoolUsageStore(get_settings().state_table_name)


def leak(pool: str, instances: int) -> None:
    """Usage no instance explains (what a blind writer of an older version could leave)."""
    aws.client("dynamodb").update_item(
        TableName=get_settings().state_table_name,
        Key={"pk": {"S": f"Limits#{pool}"}, "sk": {"S": "Usage"}},
        UpdateExpression="ADD instances :n",
        ExpressionAttributeValues={":n": {"N": str(instances)}},
    )


def test_reconciliation_repairs_leaked_usage_and_reports_the_drift(
    snapshot_launchers, subnets, image
):
    # Given one instance of ours, whose termination event was lost, and usage that leaked
    cloud = snapshot_launchers
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    cloud.send(launch_request("leak-1", nodePool="general", count=2))
    record = cloud.record("leak-1")
    assert record is not None
    assert record.launched == 2
    cloud.ec2.terminate_instances(InstanceIds=[record.instances[0].instance_id])
    leak("general", 3)  # 2 launched + 3 leaked = 5
    assert usage_store().usage("general").instances == 5
    # When the sync reconciles
    report = sync().reconciliation
    # Then usage is what really runs, and the drift is reported in instances
    assert report is not None
    assert usage_store().usage("general").instances == 1
    assert report.drift == {"general": 4}
    # and the next sync finds nothing to repair
    again = sync().reconciliation
    assert again is not None
    assert again.drift == {"general": 0}


def test_reconciliation_reclaims_an_expired_lease_and_keeps_live_ones(
    snapshot_launchers, subnets, image
):
    # Given a lease of a worker that died an hour ago, and a live one
    cloud = snapshot_launchers
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    one = Resources(instances=1)
    assert reserve_room(limits(clock=time.time() - 3600), "general", "dead", one, 3, 1, None) == 3
    assert reserve_room(limits(), "general", "alive", one, 2, 1, None) == 2
    # When the sync reconciles
    report = sync().reconciliation
    # Then the dead lease is gone and only the live one still counts
    assert report is not None
    assert report.reclaimed == ["general/dead"]
    assert [lease.lease_id for lease in limits().leases()] == ["alive"]
    assert usage_store().usage("general").instances == 2
    assert report.drift == {"general": 0}


def test_reconciliation_adopts_an_orphan_a_crashed_worker_launched(
    snapshot_launchers, subnets, image
):
    # Given an instance tagged for a request, in a reservation, that no instance item records
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2, limits={"instances": "10"})
    tags = {
        "capacity-launcher:managed": "true",
        "capacity-launcher:request-id": "crashed-1",
        "capacity-launcher:node-pool": "general",
        "capacity-launcher:node-class": "standard",
        "capacity-launcher:requester": "team-a",
        # launched by this deployment (a worker of its stack)
        "capacity-launcher:stack": str(get_settings().stack_name),
    }
    (orphan,) = run_into(cloud, reservation, 1, tags)
    # When the sync reconciles
    report = sync().reconciliation
    # Then the orphan is adopted as its request's instance, with its size, and counted
    assert report is not None
    assert report.adopted == [orphan]
    item = InstanceRecords(get_settings().state_table_name, clock=time.time).stored_item(orphan)
    assert item is not None
    assert item["requestId"] == "crashed-1"
    assert item["nodePool"] == "general"
    assert item["capacityType"] == "reserved"
    assert item["capacityReservationId"] == reservation
    assert item["cpu"] == 2
    assert item["memoryMiB"] == 8192
    assert usage_store().usage("general").instances == 1
    # and the reservation's snapshot shows whose instance uses it
    assert snapshot(reservation).usage_by_requester == {"team-a": 1}
    assert sync().reconciliation.adopted == []  # type: ignore[union-attr]


def request_tags_of(cloud: Cloud, instance_ids: set[str]) -> dict[str, dict[str, str]]:
    described = cloud.ec2.describe_instances(InstanceIds=sorted(instance_ids))["Reservations"]
    return {
        i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        for r in described
        for i in r["Instances"]
    }


def test_reconciliation_tags_a_shared_fleets_instances_ec2_did_not_know_in_time(
    snapshot_launchers, subnets, image
):
    # Given two requests served by one CreateFleet, whose instances EC2 does not know for a
    # minute: longer than the launcher waits before tagging each request's share
    cloud = snapshot_launchers
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_consistency(instance_visibility_seconds=60)
    handed_back = cloud.send(
        launch_request("shared-1", nodePool="general", requester="team-a", tags={"p": "one"}),
        launch_request("shared-2", nodePool="general", requester="team-b", count=2),
    )
    assert handed_back == []
    records = {r: cloud.record(r) for r in ("shared-1", "shared-2")}
    ids = {r: {i.instance_id for i in rec.instances} for r, rec in records.items() if rec}
    assert [len(ids["shared-1"]), len(ids["shared-2"])] == [1, 2]
    cloud.wait_out_consistency()
    moto_capacity.advance_clock(60)
    carried = request_tags_of(cloud, ids["shared-1"] | ids["shared-2"])
    assert all(REQUEST_ID not in tags for tags in carried.values())  # the launch gave up
    # When the sync reconciles
    report = sync().reconciliation
    # Then each instance carries its own request's tags, as its record says
    assert report is not None
    assert sorted(report.retagged) == sorted(ids["shared-1"] | ids["shared-2"])
    assert report.retag_failed == []
    carried = request_tags_of(cloud, ids["shared-1"] | ids["shared-2"])
    for request_id, requester, own in (
        ("shared-1", "team-a", {"p": "one"}),
        ("shared-2", "team-b", {}),
    ):
        for instance_id in ids[request_id]:
            tags = carried[instance_id]
            assert tags[REQUEST_ID] == request_id
            assert tags["capacity-launcher:requester"] == requester
            assert tags["capacity-launcher:node-pool"] == "general"
            assert tags["capacity-launcher:managed"] == "true"
            assert {k: tags[k] for k in own} == own
    assert "p" not in carried[next(iter(ids["shared-2"]))]
    # and the next sync has nothing left to tag
    again = sync().reconciliation
    assert again is not None and again.retagged == []
