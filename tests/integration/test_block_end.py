"""Issue 39: a static pool before a Capacity Block holding its instances ends (EC2 terminates them
30 minutes before the end, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html),
on the local cloud, its clock advanced: `capacityBlockEnd` Evacuate launches replacements
elsewhere the pool allows and lets the block's instances go only once they run; Extend buys one
extension within the price (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html),
waits on its payment, and falls back to evacuating when no offering fits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from capacity_launcher.domain.records.status import BLOCK_EVACUATING, BLOCK_EXTENSION_PURCHASED
from moto_capacity.core.clock import CLOCK
from moto_capacity.ec2.models.capacity_blocks import BLOCK_SETTINGS
from tests.integration.test_launch_into_gpu_reservations import advance_to, buy_block
from tests.integration.test_static_pools import POOL, running, static_sync  # noqa: F401
from tests.integration.test_static_pools_reserved import pool_on_block
from tests.support.cloud import Cloud

ZONE = "us-east-1a"
LEAD = timedelta(hours=2)


def block_pool(
    cloud: Cloud, subnets: dict[str, str], image: str, block_id: str | list[str], **policy: Any
) -> None:
    """A static pool of 2 on the block (reserved first), on-demand allowed: where an evacuation
    may go; its capacityBlockEnd acting 2 hours before the end."""
    capacity_block_end = {"leadMinutes": 120, **policy}
    pool_on_block(cloud, subnets, image, block_id, replicas=2, capacityBlockEnd=capacity_block_end)


def in_block(cloud: Cloud, block_id: str) -> list[str]:
    return sorted(
        i["InstanceId"] for i in running(cloud) if i.get("CapacityReservationId") == block_id
    )


def filled(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
    **policy: Any,
) -> tuple[dict[str, Any], list[str]]:
    """A block of 2 bought, the pool applied with `policy`, the block active and the pool's 2
    instances in it: the block and those instances."""
    block = buy_block(cloud, count=2)
    block_pool(cloud, subnets, image, block["CapacityReservationId"], **policy)
    advance_to(block["StartDate"], 60)
    static_sync()
    inside = in_block(cloud, block["CapacityReservationId"])
    assert len(inside) == 2
    return block, inside


def published(cloud: Cloud, detail_type: str) -> list[dict[str, Any]]:
    """The events of that type published since the last look (the capture queue is drained)."""
    return [e["detail"] for e in cloud.events() if e["detail-type"] == detail_type]


def extensions(cloud: Cloud, block_id: str) -> list[dict[str, Any]]:
    history = cloud.ec2.describe_capacity_block_extension_history(CapacityReservationIds=[block_id])
    return history["CapacityBlockExtensions"]  # type: ignore[no-any-return]


def test_evacuate_replaces_the_blocks_instances_before_it_ends_never_dropping_the_count(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a pool of 2 running in a block, its policy Evacuate 2 hours before the end
    block, leaving = filled(cloud, subnets, image, static_sync, action="Evacuate")
    block_id = block["CapacityReservationId"]
    # Before the lead nothing happens
    advance_to(block["EndDate"] - LEAD, -600)
    assert static_sync().launched == {}
    # Within the lead the sync launches 2 replacements, not into the block, and keeps the
    # block's instances until they run
    advance_to(block["EndDate"] - LEAD, 60)
    report = static_sync()
    assert len(report.launched[POOL]) == 2
    assert report.terminated == {}
    assert len(running(cloud)) == 4
    assert in_block(cloud, block_id) == leaving
    (event,) = published(cloud, BLOCK_EVACUATING)
    assert event["capacityReservationId"] == block_id
    assert (event["action"], event["reason"]) == ("Evacuate", "PolicyEvacuate")
    assert event["instances"] == leaving
    # The next minute, the replacements running, the block's instances go; the pool holds 2
    CLOCK.advance(60)
    report = static_sync()
    assert sorted(report.terminated[POOL]) == leaving
    assert report.launched == {}
    assert len(running(cloud)) == 2 and in_block(cloud, block_id) == []
    # And it stays so, announced once (nothing published since)
    CLOCK.advance(60)
    report = static_sync()
    assert (report.launched, report.terminated) == ({}, {})
    assert published(cloud, BLOCK_EVACUATING) == []


def test_an_evacuation_avoids_a_twin_block_due_too_and_the_pool_settles(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a pool of 2 running in a block, and a twin block bought with it (the same end) that
    # its NodeClass selects too and that holds nothing of the pool (block-end seed 2 at 40 steps)
    block, twin = buy_block(cloud, count=2), buy_block(cloud, count=2)
    block_id, twin_id = block["CapacityReservationId"], twin["CapacityReservationId"]
    assert twin["EndDate"] == block["EndDate"]
    block_pool(cloud, subnets, image, block_id, action="Evacuate")
    advance_to(block["StartDate"], 60)
    static_sync()
    leaving = in_block(cloud, block_id)
    assert len(leaving) == 2
    block_pool(cloud, subnets, image, [block_id, twin_id], action="Evacuate")
    # Within the lead the replacements go into neither block (the twin is due too: one landed
    # there would be evacuated in its turn, a launch and a termination each minute)
    advance_to(block["EndDate"] - LEAD, 60)
    assert len(static_sync().launched[POOL]) == 2
    assert in_block(cloud, twin_id) == []
    # The next minute the block's instances go, and then the pool holds 2 and stays so
    CLOCK.advance(60)
    assert sorted(static_sync().terminated[POOL]) == leaving
    for _ in range(2):
        CLOCK.advance(60)
        report = static_sync()
        assert (report.launched, report.terminated) == ({}, {})
    assert len(running(cloud)) == 2 and in_block(cloud, twin_id) == in_block(cloud, block_id) == []


def test_extend_buys_one_extension_within_the_price_and_waits_on_its_payment(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a pool of 2 in a block, its policy Extend by a day at up to 1,000,000 USD
    policy = {"action": "Extend", "maxExtensionPrice": "1000000"}
    block, inside = filled(cloud, subnets, image, static_sync, **policy)
    block_id = block["CapacityReservationId"]
    # Within the lead the sync buys one extension (payment-pending), and launches nothing
    advance_to(block["EndDate"] - LEAD, 60)
    report = static_sync()
    assert (report.launched, report.terminated) == ({}, {})
    (bought,) = extensions(cloud, block_id)
    assert bought["CapacityBlockExtensionDurationHours"] == 24
    (event,) = published(cloud, BLOCK_EXTENSION_PURCHASED)
    assert (event["action"], event["reason"]) == ("Extend", "OfferingWithinPrice")
    assert event["offeringId"] == bought["CapacityBlockExtensionOfferingId"]
    assert event["upfrontFee"] == bought["UpfrontFee"]
    # While its payment is pending the next minutes wait: nothing bought again, nothing launched
    for _ in range(2):
        CLOCK.advance(30)
        report = static_sync()
        assert (report.launched, report.terminated) == ({}, {})
        assert len(extensions(cloud, block_id)) == 1
    # Once paid the block ends a day later: the pool keeps its instances in it
    CLOCK.advance(BLOCK_SETTINGS.payment_pending_seconds + 60)
    report = static_sync()
    assert (report.launched, report.terminated) == ({}, {})
    assert in_block(cloud, block_id) == inside
    assert [e["CapacityBlockExtensionStatus"] for e in extensions(cloud, block_id)] == [
        "payment-succeeded"
    ]
    assert published(cloud, BLOCK_EXTENSION_PURCHASED) == []  # announced once


def test_extend_with_no_offering_within_the_price_evacuates(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a pool whose policy allows 1 USD for an extension
    policy = {"action": "Extend", "maxExtensionPrice": "1"}
    block, _ = filled(cloud, subnets, image, static_sync, **policy)
    block_id = block["CapacityReservationId"]
    # Within the lead nothing is bought and the pool evacuates, saying why
    advance_to(block["EndDate"] - LEAD, 60)
    report = static_sync()
    assert extensions(cloud, block_id) == []
    assert len(report.launched[POOL]) == 2
    (event,) = published(cloud, BLOCK_EVACUATING)
    assert (event["reason"], event["maxExtensionPrice"]) == ("NoOfferingWithinPrice", "1")
