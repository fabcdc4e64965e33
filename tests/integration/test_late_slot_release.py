"""A termination event that arrives after the sync already counted its slot free gives nothing
back: the snapshot's room never exceeds EC2's (docs/operations.md, "How launchers use them")."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.records.status import format_timestamp
from moto_capacity.core.clock import CLOCK
from tests.integration.test_instance_events import (
    STATE_CHANGE,
    deliver,
    launched_into_reservation,
)
from tests.integration.test_launch_into_reservations import available
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.cloud import Cloud, launch_request


def counts(cloud: Cloud, reservation: str) -> tuple[int, int]:
    """(the snapshot's available, EC2's)."""
    return snapshot(reservation).snapshot.available, available(cloud, reservation)


def terminate(cloud: Cloud, instance_id: str) -> str:
    """The user terminates it (after it ran, as on AWS); the time EC2's event carries."""
    cloud.wait_out_consistency()
    cloud.ec2.terminate_instances(InstanceIds=[instance_id])
    ended_at = format_timestamp(CLOCK.now())
    cloud.wait_out_consistency()
    return ended_at


def released(instance_id: str, ended_at: str) -> dict[str, Any]:
    return deliver(STATE_CHANGE, instance_id, state="terminated", time=ended_at)


def test_a_late_termination_event_does_not_free_a_slot_the_sync_already_counted(
    cloud, subnets, image
):
    # Given a reservation of 1, synced, and our instance in its only slot
    instance_id, reservation = launched_into_reservation(cloud, subnets, image, slots=1)
    assert counts(cloud, reservation) == (0, 0)
    # When the instance terminates, and its event is late: the sync writes EC2's count first
    # (the slot freed), and a new launch takes that slot
    ended_at = terminate(cloud, instance_id)
    sync()
    assert counts(cloud, reservation) == (1, 1)
    cloud.send(launch_request("second-1", nodePool="general"), batch=cloud.fresh_batch())
    second = cloud.record("second-1")
    assert second is not None
    assert [i.capacity_reservation_id for i in second.instances] == [reservation]
    assert counts(cloud, reservation) == (0, 0)
    outcome = released(instance_id, ended_at)
    # Then the instance is released (its pool's usage, its record), but its slot is not given
    # back a second time: the snapshot holds no room EC2 does not have
    assert outcome["action"] == "released"
    assert counts(cloud, reservation) == (0, 0)


def test_a_termination_event_before_the_sync_gives_its_slot_back(cloud, subnets, image):
    # Given a reservation of 1, synced, and our instance in its only slot
    instance_id, reservation = launched_into_reservation(cloud, subnets, image, slots=1)
    assert counts(cloud, reservation) == (0, 0)
    # When it terminates and its event arrives before the next sync
    ended_at = terminate(cloud, instance_id)
    assert released(instance_id, ended_at)["action"] == "released"
    # Then its slot is room at once, as EC2 says
    assert counts(cloud, reservation) == (1, 1)
