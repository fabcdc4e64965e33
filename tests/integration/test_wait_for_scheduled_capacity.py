"""Issue 16: a request that waits for scheduled reserved capacity (`waitForCapacityUntil`).

Everything runs on the emulator's clock: the launcher and the sync read it, and the launch queue's
delays follow it, so a held request comes back when the test advances the clock past its delay.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import WAITING, LaunchRecords
from capacity_launcher.domain.capacity.capacity_wait import BACKSTOP_MARGIN_SECONDS, HeldWait
from capacity_launcher.domain.records.index_shards import read_values
from capacity_launcher.domain.records.status import (
    CAPACITY_NOT_ACTIVE_BY_DEADLINE,
    RESERVATION_ACTIVATED,
    RESERVATION_EXPIRED,
    RequestRecord,
    RequestStatus,
    format_timestamp,
)
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_gpu_reservations import (
    BLOCK_TYPE,
    advance_to,
    buy_block,
    group_pool,
    reserved_only_pool,
    state_of,
)
from tests.integration.test_launch_into_reservations import ZONE, reserve, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)

FUTURE_TYPE = "m5.xlarge"


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def detail_types(cloud: Cloud, request_id: str) -> list[str]:
    return [e["detail-type"] for e in cloud.events() if e["detail"].get("requestId") == request_id]


def deadlines(cloud: Cloud, record: RequestRecord) -> list[tuple[str, str | None]]:
    """The request's deadline as its record shows it, then as each of its status events
    published since shows it (docs/contracts.md, Waiting for scheduled capacity: every record of the
    request carries it)."""
    shown = [
        (e["detail-type"], e["detail"]["waitForCapacityUntil"])
        for e in cloud.events()
        if e["detail"].get("requestId") == record.request_id
    ]
    return [("record", record.to_detail()["waitForCapacityUntil"]), *shown]


def test_a_request_waits_for_a_scheduled_block_and_launches_when_it_starts(cloud, subnets, image):
    # Given a NodeClass targeting a purchased block that starts later (an hour or more: the
    # request looks again 15 minutes on, and must find it still scheduled)
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    deadline = block["StartDate"] + timedelta(hours=2)
    # When a request willing to wait until 2 hours after the start arrives before it
    wait = launch_request(
        "r-wait", nodePool="general", count=2, waitForCapacityUntil=stamp(deadline)
    )
    assert cloud.send(wait) == []  # not a failure: the delivery succeeds, a copy is held
    # Then its record is Waiting (not final), naming the block, its state and start
    record = cloud.record("r-wait")
    assert record is not None and record.status is RequestStatus.WAITING, record
    assert not record.is_final and record.launched == 0
    assert record.wait_for_capacity_until == deadline
    [awaited] = record.waiting_for
    assert awaited.capacity_reservation_id == reservation_id
    assert awaited.state in ("payment-pending", "scheduled")
    assert awaited.capacity_reservation_type == "capacity-block"
    assert awaited.start_date == block["StartDate"]
    assert detail_types(cloud, "r-wait") == ["Launch Waiting"]
    assert cloud.managed_instances() == []
    # And its message is held in the launch queue (delayed), not handed back or dead-lettered
    assert cloud.queued() == 1
    assert cloud.deliver_queued() == []  # not visible before its delay
    # When the clock passes a held delay (15 minutes) before the start, it looks and waits again
    moto_capacity.advance_clock(901)
    assert cloud.deliver_queued() == ["r-wait"]
    again = cloud.record("r-wait")
    assert again is not None and again.status is RequestStatus.WAITING
    assert again.received_at == record.received_at  # the request's arrival, not the copy's
    assert cloud.queued() == 1
    assert detail_types(cloud, "r-wait") == []  # Launch Waiting is published once
    # When the block becomes active and the held copy comes back, the request is launched
    advance_to(block["StartDate"], 1)
    assert state_of(cloud, reservation_id)["State"] == "active"
    assert cloud.deliver_queued() == ["r-wait"]
    done = cloud.record("r-wait")
    assert done is not None and done.status is RequestStatus.FULFILLED, done.to_detail()
    assert done.waiting_for == []
    assert {i.capacity_reservation_id for i in done.instances} == {reservation_id}
    # Then each instance names its reservation's type and dates
    for instance in done.instances:
        assert instance.capacity_reservation_type == "capacity-block"
        assert instance.capacity_reservation_start_date == block["StartDate"]
        assert instance.capacity_reservation_end_date == block["EndDate"]
    fulfilled = [e for e in cloud.events() if e["detail"].get("requestId") == "r-wait"]
    assert [e["detail-type"] for e in fulfilled] == ["Launch Fulfilled"]
    assert fulfilled[0]["detail"]["instances"][0]["capacityReservationType"] == "capacity-block"
    assert cloud.queued() == 0
    # And the final record and its event still carry the deadline it was served under
    assert done.to_detail()["waitForCapacityUntil"] == format_timestamp(deadline)
    assert fulfilled[0]["detail"]["waitForCapacityUntil"] == format_timestamp(deadline)


def test_a_second_delivery_of_a_waiting_request_does_not_start_a_second_wait(cloud, subnets, image):
    block = buy_block(cloud)
    reserved_only_pool(cloud, subnets, image, block["CapacityReservationId"])
    wait = launch_request(
        "r-once", nodePool="general", waitForCapacityUntil=stamp(block["StartDate"] + timedelta(1))
    )
    assert cloud.send(wait) == []
    assert cloud.queued() == 1
    # When the requester sends the same request again while it waits
    assert cloud.send(wait) == []
    # Then that delivery is dropped: one held copy, the same Waiting record
    assert cloud.queued() == 1
    record = cloud.record("r-once")
    assert record is not None and record.status is RequestStatus.WAITING


def future_dated(cloud: Cloud, start: datetime) -> str:
    """8 x m5.xlarge (32 vCPUs, EC2's least for a future-dated request), committed 14 days."""
    created = cloud.ec2.create_capacity_reservation(
        InstanceType=FUTURE_TYPE,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=ZONE,
        InstanceCount=8,
        InstanceMatchCriteria="targeted",
        StartDate=start,
        CommitmentDuration=14 * 24 * 3600,
        DeliveryPreference="incremental",
    )
    return str(created["CapacityReservation"]["CapacityReservationId"])


def test_a_reservation_delayed_past_the_deadline_fails_the_request_with_a_clear_reason(
    cloud, subnets, image
):
    # Given a future-dated reservation starting in 6 days, and a request waiting a day past that
    start = CLOCK.now().replace(microsecond=0) + timedelta(days=6)
    reservation_id = future_dated(cloud, start)
    reserved_only_pool(cloud, subnets, image, reservation_id, types=(FUTURE_TYPE,))
    deadline = start + timedelta(days=1)
    wait = launch_request("r-late", nodePool="general", waitForCapacityUntil=stamp(deadline))
    cloud.send(wait)
    record = cloud.record("r-late")
    assert record is not None and record.status is RequestStatus.WAITING, record
    assert [r.state for r in record.waiting_for] == ["assessing"]
    assert detail_types(cloud, "r-late") == ["Launch Waiting"]
    # When EC2 delays the reservation past the request's deadline (the held copy looks at least
    # every 3 days here: every 15 minutes on AWS, always within the queue's 4-day retention)
    moto_capacity.set_reservation_state(reservation_id, "delayed")
    while CLOCK.now() < deadline - timedelta(days=3):
        moto_capacity.advance_clock(3 * 24 * 3600)
        assert cloud.deliver_queued() == ["r-late"]
        waiting = cloud.record("r-late")
        assert waiting is not None and waiting.status is RequestStatus.WAITING
    advance_to(deadline, 1)
    # Then the held copy's next look ends the request Failed, naming the reservation and state
    assert cloud.deliver_queued() == ["r-late"]
    failed = cloud.record("r-late")
    assert failed is not None and failed.status is RequestStatus.FAILED, failed
    [error] = failed.errors
    assert error.code == CAPACITY_NOT_ACTIVE_BY_DEADLINE
    assert reservation_id in error.message and "delayed" in error.message
    assert stamp(start)[:19] in error.message
    assert failed.launched == 0 and cloud.queued() == 0
    until = format_timestamp(deadline)
    assert deadlines(cloud, failed) == [("record", until), ("Launch Failed", until)]


def test_nothing_scheduled_before_the_deadline_means_no_wait(cloud, subnets, image):
    # Given a block that starts after the request's deadline, in a pool that allows on-demand
    block = buy_block(cloud)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={
            "capacityReservationTarget": {"capacityReservationId": block["CapacityReservationId"]}
        },
        types=(BLOCK_TYPE,),
    )
    too_soon = block["StartDate"] - timedelta(minutes=1)
    request = launch_request("r-now", nodePool="general", waitForCapacityUntil=stamp(too_soon))
    cloud.send(request)
    # Then it is served at once, as without the field: on-demand
    record = cloud.record("r-now")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert [i.capacity_type for i in record.instances] == ["on-demand"]
    assert record.instances[0].capacity_reservation_type is None
    assert cloud.queued() == 0
    # And its record carries the deadline it set, as every record of the request does
    until = format_timestamp(too_soon)
    assert deadlines(cloud, record) == [("record", until), ("Launch Fulfilled", until)]


