"""Issue 38: a launch into a reservation group reads the snapshots it needs, not every member's.

The sync's coverage item of the group says the room it saw in each member; a launch reads the
members' snapshots with the most room first, a page at a time, as one into selected reservations
does (the members its container's last launch into the group landed in first). EC2 chooses the
member each instance lands in: DescribeInstances names it, its slot is noted in the lease
settle's transaction while the intent is pending (once, whoever replays it), and a member the
read did not reach has its snapshot read after the launch (one BatchGetItem of those, however
many members the group has), so the record names its type and dates. A warm request into a
group of 1,000 members makes the calls it makes into a group of one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.service.reservation_pages import FIRST_PAGE
from tests.integration.test_intent_done_with_settle import _intents
from tests.integration.test_launch_into_reservations import (
    ZONE,
    available,
    expire_idempotency_claims,
    group_of,
    reserve,
    setup_pool,
)
from tests.integration.test_reservation_claim_rides_intent import _dies_before_its_settle
from tests.integration.test_reservation_reads import snapshot_reads
from tests.integration.test_reservation_sync import snapshot, snapshots, sync
from tests.support.cloud import Cloud, launch_request

MEMBERS = 1000
# GroupResources takes at most this many ARNs a call.
_GROUPED_A_CALL = 10


@contextmanager
def calls_by_operation(*services: str) -> Iterator[Counter[str]]:
    """Every call the service's shared clients of `services` make, by operation."""
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    for service in services:
        events = aws.client(service).meta.events
        events.register(f"provide-client-params.{service}.*", note, unique_id="group-reads")
    try:
        yield calls
    finally:
        for service in services:
            events = aws.client(service).meta.events
            events.unregister(f"provide-client-params.{service}.*", unique_id="group-reads")


def _many(cloud: Cloud, count: int, slots: int) -> list[str]:
    """`count` targeted m5.large reservations of `slots` each, active (one wait for all)."""
    made = [
        str(
            cloud.ec2.create_capacity_reservation(
                InstanceType="m5.large",
                InstancePlatform="Linux/UNIX",
                AvailabilityZone=ZONE,
                InstanceCount=slots,
                InstanceMatchCriteria="targeted",
            )["CapacityReservation"]["CapacityReservationId"]
        )
        for _ in range(count)
    ]
    cloud.wait_until_active(made[-1])
    return made


def _group_pool(cloud: Cloud, subnets: dict[str, str], image: str, members: list[str]) -> str:
    """The group of `members` (in that order: EC2 fills them in it) the pool `general`
    targets (reserved, then on-demand)."""
    arn = group_of(cloud, *members[:_GROUPED_A_CALL], name="many")
    account = cloud.names.account_id
    for start in range(_GROUPED_A_CALL, len(members), _GROUPED_A_CALL):
        aws.client("resource-groups").group_resources(
            Group=arn,
            ResourceArns=[
                f"arn:aws:ec2:us-east-1:{account}:capacity-reservation/{r}"
                for r in members[start : start + _GROUPED_A_CALL]
            ],
        )
    target = {"capacityReservationResourceGroupArn": arn}
    setup_pool(cloud, subnets, image, reservation_spec={"capacityReservationTarget": target})
    return arn


def _noted_once(cloud: Cloud, members: list[str]) -> None:
    """Every member's snapshot holds what EC2 has left in it: each slot taken noted once."""
    held = {s.snapshot.reservation_id: s.snapshot.available for s in snapshots().list()}
    assert {m: held[m] for m in members} == {m: available(cloud, m) for m in members}


