"""Issue 5: EC2 instance state changes and reservation interruption warnings."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_items import PoolUsageStore
from capacity_launcher.domain.status import INSTANCE_TERMINATED
from capacity_launcher.settings import get_settings
from tests.integration.test_reservation_sync import (
    LambdaContext,
    handler,
    ice_keys,
    published,
    reservations,
    sample_event,
    snapshot,
    sync,
    targeted_pool,
    use_snapshots,
)
from tests.support.cloud import Cloud, launch_request

STATE_CHANGE = "ec2_instance_state_change.json"
INTERRUPTION = "ec2_capacity_reservation_interruption.json"


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def launched_into_reservation(cloud: Cloud, subnets: dict[str, str], image: str) -> tuple[str, str]:
    """One instance of ours in a synced reservation of 2, in a pool limited to 4 instances."""
    reservation = targeted_pool(cloud, subnets, image, 2, limits={"instances": "4"})
    sync()
    cloud.send(launch_request("life-1", nodePool="general"))
    record = cloud.record("life-1")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    return record.instances[0].instance_id, reservation


def deliver(name: str, instance_id: str, **detail: Any) -> dict[str, Any]:
    event = sample_event(name, **{"instance-id": instance_id, **detail})
    return dict(handler("instance_events")(event, LambdaContext()))


def usage(pool: str = "general") -> int:
    settings = get_settings()
    return PoolUsageStore(settings.state_table_name).usage(pool).instances


def test_a_terminated_instance_releases_its_limits_and_reservation_slot_once(
    snapshot_launchers, subnets, image
):
    # Given an instance of ours in a reservation, counted in its pool and the snapshot
    cloud = snapshot_launchers
    instance_id, reservation = launched_into_reservation(cloud, subnets, image)
    assert usage() == 1
    assert snapshot(reservation).snapshot.available == 1
    cloud.events()
    # When EC2 says it is stopping, then terminated, and the terminated event comes twice
    outcomes = [
        deliver(STATE_CHANGE, instance_id, state="stopping")["action"],
        deliver(STATE_CHANGE, instance_id, state="terminated")["action"],
        deliver(STATE_CHANGE, instance_id, state="terminated")["action"],
    ]
    # Then its usage and its slot are released exactly once
    assert outcomes == ["released", "duplicate", "duplicate"]
    assert usage() == 0
    assert snapshot(reservation).snapshot.available == 2
    # and the instance item, the request record and one Instance Terminated event say so
    item = InstanceRecords(get_settings().state_table_name).stored_item(instance_id)
    assert item is not None
    assert item["state"] == "terminated"
    assert item["releasedAt"]
    record = aws.client("dynamodb").get_item(
        TableName=get_settings().state_table_name,
        Key={"pk": {"S": "Request#life-1"}, "sk": {"S": "Record"}},
    )["Item"]
    assert record["releasedInstanceIds"]["SS"] == [instance_id]
    (event,) = published(cloud, INSTANCE_TERMINATED)
    assert event["detail"]["instanceId"] == instance_id
    assert event["detail"]["requestId"] == "life-1"
    assert event["detail"]["nodePool"] == "general"
    assert event["detail"]["capacityReservationId"] == reservation
    assert event["detail"]["state"] == "stopping"


def test_events_for_instances_we_did_not_launch_are_ignored_after_one_get_item(cloud):
    # Given no instance item for i-1234567890abcdef0 (the sample event's instance)
    calls: Counter[str] = Counter()
    for service in ("dynamodb", "ec2", "events"):
        aws.client(service).meta.events.register(
            f"before-call.{service}", lambda model, **_: calls.update([model.name])
        )
    # When its termination arrives
    result = handler("instance_events")(sample_event(STATE_CHANGE), LambdaContext())
    # Then one GetItem decided, and nothing else was called
    assert result["action"] == "ignored"
    assert calls == Counter({"GetItem": 1})


def test_an_interruption_warning_marks_the_reservation_exhausted(
    snapshot_launchers, subnets, image
):
    # Given an instance of ours in a reservation with a free slot
    cloud = snapshot_launchers
    instance_id, reservation = launched_into_reservation(cloud, subnets, image)
    assert snapshot(reservation).snapshot.usable
    # When EC2 warns that it interrupts the instance
    result = deliver(INTERRUPTION, instance_id)
    # Then the reservation is exhausted for every worker: snapshot flag and ICE cache item
    assert result["capacityReservationId"] == reservation
    assert snapshot(reservation).snapshot.exhausted
    assert f"reserved:{reservation}" in ice_keys()
    node_class = ConfigStore(get_settings().state_table_name).node_class("standard")
    (source,) = reservations().sources(node_class)
    assert [r.exhausted for r in source.reservations] == [True]


def test_an_interruption_warning_releases_the_pool_usage_once_and_names_the_request(
    snapshot_launchers, subnets, image
):
    # Given an instance of ours in a reservation, counted in its pool
    cloud = snapshot_launchers
    instance_id, reservation = launched_into_reservation(cloud, subnets, image)
    assert usage() == 1
    cloud.events()
    # When EC2 warns it will interrupt the instance, twice, then terminates it
    outcomes = [
        deliver(INTERRUPTION, instance_id)["action"],
        deliver(INTERRUPTION, instance_id)["action"],
        deliver(STATE_CHANGE, instance_id, state="terminated")["action"],
        deliver(STATE_CHANGE, instance_id, state="running")["action"],
    ]
    # Then its pool usage is released at the warning, exactly once; a late start is stale
    assert outcomes == ["marked", "duplicate", "duplicate", "ignored"]
    assert usage() == 0
    # and one event names the instance, its request and when EC2 will terminate it
    (event,) = published(cloud, INSTANCE_TERMINATED)
    assert event["detail"]["instanceId"] == instance_id
    assert event["detail"]["requestId"] == "life-1"
    assert event["detail"]["state"] == "interrupted"
    assert event["detail"]["capacityReservationId"] == reservation
    assert event["detail"]["terminationTime"] == "2026-01-15T12:02:00Z"


def test_the_interruptible_spelling_of_the_warning_is_handled_the_same(
    snapshot_launchers, subnets, image
):
    """EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and
    CloudTrail" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-interruptible-cr.html):
    its pages name the warning "EC2 Capacity Reservation Instance Interruption Warning" and
    "EC2 Interruptible Capacity Reservation Instance Interruption Warning"."""
    # Given an instance of ours in a reservation, counted in its pool
    cloud = snapshot_launchers
    instance_id, reservation = launched_into_reservation(cloud, subnets, image)
    assert usage() == 1
    # When the warning arrives under its other name
    event = sample_event(INTERRUPTION)
    event["detail-type"] = "EC2 Interruptible Capacity Reservation Instance Interruption Warning"
    event["detail"]["instance-id"] = instance_id
    result = handler("instance_events")(event, LambdaContext())
    # Then it is handled as the warning: the reservation marked, the pool usage released
    assert (result["action"], result["capacityReservationId"]) == ("marked", reservation)
    assert usage() == 0
    assert snapshot(reservation).snapshot.exhausted
