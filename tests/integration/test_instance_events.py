"""Issue 5: EC2 instance state changes and reservation interruption warnings."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.records.status import INSTANCE_TERMINATED, format_timestamp
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from moto_capacity.core.clock import CLOCK
from tests.integration.test_reservation_sync import (
    LambdaContext,
    handler,
    ice_keys,
    published,
    reservations,
    run_into,
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


def launched_into_reservation(
    cloud: Cloud, subnets: dict[str, str], image: str, slots: int = 2
) -> tuple[str, str]:
    """One instance of ours in a synced reservation of `slots`, in a pool limited to 4
    instances."""
    reservation = targeted_pool(cloud, subnets, image, slots, limits={"instances": "4"})
    sync()
    cloud.send(launch_request("life-1", nodePool="general"))
    record = cloud.record("life-1")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    return record.instances[0].instance_id, reservation


def deliver(
    name: str, instance_id: str, *, time: str | None = None, **detail: Any
) -> dict[str, Any]:
    """The event as EC2 sends it, stamped with when the change happened (`time`: now on the
    emulator's clock unless the change happened earlier and the event comes late)."""
    event = sample_event(name, **{"instance-id": instance_id, **detail})
    event["time"] = time or format_timestamp(CLOCK.now())
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
    item = InstanceRecords(get_settings().state_table_name, clock=time.time).stored_item(
        instance_id
    )
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


@pytest.mark.parametrize("state", ["terminated", "stopped"])
def test_a_slot_our_instance_gives_back_is_launched_into_before_the_next_sync(
    snapshot_launchers, subnets, image, state
):
    # Given a targeted reservation of 2 (EC2 puts no untargeted launch in it), synced, whose
    # other slot someone else took since: our request for 2 got 1 in it and EC2's
    # ReservationCapacityExceeded for the other, so the launcher marked it exhausted (its
    # snapshot's flag and a `reserved:cr-` ICE entry)
    cloud = snapshot_launchers
    reservation = targeted_pool(
        cloud, subnets, image, 2, limits={"instances": "4"}, InstanceMatchCriteria="targeted"
    )
    sync()
    run_into(cloud, reservation, 1)
    cloud.send(launch_request("fill-1", nodePool="general", count=2))
    filled = cloud.record("fill-1")
    assert filled is not None
    landed = [i for i in filled.instances if i.capacity_reservation_id == reservation]
    assert len(landed) == 1, filled.to_detail()
    assert snapshot(reservation).snapshot.exhausted
    assert f"reserved:{reservation}" in ice_keys()
    # When the user stops or terminates that instance, and its state change arrives (once EC2
    # lists it: no launch of this test's asked DescribeInstances, which would have waited)
    instance_id = landed[0].instance_id
    cloud.wait_out_consistency()
    if state == "stopped":
        cloud.ec2.stop_instances(InstanceIds=[instance_id])
    else:
        cloud.ec2.terminate_instances(InstanceIds=[instance_id])
    assert deliver(STATE_CHANGE, instance_id, state=state)["action"] == "released"
    # Then the next request, before any sync, lands in the slot it gave back: the release is
    # evidence of room that outweighs the mark, and an on-demand launch there would leave the
    # reservation idle for the whole life of that instance
    assert not snapshot(reservation).snapshot.exhausted
    assert f"reserved:{reservation}" not in ice_keys()
    cloud.send(launch_request("after-1", nodePool="general"), batch=cloud.fresh_batch())
    after = cloud.record("after-1")
    assert after is not None
    assert [i.capacity_reservation_id for i in after.instances] == [reservation], after.to_detail()


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


def test_an_empty_event_is_ignored_without_a_call(cloud):
    """`sam local invoke InstanceEventsFunction` without -e sends `{}`: a KeyError before."""
    calls: Counter[str] = Counter()
    for service in ("dynamodb", "ec2", "events"):
        aws.client(service).meta.events.register(
            f"before-call.{service}", lambda model, **_: calls.update([model.name])
        )
    result = handler("instance_events")({}, LambdaContext())
    assert result["action"] == "ignored"
    assert calls == Counter()


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
    node_class = ConfigStore(get_settings().state_table_name, clock=system_clock).node_class(
        "standard"
    )
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