@pytest.mark.parametrize(
    ("days", "rule"),
    [(15, "at most 14 days after the request is received"), (-1, "later than when")],
)
def test_a_deadline_breaking_the_arrival_rules_is_rejected(cloud, subnets, image, days, rule):
    setup_pool(cloud, subnets, image)
    deadline = CLOCK.now() + timedelta(days=days)
    cloud.send(launch_request("r-bad", nodePool="general", waitForCapacityUntil=stamp(deadline)))
    record = cloud.record("r-bad")
    assert record is not None and record.status is RequestStatus.REJECTED
    [error] = record.errors
    assert error.code == "InvalidWaitForCapacityUntil"
    assert error.message.startswith("waitForCapacityUntil: ") and rule in error.message
    until = format_timestamp(deadline)
    assert deadlines(cloud, record) == [("record", until), ("Launch Rejected", until)]


def test_selector_term_blocks_are_announced_activated_and_expired(cloud, subnets, image):
    # Given a NodeClass selecting reservations by tag, and a tagged block not started yet
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    cloud.ec2.create_tags(Resources=[reservation_id], Tags=[{"Key": "team", "Value": "ml"}])
    reserved_only_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    # When the sync sees it scheduled, then active
    assert sync().events == []
    advance_to(block["StartDate"], 1)
    # Then its start is announced as Activated, as for a targeted block
    activated = [e for e in sync().events if e.detail_type == RESERVATION_ACTIVATED]
    assert [e.detail["capacityReservationId"] for e in activated] == [reservation_id]
    # And a request through the selector lands in it
    cloud.send(launch_request("r-term", nodePool="general", count=1))
    record = cloud.record("r-term")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.instances[0].capacity_reservation_id == reservation_id
    assert record.instances[0].capacity_reservation_type == "capacity-block"
    # When it ends (and leaves the selection: a term reaches only live reservations)
    advance_to(block["EndDate"], 1)
    ended = sync()
    # Then its end is announced once, and its snapshot forgotten at the next sync
    assert RESERVATION_EXPIRED in [e.detail_type for e in ended.events]
    again = sync()
    assert again.events == [] and reservation_id in again.forgotten


