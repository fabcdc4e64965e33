"""Issue 16: Capacity Blocks and interruptible reservations, launched into on the local cloud."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import moto_capacity
from capacity_launcher.domain.records.status import (
    BLOCK_EXPIRING,
    RESERVATION_ACTIVATED,
    RESERVATION_EXPIRED,
    RequestStatus,
)
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_reservations import ZONE, group_of, reserve, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request

BLOCK_TYPE = "p4d.24xlarge"


def buy_block(
    cloud: Cloud, count: int = 2, starting_after: timedelta = timedelta(hours=1)
) -> dict[str, Any]:
    """A 1-day block in ZONE, the first one sold that starts at least `starting_after` from now:
    blocks start at 11:30 UTC, and a test run just before it must not find its block starting
    within the minutes the test moves the clock by (or its deadlines already past)."""
    offering = cloud.ec2.describe_capacity_block_offerings(
        InstanceType=BLOCK_TYPE,
        InstanceCount=count,
        CapacityDurationHours=24,
        StartDateRange=CLOCK.now() + starting_after,
    )["CapacityBlockOfferings"]
    in_zone = next(o for o in offering if o["AvailabilityZone"] == ZONE)
    bought = cloud.ec2.purchase_capacity_block(
        CapacityBlockOfferingId=in_zone["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )
    return bought["CapacityReservation"]  # type: ignore[no-any-return]


def reserved_only_pool(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    reservation_id: str | None = None,
    *,
    selector_terms: list[dict[str, Any]] | None = None,
    types: tuple[str, ...] = (BLOCK_TYPE,),
) -> None:
    """A pool of reserved capacity only, whose NodeClass targets one reservation or selects by
    terms."""
    target = {"capacityReservationTarget": {"capacityReservationId": reservation_id}}
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec=target if reservation_id else None,
        selector_terms=selector_terms,
        capacity_types=("reserved",),
        types=types,
    )


def group_pool(cloud: Cloud, subnets: dict[str, str], image: str, *blocks: dict[str, Any]) -> None:
    """A pool of reserved capacity only, whose NodeClass targets a group holding `blocks`."""
    group = group_of(cloud, *(b["CapacityReservationId"] for b in blocks))
    target = {"capacityReservationTarget": {"capacityReservationResourceGroupArn": group}}
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec=target,
        capacity_types=("reserved",),
        types=(BLOCK_TYPE,),
    )


def advance_to(moment: datetime, plus_seconds: float = 0.0) -> None:
    seconds = (moment - CLOCK.now()).total_seconds() + plus_seconds
    if seconds > 0:
        moto_capacity.advance_clock(seconds)


def state_of(cloud: Cloud, reservation_id: str) -> dict[str, Any]:
    found = cloud.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return found["CapacityReservations"][0]  # type: ignore[no-any-return]


def test_a_purchased_block_is_launched_into_once_active_and_not_before(cloud, subnets, image):
    # Given a NodeClass targeting a purchased Capacity Block, reserved capacity only
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    # When a request arrives before the block starts, nothing is launched into it
    cloud.send(launch_request("r-early", nodePool="general", count=1))
    early = cloud.record("r-early")
    assert early is not None and early.launched == 0, early
    assert state_of(cloud, reservation_id)["State"] != "active"
    # When the clock passes the block's start, a request lands in it in the capacity-block market
    advance_to(block["StartDate"], 1)
    cloud.send(launch_request("r-block", nodePool="general", count=2))
    record = cloud.record("r-block")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert {i.capacity_reservation_id for i in record.instances} == {reservation_id}
    cloud.wait_out_consistency()  # located by CreateFleet's answer: EC2 lists them once consistent
    described = cloud.ec2.describe_instances(InstanceIds=[i.instance_id for i in record.instances])
    lifecycles = {
        i.get("InstanceLifecycle") for r in described["Reservations"] for i in r["Instances"]
    }
    assert lifecycles == {"capacity-block"}
    assert state_of(cloud, reservation_id)["AvailableInstanceCount"] == 0


def test_blocks_reached_through_a_group_are_launched_into_one_fleet_per_block(
    cloud, subnets, image
):
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html: a block
    is launched into by its own reservation id (EC2 refuses the capacity-block market through a
    group); an EC2 Fleet takes one block. A NodeClass whose target is a group of two blocks is
    served by one CreateFleet per block, each naming its block."""
    first, second = buy_block(cloud, count=1), buy_block(cloud, count=1)
    group_pool(cloud, subnets, image, first, second)
    advance_to(max(first["StartDate"], second["StartDate"]), 1)

    cloud.send(launch_request("r-blocks", nodePool="general", count=2))

    record = cloud.record("r-blocks")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert sorted(i.capacity_reservation_id or "" for i in record.instances) == sorted(
        [first["CapacityReservationId"], second["CapacityReservationId"]]
    )


