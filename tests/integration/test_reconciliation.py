"""Issue 5: reconciliation inside the sync repairs pool usage and adopts orphans."""

from __future__ import annotations

import time

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.domain.quantities import Resources
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


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def limits(clock: float | None = None) -> PoolLimitsStore:
    settings = get_settings()
    return PoolLimitsStore(
        settings.state_table_name, settings.limit_lease_seconds, clock=lambda: clock or time.time()
    )


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
    assert limits().usage("general").instances == 5
    # When the sync reconciles
    report = sync().reconciliation
    # Then usage is what really runs, and the drift is reported in instances
    assert report is not None
    assert limits().usage("general").instances == 1
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
    assert limits(clock=time.time() - 3600).reserve("general", "dead", one, 3, 1, None) == 3
    assert limits().reserve("general", "alive", one, 2, 1, None) == 2
    # When the sync reconciles
    report = sync().reconciliation
    # Then the dead lease is gone and only the live one still counts
    assert report is not None
    assert report.reclaimed == ["general/dead"]
    assert [lease.lease_id for lease in limits().leases()] == ["alive"]
    assert limits().usage("general").instances == 2
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
    }
    (orphan,) = run_into(cloud, reservation, 1, tags)
    # When the sync reconciles
    report = sync().reconciliation
    # Then the orphan is adopted as its request's instance, with its size, and counted
    assert report is not None
    assert report.adopted == [orphan]
    item = InstanceRecords(get_settings().state_table_name).stored_item(orphan)
    assert item is not None
    assert item["requestId"] == "crashed-1"
    assert item["nodePool"] == "general"
    assert item["capacityType"] == "reserved"
    assert item["capacityReservationId"] == reservation
    assert item["cpu"] == 2
    assert item["memoryMiB"] == 8192
    assert limits().usage("general").instances == 1
    # and the reservation's snapshot shows whose instance uses it
    assert snapshot(reservation).usage_by_requester == {"team-a": 1}
    assert sync().reconciliation.adopted == []  # type: ignore[union-attr]