def test_a_wait_that_cannot_be_held_is_handed_back_and_held_by_the_next_delivery(
    cloud, subnets, image
):
    block = buy_block(cloud)
    reserved_only_pool(cloud, subnets, image, block["CapacityReservationId"])
    wait = launch_request(
        "r-held", nodePool="general", waitForCapacityUntil=stamp(block["StartDate"] + timedelta(1))
    )
    # When SQS refuses the held copy (past botocore's retries)
    moto_capacity.inject_fault("sqs:SendMessage", "InternalError")
    failed = cloud.send(wait)
    # Then the delivery is handed back (a failure), nothing is recorded, and no claim is left
    assert len(failed) == 1
    assert cloud.record("r-held") is None and cloud.queued() == 0
    # And the next delivery, once SQS answers again, holds it
    moto_capacity.inject_fault("sqs:SendMessage", "InternalError", times=0)
    assert cloud.send(wait) == []
    record = cloud.record("r-held")
    assert record is not None and record.status is RequestStatus.WAITING
    assert cloud.queued() == 1


def test_a_gang_waits_when_active_reservations_cannot_hold_its_min_count(cloud, subnets, image):
    # Given an active reservation with 1 slot and a scheduled block of 2, both selected by tag
    team = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    active = reserve(
        cloud, 1, itype=BLOCK_TYPE, InstanceMatchCriteria="targeted", TagSpecifications=team
    )
    block = buy_block(cloud)
    cloud.ec2.create_tags(
        Resources=[block["CapacityReservationId"]], Tags=[{"Key": "team", "Value": "ml"}]
    )
    reserved_only_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    until = stamp(block["StartDate"] + timedelta(hours=1))
    # When a gang of 2 that may wait arrives: the 1 active slot cannot hold it, so it waits
    cloud.send(launch_request("r-gang", nodePool="general", count=2, minCount=2,
                              waitForCapacityUntil=until))  # fmt: skip
    gang = cloud.record("r-gang")
    assert gang is not None and gang.status is RequestStatus.WAITING, gang
    assert [r.capacity_reservation_id for r in gang.waiting_for] == [block["CapacityReservationId"]]
    # And a single instance that may wait is served at once by the active slot
    cloud.send(launch_request("r-one", nodePool="general", waitForCapacityUntil=until))
    one = cloud.record("r-one")
    assert one is not None and one.status is RequestStatus.FULFILLED, one
    assert [i.capacity_reservation_id for i in one.instances] == [active]