def test_a_block_in_its_last_45_minutes_is_not_launched_into(cloud, subnets, image, monkeypatch):
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks.html: EC2 begins
    terminating a block's instances 30 minutes before its end time. A launch there (or in the
    boot margin before it) would report Fulfilled for instances EC2 is about to terminate; the
    request is not served from the block, and the record says why (BlockEnding)."""
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    advance_to(block["EndDate"], -40 * 60)

    cloud.send(launch_request("r-late", nodePool="general", count=1))

    record = cloud.record("r-late")
    assert record is not None and record.launched == 0, record.to_detail()
    assert record.status is not RequestStatus.FULFILLED
    assert [u.reason for u in record.unavailable_offerings] == ["BlockEnding"]
    assert state_of(cloud, reservation_id)["AvailableInstanceCount"] == 2


def lend(cloud: Cloud, count: int) -> str:
    source = reserve(cloud, count + 1, InstanceMatchCriteria="targeted")
    cloud.ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, InstanceCount=count
    )
    found = cloud.ec2.describe_capacity_reservations()["CapacityReservations"]
    return next(r["CapacityReservationId"] for r in found if r.get("Interruptible"))


def test_an_interruptible_reservation_is_launched_into_only_when_the_pool_accepts_it(
    cloud, subnets, image
):
    lent = lend(cloud, 2)
    target = {"capacityReservationTarget": {"capacityReservationId": lent}}
    # Given a pool that does not say it accepts interruptible capacity: on-demand, not the loan
    setup_pool(cloud, subnets, image, reservation_spec=target)
    cloud.send(launch_request("r-plain", nodePool="general", count=1))
    plain = cloud.record("r-plain")
    assert plain is not None and plain.launched == 1, plain
    assert [i.capacity_reservation_id for i in plain.instances] == [None]
    assert state_of(cloud, lent)["AvailableInstanceCount"] == 2
    # Given a request that accepts it: it lands in the loan, in the interruptible market
    accepting = {
        "key": "karpenter.k8s.aws/capacity-reservation-interruptible",
        "operator": "In",
        "values": ["true"],
    }
    cloud.send(launch_request("r-lent", nodePool="general", count=2, requirements=[accepting]))
    record = cloud.record("r-lent")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert {i.capacity_reservation_id for i in record.instances} == {lent}
    cloud.wait_out_consistency()  # located by CreateFleet's answer: EC2 lists them once consistent
    described = cloud.ec2.describe_instances(InstanceIds=[i.instance_id for i in record.instances])
    lifecycles = {
        i.get("InstanceLifecycle") for r in described["Reservations"] for i in r["Instances"]
    }
    assert lifecycles == {"interruptible-capacity-reservation"}


def test_the_sync_announces_a_block_activated_expiring_with_its_instances_then_expired(
    cloud, subnets, image, monkeypatch
):
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    sync()
    advance_to(block["StartDate"], 1)
    assert [e.detail_type for e in sync().events] == [RESERVATION_ACTIVATED]
    cloud.send(launch_request("r-train", nodePool="general", count=2))
    record = cloud.record("r-train")
    assert record is not None and record.launched == 2, record
    cloud.wait_out_consistency()
    # 50 minutes before the end: past the 60-minute horizon, before EC2's 30-minute termination
    advance_to(block["EndDate"], -50 * 60)
    expiring = [e for e in sync().events if e.detail_type == BLOCK_EXPIRING]
    assert len(expiring) == 1
    assert sorted(i["instanceId"] for i in expiring[0].detail["instances"]) == sorted(
        i.instance_id for i in record.instances
    )
    assert expiring[0].detail["requestIds"] == ["r-train"]
    assert [e.detail_type for e in sync().events] == []
    advance_to(block["EndDate"], 1)
    assert RESERVATION_EXPIRED in [e.detail_type for e in sync().events]
    published = {e["detail-type"] for e in cloud.events()}
    assert {RESERVATION_ACTIVATED, BLOCK_EXPIRING, RESERVATION_EXPIRED} <= published
