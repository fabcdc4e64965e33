"""Issue 39: a static pool whose replicas follow its reservations (`spec.replicasFrom:
Reserved`, docs/static-capacity.md) on the local cloud: nothing before a Capacity Block is
active, filled with reserved instances once it is (never on-demand for that part), scaled back
before EC2 ends the block's instances (30 minutes before its end,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from capacity_launcher.domain.errors import ConfigValidationError, LaunchFailed
from capacity_launcher.service.reservations import ReservationProvider
from tests.integration.test_launch_into_gpu_reservations import BLOCK_TYPE, advance_to, buy_block
from tests.integration.test_static_pools import POOL, running, static_sync  # noqa: F401
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    node_class,
    node_pool,
)

ZONE = "us-east-1a"


def following_pool(cloud: Cloud, subnets: dict[str, str], image: str, block_id: str) -> None:
    """A static pool of at most 4 that follows the block its NodeClass selects, and that would
    allow on-demand too: the part that follows the block must not use it."""
    pool_on_block(cloud, subnets, image, block_id, replicas=4, replicasFrom="Reserved")


def pool_on_block(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    block_id: str | list[str],
    name: str = POOL,
    **spec: Any,
) -> None:
    """A pool `name` (`spec`: static unless it says no replicas) of the block's type, reserved
    first (its NodeClass selects the block, or each of the blocks), on-demand allowed."""
    blocks = [block_id] if isinstance(block_id, str) else block_id
    cloud.apply(
        node_class(
            "blocks",
            [subnets[ZONE]],
            image,
            securityGroupIds=[default_security_group(cloud.ec2)],
            capacityReservationSelectorTerms=[{"id": b} for b in blocks],
        ),
        node_pool(
            name,
            "blocks",
            requirements=[capacity_type("reserved", "on-demand"), instance_type(BLOCK_TYPE)],
            **spec,
        ),
    )


def test_a_pool_following_a_block_fills_on_activation_and_empties_before_its_end(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
) -> None:
    # Given a future-dated block of 2 and a pool of at most 4 that follows it
    block = buy_block(cloud, count=2)
    following_pool(cloud, subnets, image, block["CapacityReservationId"])
    # Before the block is active nothing is launched (not on-demand either)
    assert static_sync().launched == {}
    assert running(cloud) == []
    # Once it is active the pool is filled to what the block holds, in the block
    advance_to(block["StartDate"], 60)
    report = static_sync()
    assert len(report.launched[POOL]) == 2
    instances = running(cloud)
    assert len(instances) == 2
    assert {i.get("CapacityReservationId") for i in instances} == {block["CapacityReservationId"]}
    assert static_sync().launched == {}
    # Before EC2 ends the block's instances, the pool lets them go itself
    advance_to(block["EndDate"] - timedelta(minutes=40), 0)
    report = static_sync()
    assert len(report.terminated[POOL]) == 2
    assert running(cloud) == []
    assert static_sync().launched == {}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replicasFrom": "Reserved"}, "replicasFrom needs replicas"),
        (
            {
                "replicas": 2,
                "replicasFrom": "Reserved",
                "requirements": [capacity_type("on-demand")],
            },
            "to allow reserved",
        ),
    ],
)
def test_replicas_from_that_would_be_ignored_is_refused(
    cloud: Cloud, subnets: dict[str, str], image: str, spec: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigValidationError) as refused:
        cloud.apply(
            node_class("standard", [subnets[ZONE]], image),
            node_pool(POOL, "standard", **spec),
        )
    assert field in str(refused.value)


def test_a_pool_whose_reservations_cannot_be_read_is_left_as_it_is(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    static_sync: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a pool filled from its active block
    block = buy_block(cloud, count=2)
    following_pool(cloud, subnets, image, block["CapacityReservationId"])
    advance_to(block["StartDate"], 60)
    static_sync()
    assert len(running(cloud)) == 2

    # When its reservations cannot be read, the minute neither empties nor fills it on a guess
    def refused(*_: Any, **__: Any) -> Any:
        raise LaunchFailed("RequestLimitExceeded", "Request limit exceeded.")

    monkeypatch.setattr(ReservationProvider, "sources", refused)
    report = static_sync()
    assert report.skipped == [POOL] and report.terminated == {} and report.launched == {}
    assert len(running(cloud)) == 2