def wait_for_a_block(cloud: Cloud, subnets, image, request_id: str) -> tuple[str, datetime]:
    """A request Waiting for a purchased block; its deadline an hour after the block starts."""
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    deadline = block["StartDate"] + timedelta(hours=1)
    cloud.send(launch_request(request_id, nodePool="general", waitForCapacityUntil=stamp(deadline)))
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.WAITING, record
    assert detail_types(cloud, request_id) == ["Launch Waiting"]
    return reservation_id, deadline


def test_a_wait_whose_held_copy_is_lost_is_ended_by_the_sync_after_the_margin(
    cloud, subnets, image
):
    # Given a Waiting request whose held copy is lost (the launch queue purged)
    reservation_id, deadline = wait_for_a_block(cloud, subnets, image, "r-lost")
    cloud.sqs.purge_queue(QueueUrl=cloud.names.launch_queue_url)
    assert cloud.queued() == 0
    # When the deadline passes, but not yet by the margin a live held copy has to come back in
    advance_to(deadline, BACKSTOP_MARGIN_SECONDS - 60)
    assert sync().ended_waits == []
    waiting = cloud.record("r-lost")
    assert waiting is not None and waiting.status is RequestStatus.WAITING
    # When the clock passes the deadline by more than the margin
    advance_to(deadline, BACKSTOP_MARGIN_SECONDS + 60)
    # Then the sync ends it Failed, as the held copy would have at the deadline
    assert sync().ended_waits == ["r-lost"]
    failed = cloud.record("r-lost")
    assert failed is not None and failed.status is RequestStatus.FAILED, failed
    [error] = failed.errors
    assert error.code == CAPACITY_NOT_ACTIVE_BY_DEADLINE
    assert error.message.startswith(f"waitForCapacityUntil: {stamp(deadline)[:19]}")
    assert reservation_id in error.message and "held message was lost" in error.message
    assert failed.launched == 0 and failed.waiting_for == []
    # And its event is published once (later syncs read no such wait again); both carry its
    # deadline
    until = format_timestamp(deadline)
    assert deadlines(cloud, failed) == [("record", until), ("Launch Failed", until)]
    assert sync().ended_waits == []
    assert detail_types(cloud, "r-lost") == []
    assert cloud.managed_instances() == []


