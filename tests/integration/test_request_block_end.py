"""Issue 39: launch requests that opt in (`capacityBlockEnd`) before a Capacity Block holding
their instances ends (EC2 terminates them 30 minutes before the end,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html), on the local
cloud, its clock advanced. Evacuate: a replacement launch through the normal launch path (its
own id, record and events, linked to the original), never into the ending block, and the
block's instances let go only once it runs. Extend: one extension bought within the pool's
price (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html). A
request that did not opt in gets the event only; one asking more than its pool allows is
Rejected naming the field."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.records.status import (
    BLOCK_EVACUATING,
    BLOCK_EXTENSION_PURCHASED,
    RequestStatus,
)
from capacity_launcher.domain.records.tags import NODE_POOL
from moto_capacity.core.clock import CLOCK
from tests.integration.test_block_end import LEAD, extensions, published
from tests.integration.test_launch_into_gpu_reservations import advance_to, buy_block
from tests.integration.test_static_pools import static_sync  # noqa: F401
from tests.integration.test_static_pools_reserved import pool_on_block
from tests.support.cloud import Cloud, launch_request

POOL = "train"


def train_pool(
    cloud: Cloud, subnets: dict[str, str], image: str, block_id: str, **spec: Any
) -> None:
    """A dynamic pool of the block's type, reserved first (its NodeClass selects the block),
    on-demand allowed: where an evacuation may go."""
    pool_on_block(cloud, subnets, image, block_id, POOL, **spec)


def running(cloud: Cloud) -> dict[str, str | None]:
    """The pool's running instances and the block each is in."""
    return {
        i["InstanceId"]: i.get("CapacityReservationId")
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": NODE_POOL, "Value": POOL} in i.get("Tags", [])
    }


def launched_in_block(
    cloud: Cloud, subnets: dict[str, str], image: str, request: dict[str, Any], **spec: Any
) -> tuple[str, dict[str, Any]]:
    """A block of 2 bought, the pool applied (`spec`), the block active and `request` (2
    instances) launched into it: the block's id and the block."""
    block = buy_block(cloud, count=2)
    block_id = block["CapacityReservationId"]
    train_pool(cloud, subnets, image, block_id, **spec)
    advance_to(block["StartDate"], 60)
    cloud.send(request)
    record = cloud.record(request["requestId"])
    assert record is not None and record.launched == 2, record
    assert {i.capacity_reservation_id for i in record.instances} == {block_id}
    return block_id, block


def test_an_opted_in_request_is_replaced_off_the_block_before_it_ends(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a request of 2 in a block, opted in to Evacuate 2 hours before the end
    request = launch_request(
        "job-1", nodePool=POOL, count=2, capacityBlockEnd={"action": "Evacuate"}
    )
    block_id, block = launched_in_block(cloud, subnets, image, request)
    original = sorted(running(cloud))
    # Before the lead nothing happens
    advance_to(block["EndDate"] - LEAD, -600)
    static_sync()
    assert sorted(running(cloud)) == original
    # Within the lead the sync sends one replacement, with its own id and record, not into the
    # block; the block's instances are let go once it runs: the count never drops
    advance_to(block["EndDate"] - LEAD, 60)
    static_sync()
    (event,) = published(cloud, BLOCK_EVACUATING)
    assert (event["requestId"], event["action"], event["reason"]) == (
        "job-1",
        "Evacuate",
        "PolicyEvacuate",
    )
    assert event["instances"] == original and event["nodePool"] == POOL
    replacement = event["replacementRequestId"]
    assert replacement.startswith("job-1.evac-")
    record = cloud.record(replacement)
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.launched == 2 and record.node_pool == POOL
    assert {i.capacity_reservation_id for i in record.instances} == {None}
    CLOCK.advance(60)
    static_sync()
    now = running(cloud)
    assert sorted(now) == sorted(i.instance_id for i in record.instances)
    assert block_id not in now.values()
    # And the minutes after send nothing again (the replacement is served once) and say nothing
    for _ in range(2):
        CLOCK.advance(60)
        static_sync()
    assert sorted(running(cloud)) == sorted(now)
    assert published(cloud, BLOCK_EVACUATING) == []


def test_a_request_that_did_not_opt_in_keeps_its_instances_in_the_block(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a request of 2 in a block that did not opt in, its pool's policy Evacuate
    request = launch_request("job-2", nodePool=POOL, count=2)
    block_id, block = launched_in_block(
        cloud, subnets, image, request, capacityBlockEnd={"action": "Evacuate"}
    )
    # Within the lead nothing is launched or terminated, and nothing is evacuated
    advance_to(block["EndDate"] - LEAD, 60)
    static_sync()
    assert set(running(cloud).values()) == {block_id} and len(running(cloud)) == 2
    assert published(cloud, BLOCK_EVACUATING) == []


def test_extend_buys_one_extension_within_the_pools_price(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a pool whose policy allows extensions up to 1,000,000 USD, and a request that asks
    pool_policy = {"action": "Extend", "maxExtensionPrice": "1000000"}
    request = launch_request("job-3", nodePool=POOL, count=2, capacityBlockEnd={"action": "Extend"})
    block_id, block = launched_in_block(
        cloud, subnets, image, request, capacityBlockEnd=pool_policy
    )
    # Within the lead the sync buys one extension; nothing is launched
    advance_to(block["EndDate"] - LEAD, 60)
    static_sync()
    (bought,) = extensions(cloud, block_id)
    (event,) = published(cloud, BLOCK_EXTENSION_PURCHASED)
    assert (event["action"], event["reason"], event["requestIds"]) == (
        "Extend",
        "OfferingWithinPrice",
        ["job-3"],
    )
    assert event["offeringId"] == bought["CapacityBlockExtensionOfferingId"]
    # The next minute (payment pending) buys nothing more and launches nothing
    CLOCK.advance(60)
    static_sync()
    assert len(extensions(cloud, block_id)) == 1
    assert set(running(cloud).values()) == {block_id} and len(running(cloud)) == 2
    assert published(cloud, BLOCK_EVACUATING) == []


def test_a_request_asking_more_than_its_pool_allows_is_rejected_naming_the_field(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool that allows evacuation only
    block = buy_block(cloud, count=1)
    train_pool(
        cloud, subnets, image, block["CapacityReservationId"], capacityBlockEnd={"leadMinutes": 90}
    )
    # A request asking for an extension is Rejected naming the field and the pool's rule
    cloud.send(
        launch_request("job-4", nodePool=POOL, count=1, capacityBlockEnd={"action": "Extend"})
    )
    record = cloud.record("job-4")
    assert record is not None and record.status is RequestStatus.REJECTED
    (error,) = record.errors
    assert error.code == "CapacityBlockEndNotAllowed"
    assert error.message.startswith("capacityBlockEnd.action: Extend needs the NodePool's")