def test_a_warm_request_into_a_group_of_a_thousand_makes_ten_calls(cloud, subnets, image):
    # Given a resource group of 1,000 targeted reservations of 4 each the pool's NodeClass
    # targets, synced, EC2 consistent at once (its visibility delay would add retries)
    moto_capacity.set_consistency(0, 0)
    members = _many(cloud, MEMBERS, 4)
    _group_pool(cloud, subnets, image, members)
    sync()
    batch = cloud.fresh_batch()
    assert cloud.send(launch_request("warm-1", nodePool="general"), batch=batch) == []
    # When a warm container serves one request for one instance
    with calls_by_operation("dynamodb", "ec2", "events") as calls, snapshot_reads() as asked:
        assert cloud.send(launch_request("counted-1", nodePool="general"), batch=batch) == []
    # Then it makes the 10 calls a request into a group of one makes: one read of the coverage
    # and a page of members' snapshots (those with the most room, the member its container's
    # last launch landed in first), not 11 BatchGetItems of 100 members each
    assert dict(calls) == {
        "BatchGetItem": 1,  # the coverage, and the page of snapshots it names
        "BatchWriteItem": 1,  # the request's record
        "CreateFleet": 1,
        "DescribeInstances": 1,  # which member EC2 put it in
        "PutEvents": 1,
        "PutItem": 2,  # the idempotency claim, the body's binding
        "TransactWriteItems": 3,  # the lease, the intent, the settle (with the slot noted)
    }, calls
    assert len(set(asked)) <= FIRST_PAGE, sorted(set(asked))
    # And the record names the member it landed in, with its type, whose slot was noted once
    record = cloud.record("counted-1")
    assert record is not None and record.launched == 1
    [instance] = record.instances
    assert instance.capacity_reservation_id in asked
    assert instance.capacity_reservation_type == "default"
    landed = {i.capacity_reservation_id or "" for i in [instance]}
    warm = cloud.record("warm-1")
    assert warm is not None
    landed |= {i.capacity_reservation_id or "" for i in warm.instances}
    _noted_once(cloud, sorted(landed))
    assert sum(4 - snapshot(m).snapshot.available for m in landed) == 2


def _least_room_first_in_the_group(cloud: Cloud, subnets: dict[str, str], image: str) -> str:
    """A group whose first member (where EC2 puts a launch into the group first) has 1 slot,
    and 11 more of 4 each, synced: a launch reads the members with the most room first, so
    EC2 lands where it did not read. The first member."""
    first = reserve(cloud, 1, InstanceMatchCriteria="targeted")
    _group_pool(cloud, subnets, image, [first, *_many(cloud, 11, 4)])
    sync()
    return first


def test_a_landing_in_a_member_not_read_is_recorded_and_noted_once(cloud, subnets, image):
    # Given a group of 12 whose member EC2 fills first is the one with the least room
    moto_capacity.set_consistency(0, 0)
    first = _least_room_first_in_the_group(cloud, subnets, image)
    members = [first, *(s.snapshot.reservation_id for s in snapshots().list())]
    # When a request for one instance comes
    with snapshot_reads() as asked:
        assert cloud.send(launch_request("unread-1", nodePool="general")) == []
    # Then it read a page of the members with the most room, and after the launch the one
    # EC2 put it in: not the 12
    assert len(set(asked)) <= FIRST_PAGE + 1, sorted(set(asked))
    # And its record names that member, with the type its snapshot says
    record = cloud.record("unread-1")
    assert record is not None and record.launched == 1
    [instance] = record.instances
    assert instance.capacity_reservation_id == first
    assert instance.capacity_reservation_type == "default"
    assert instance.capacity_reservation_start_date == snapshot(first).snapshot.start_date
    # And its slot was noted once, in the member it took (none in the members read)
    assert snapshot(first).snapshot.available == 0
    _noted_once(cloud, sorted(set(members)))
    [intent] = _intents(cloud, "unread-1")
    assert intent.state == "done"


def test_a_group_replay_landing_in_a_member_not_read_notes_its_slot_once(
    cloud, subnets, image, monkeypatch
):
    # Given a group of 12 whose member EC2 fills first is the one with the least room, and a
    # request whose container died between its CreateFleet and its settle (nothing noted)
    moto_capacity.set_consistency(0, 0)
    first = _least_room_first_in_the_group(cloud, subnets, image)
    members = sorted(s.snapshot.reservation_id for s in snapshots().list())
    request = launch_request("unread-died-1", nodePool="general")
    _dies_before_its_settle(cloud, monkeypatch, request)
    [pending] = _intents(cloud, "unread-died-1")
    assert pending.state == "pending"
    assert snapshot(first).snapshot.available == 1  # nothing noted yet
    expire_idempotency_claims(cloud)
    # When the request is delivered again to a new container (the pending intent replayed)
    with snapshot_reads() as asked:
        assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then one instance runs, in the member EC2 put it in, which its record names with its
    # type; its slot noted once, and no other member's
    record = cloud.record("unread-died-1")
    assert record is not None and record.launched == 1
    [instance] = record.instances
    assert instance.capacity_reservation_id == first
    assert instance.capacity_reservation_type == "default"
    assert len(cloud.managed_instances()) == 1
    assert snapshot(first).snapshot.available == 0
    _noted_once(cloud, members)
    [done] = _intents(cloud, "unread-died-1")
    assert done.state == "done" and list(done.instance_ids) == [instance.instance_id]
    # And the replay read a page and the member landed in, not the 12
    assert len(set(asked)) <= FIRST_PAGE + 1, sorted(set(asked))