def test_a_held_copy_that_comes_back_after_the_sync_ended_its_wait_is_dropped(
    cloud, subnets, image
):
    # Given a Waiting request whose held copy is late (still queued past deadline + margin)
    _, deadline = wait_for_a_block(cloud, subnets, image, "r-late-copy")
    advance_to(deadline, BACKSTOP_MARGIN_SECONDS + 60)
    # When the sync ends the wait first, then the held copy arrives
    assert sync().ended_waits == ["r-late-copy"]
    assert cloud.deliver_queued() == ["r-late-copy"]
    # Then the copy launches nothing and publishes nothing: one outcome, the sync's
    record = cloud.record("r-late-copy")
    assert record is not None and record.status is RequestStatus.FAILED
    assert detail_types(cloud, "r-late-copy") == ["Launch Failed"]
    assert cloud.managed_instances() == [] and cloud.queued() == 0


def test_a_held_copy_arriving_while_the_sync_ends_its_wait_wins(
    cloud, subnets, image, monkeypatch: pytest.MonkeyPatch
):
    # Given a Waiting request whose held copy is late, and a sync that reads the overdue wait
    _, deadline = wait_for_a_block(cloud, subnets, image, "r-race")
    advance_to(deadline, BACKSTOP_MARGIN_SECONDS + 60)
    delivered: list[str] = []
    read = LaunchRecords.overdue_waits

    def copy_arrives_meanwhile(self: LaunchRecords, before: datetime) -> list[HeldWait]:
        waits = read(self, before)
        delivered.extend(cloud.deliver_queued())  # after the sync's read, before its write
        return waits

    monkeypatch.setattr(LaunchRecords, "overdue_waits", copy_arrives_meanwhile)
    # When the held copy is served between the sync's read and its write
    report = sync()
    # Then the copy's outcome stands (the block is active: launched), and the sync ends nothing
    assert delivered == ["r-race"] and report.ended_waits == []
    record = cloud.record("r-race")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert detail_types(cloud, "r-race") == ["Launch Fulfilled"]


def test_a_request_that_excludes_reserved_capacity_may_wait_and_is_served_at_once(
    cloud, subnets, image
):
    # Given a pool of reserved and on-demand capacity (issue 37 lifted the reserved-only rule:
    # any request may wait, for room as for scheduled capacity)
    setup_pool(cloud, subnets, image)
    # When a request that allows only on-demand sets a deadline and there is room now
    on_demand = [capacity_type("on-demand")]
    until = stamp(CLOCK.now() + timedelta(days=1))
    cloud.send(launch_request("r-od-wait", nodePool="general", count=2, requirements=on_demand,
                              waitForCapacityUntil=until))  # fmt: skip
    # Then it is served at once, as without the field, its deadline on its record
    record = cloud.record("r-od-wait")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.to_detail()["waitForCapacityUntil"] == format_timestamp(
        datetime.fromisoformat(until)
    )
    assert cloud.queued() == 0


def test_a_wait_in_an_on_demand_pool_is_served_not_rejected(cloud, subnets, image):
    # Given a pool of on-demand capacity only
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    until = stamp(CLOCK.now() + timedelta(days=1))
    # When a request names it, or names no pool, with a deadline
    cloud.send(launch_request("r-pool-od", nodePool="general", waitForCapacityUntil=until))
    cloud.send(launch_request("r-any-od", waitForCapacityUntil=until))
    # Then both are served on-demand (no rule refuses their deadline any more)
    for request_id in ("r-pool-od", "r-any-od"):
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED, record
        assert [i.capacity_type for i in record.instances] == ["on-demand"]


