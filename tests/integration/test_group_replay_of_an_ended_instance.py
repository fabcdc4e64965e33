"""A replayed launch into an ODCR group whose instance ended before the replay: EC2 describes
an ended instance in no reservation, yet it was launched `capacity-reservations-only` into the
group, so its record says reserved (the member unknown), never On-Demand. Found by the
simulation's `groups` profile (seed 2, docs/simulation.md): a reserved-only pool's record named
an On-Demand instance."""

from __future__ import annotations

import moto_capacity
from tests.integration.test_intent_done_with_settle import _intents
from tests.integration.test_launch_into_reservations import (
    expire_idempotency_claims,
    group_of,
    group_pool,
    reserve,
)
from tests.integration.test_reservation_claim_rides_intent import _dies_before_its_settle
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import launch_request


def test_a_group_replay_records_an_instance_ended_since_as_reserved(
    cloud, subnets, image, monkeypatch
):
    # Given a group of two targeted reservations a reserved-only pool targets, and a request
    # whose container died between its CreateFleet and its settle (the answer stored nowhere)
    moto_capacity.set_consistency(0, 0)
    members = [reserve(cloud, 2, InstanceMatchCriteria="targeted") for _ in range(2)]
    group_pool(cloud, subnets, image, group_of(cloud, *members), capacity_types=("reserved",))
    sync()
    request = launch_request("ended-1", nodePool="general")
    _dies_before_its_settle(cloud, monkeypatch, request)
    [pending] = _intents(cloud, "ended-1")
    assert pending.state == "pending"
    # and its instance, launched in a member, ended by its user before the redelivery
    [launched] = cloud.managed_instances()
    assert launched["CapacityReservationId"] in members
    cloud.ec2.terminate_instances(InstanceIds=[launched["InstanceId"]])
    expire_idempotency_claims(cloud)
    # When the request is delivered again (the pending intent replayed)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then its record names the instance as launched reserved, in a member EC2 no longer names
    record = cloud.record("ended-1")
    assert record is not None and record.launched == 1
    [instance] = record.instances
    assert instance.instance_id == launched["InstanceId"]
    assert instance.capacity_type == "reserved"
    assert instance.capacity_reservation_id is None
