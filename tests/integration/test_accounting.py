"""Issue 11: pool usage and reservation slots are counted exactly once, whatever the interleaving.

Each test reproduces one way the accounting broke: a redelivery after settle, the sync and an
instance event releasing the same instance, a start after a stop, slots kept after an exception
or a gang failure, and a sync running in the middle of a launch.
"""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.domain.status import RequestStatus
from capacity_launcher.service.instance_events import RELEASING_STATES, STARTING_STATES
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import (
    setup_pool,
)
from tests.integration.test_reservation_sync import (
    LambdaContext,
    handler,
    sample_event,
    sync,
    use_snapshots,
)
from tests.support.cloud import Cloud, launch_request
from tests.support.template import load_template

STATE_CHANGE = "ec2_instance_state_change.json"


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def usage(pool: str = "general") -> int:
    return PoolLimitsStore(get_settings().state_table_name, 900).usage(pool).instances


def deliver(instance_id: str, state: str) -> str:
    event = sample_event(STATE_CHANGE, **{"instance-id": instance_id, "state": state})
    return str(handler("instance_events")(event, LambdaContext())["action"])


def test_the_sync_and_a_termination_event_release_an_instance_once(
    cloud, subnets, image, monkeypatch
):
    # Given two instances of ours, one terminated in EC2
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    cloud.send(launch_request("twice-1", nodePool="general", count=2))
    record = cloud.record("twice-1")
    assert record is not None and record.launched == 2
    gone = record.instances[0].instance_id
    cloud.ec2.terminate_instances(InstanceIds=[gone])
    # When its termination event is processed while the sync is between its reads and its repair
    real = Fleet.find_managed

    def event_meanwhile(self: Fleet, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        found = real(self, *args, **kwargs)
        assert deliver(gone, "terminated") == "released"
        return found

    monkeypatch.setattr(Fleet, "find_managed", event_meanwhile)
    sync()
    monkeypatch.undo()
    # Then the instance was released once: usage is what runs, and stays so
    assert usage() == 1
    deliver(gone, "terminated")
    sync()
    assert usage() == 1
    # and the pool's limit holds: 2 more fit, not 3
    cloud.send(launch_request("twice-2", nodePool="general", count=3, minCount=1))
    assert len(cloud.managed_instances()) == 3
    assert usage() == 3


def test_a_stopped_instance_started_again_is_counted_again_at_once(cloud, subnets, image):
    # Given an instance of ours in a pool limited to 1, stopped (its usage released)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("restart-1", nodePool="general"))
    record = cloud.record("restart-1")
    assert record is not None and record.launched == 1
    instance_id = record.instances[0].instance_id
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "stopped") == "released"
    assert usage() == 0
    # When it is started again, and EC2 says so
    cloud.ec2.start_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "pending") == "counted"
    assert deliver(instance_id, "running") == "duplicate"
    # Then it counts again at once (a sync does not undo it), and the pool has no room left
    assert usage() == 1
    sync()
    assert usage() == 1
    cloud.send(launch_request("restart-2", nodePool="general"))
    refused = cloud.record("restart-2")
    assert refused is not None and refused.status is RequestStatus.FAILED
    assert len(cloud.managed_instances()) == 1
    # and it is released again when it stops again
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "stopping") == "released"
    assert usage() == 0


def test_a_start_that_overruns_the_pool_is_counted_and_reported(cloud, subnets, image):
    # Given a stopped instance whose room in a pool of 1 was taken by another launch
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("first-1", nodePool="general"))
    record = cloud.record("first-1")
    assert record is not None
    instance_id = record.instances[0].instance_id
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    deliver(instance_id, "stopped")
    cloud.send(launch_request("second-1", nodePool="general"))
    assert usage() == 1
    # When someone starts it again
    cloud.ec2.start_instances(InstanceIds=[instance_id])
    # Then it is counted (it runs), and the overrun is reported
    assert deliver(instance_id, "running") == "overrun"
    assert usage() == 2


def test_the_template_routes_the_states_the_instance_events_act_on():
    rule = load_template()["Resources"]["InstanceEventsFunction"]["Properties"]["Events"][
        "InstanceStateChange"
    ]
    states = set(rule["Properties"]["Pattern"]["detail"]["state"])
    assert states == set(RELEASING_STATES | STARTING_STATES)


def test_a_sync_during_a_launch_does_not_count_its_instances_twice(cloud, subnets, image):
    # Given a launch whose instances exist in EC2 but whose lease is not settled yet
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    ran: list[bool] = []

    def sync_now(**_: object) -> None:
        if not ran:
            ran.append(True)
            sync()

    aws.client("ec2").meta.events.register("after-call.ec2.CreateFleet", sync_now)
    # When the sync runs right then
    cloud.send(launch_request("inflight-1", nodePool="general", count=2))
    aws.client("ec2").meta.events.unregister("after-call.ec2.CreateFleet", sync_now)
    # Then, once the launch settles, usage counts its instances once
    assert ran
    record = cloud.record("inflight-1")
    assert record is not None and record.launched == 2
    assert usage() == 2