def test_a_wait_naming_no_pool_goes_to_a_pool_that_allows_reserved_capacity(cloud, subnets, image):
    # Given a heavier on-demand-only pool and a lighter one that allows reserved capacity
    sg = cloud.ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
    types, on_demand = instance_type("m5.large"), capacity_type("on-demand")
    cloud.apply(
        node_class("standard", [subnets[ZONE]], image, securityGroupIds=[sg]),
        node_pool("odonly", "standard", weight=50, requirements=[on_demand, types]),
        node_pool("general", "standard", requirements=[types]),
    )
    until = stamp(CLOCK.now() + timedelta(days=1))
    # When a request naming no pool may wait (nothing is scheduled: it is served at once)
    cloud.send(launch_request("r-any", waitForCapacityUntil=until))
    # Then it is served by the pool it could have waited in, not the heavier on-demand one
    record = cloud.record("r-any")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "general"


def test_a_block_bought_after_the_last_sync_beside_a_full_one_is_waited_for(cloud, subnets, image):
    # Given a reserved-only pool selecting blocks by tag, whose first block is active and full as
    # the last sync saw it (red team 2, 2026-11-23)
    tagged = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]

    def buy_tagged() -> dict:
        offerings = cloud.ec2.describe_capacity_block_offerings(
            InstanceType=BLOCK_TYPE, InstanceCount=1, CapacityDurationHours=24
        )["CapacityBlockOfferings"]
        offering = next(o for o in offerings if o["AvailabilityZone"] == ZONE)
        return cloud.ec2.purchase_capacity_block(  # type: ignore[no-any-return]
            CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
            InstancePlatform="Linux/UNIX",
            TagSpecifications=tagged,
        )["CapacityReservation"]

    first = buy_tagged()
    reserved_only_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    advance_to(first["StartDate"], 1)
    sync()
    cloud.send(launch_request("r-fill", nodePool="general", count=1))
    filled = cloud.record("r-fill")
    assert filled is not None and filled.status is RequestStatus.FULFILLED, filled.to_detail()
    # When the team buys the next block, and a request willing to wait for it follows at once
    second = buy_tagged()
    deadline = second["StartDate"] + timedelta(hours=1)
    wait = launch_request("r-next", nodePool="general", waitForCapacityUntil=stamp(deadline))
    assert cloud.send(wait) == []
    # Then it waits for the new block instead of failing: the launcher looked at EC2 itself
    record = cloud.record("r-next")
    assert record is not None and record.status is RequestStatus.WAITING, record.to_detail()
    assert [w.capacity_reservation_id for w in record.waiting_for] == [
        second["CapacityReservationId"]
    ]


def test_a_request_that_may_wait_is_not_served_by_a_dying_block(cloud, subnets, image):
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks.html: EC2 begins
    terminating a block's instances 30 minutes before its end. A request willing to wait is not
    launched into a block within that window (plus the boot margin): it waits for the next block,
    which starts as the first ends."""
    first = buy_block(cloud)
    later = cloud.ec2.describe_capacity_block_offerings(
        InstanceType=BLOCK_TYPE,
        InstanceCount=2,
        CapacityDurationHours=24,
        StartDateRange=first["EndDate"],
    )["CapacityBlockOfferings"]
    second = cloud.ec2.purchase_capacity_block(
        CapacityBlockOfferingId=next(
            o["CapacityBlockOfferingId"] for o in later if o["AvailabilityZone"] == ZONE
        ),
        InstancePlatform="Linux/UNIX",
    )["CapacityReservation"]
    group_pool(cloud, subnets, image, first, second)
    advance_to(first["EndDate"], -40 * 60)
    deadline = second["StartDate"] + timedelta(hours=2)

    cloud.send(
        launch_request("r-next", nodePool="general", count=2, waitForCapacityUntil=stamp(deadline))
    )

    record = cloud.record("r-next")
    assert record is not None and record.status is RequestStatus.WAITING, record.to_detail()
    assert [w.capacity_reservation_id for w in record.waiting_for] == [
        second["CapacityReservationId"]
    ]
    assert state_of(cloud, first["CapacityReservationId"])["AvailableInstanceCount"] == 2


def test_a_wait_passed_over_by_a_heavier_pool_still_ends_at_its_deadline(cloud, subnets, image):
    # Given a heavier pool whose NodeClass AWS refuses (it passes every request naming no pool
    # on), and a lighter pool of reserved and on-demand capacity targeting a future-dated
    # reservation that starts in 6 days
    start = CLOCK.now().replace(microsecond=0) + timedelta(days=6)
    reservation_id = future_dated(cloud, start)
    target = {"capacityReservationTarget": {"capacityReservationId": reservation_id}}
    setup_pool(cloud, subnets, image, reservation_spec=target, types=(FUTURE_TYPE,))
    missing = "arn:aws:resource-groups:us-east-1:123456789012:group/missing"
    broken = node_class(
        "broken",
        [subnets[ZONE]],
        image,
        securityGroupIds=[default_security_group(cloud.ec2)],
        capacityReservationSpec={
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": missing}
        },
    )
    heavy = [capacity_type("reserved", "on-demand"), instance_type(FUTURE_TYPE)]
    cloud.apply(broken, node_pool("heavy", "broken", weight=10, requirements=heavy))
    # And a request naming no pool that waits, in the lighter pool, until a day after the start
    deadline = start + timedelta(days=1)
    cloud.send(launch_request("r-passed", waitForCapacityUntil=stamp(deadline)))
    record = cloud.record("r-passed")
    assert record is not None and record.status is RequestStatus.WAITING, record
    assert record.node_pool == "general"
    # When EC2 delays the reservation past the deadline, and the held copy looks at the deadline
    moto_capacity.set_reservation_state(reservation_id, "delayed")
    while CLOCK.now() < deadline - timedelta(days=3):
        moto_capacity.advance_clock(3 * 24 * 3600)
        assert cloud.deliver_queued() == ["r-passed"]
    advance_to(deadline, 1)
    assert cloud.deliver_queued() == ["r-passed"]
    # Then it ends Failed as any wait does (the heavier pool passing it over again changes
    # nothing): no on-demand instance launched after the deadline in place of the reservation
    failed = cloud.record("r-passed")
    assert failed is not None and failed.status is RequestStatus.FAILED, failed.to_detail()
    assert [e.code for e in failed.errors][-1] == CAPACITY_NOT_ACTIVE_BY_DEADLINE, failed.errors
    assert reservation_id in failed.errors[-1].message
    assert failed.launched == 0 and cloud.managed_instances() == []
    assert detail_types(cloud, "r-passed") == ["Launch Failed"]
    assert cloud.queued() == 0


def test_the_backstop_and_the_gauges_share_one_read_of_the_waits_index(cloud, subnets, image):
    # Given a Waiting request whose held copy is lost, its deadline passed by the margin
    wait_for_a_block(cloud, subnets, image, "r-lost-once")
    cloud.sqs.purge_queue(QueueUrl=cloud.names.launch_queue_url)
    record = cloud.record("r-lost-once")
    assert record is not None and record.wait_for_capacity_until is not None
    advance_to(record.wait_for_capacity_until, BACKSTOP_MARGIN_SECONDS + 60)
    read: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        if params.get("IndexName") == "WaitingRequests":
            read.append(params["ExpressionAttributeValues"][":waiting"]["S"])

    aws.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **kw: note(params)
    )
    # When the sync runs
    report = sync()
    # Then the backstop ends it and the gauges count nothing waiting (issue 38: the minute's
    # waits are read once, each shard of the index one Query, for both parts)
    assert report.ended_waits == ["r-lost-once"]
    assert report.waiting == []
    assert sorted(read) == sorted(read_values(WAITING))
