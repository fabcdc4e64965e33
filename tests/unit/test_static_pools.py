"""A static NodePool's minute (domain/capacity/static_pools.plan): launches to fill it, spread
across zones and away from dry ones, capped by limits.instances; extras terminated in the
documented order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.priority_classes import PriorityTable
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.capacity.static_pools import (
    InFlight,
    StaticMember,
    StaticPlan,
    leaving_reservations,
    plan,
    reserved_capacity,
    still_dry,
)
from capacity_launcher.domain.errors import ConfigValidationError

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def member(instance_id: str, zone: str, capacity: str = "on-demand", at: str = "2026-01-01"):
    return StaticMember(instance_id, zone, capacity, f"{at}T00:00:00+00:00")


def test_an_empty_pool_is_filled_across_its_zones():
    assert plan(4, None, [], [], ZONES).launch == (
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
        "us-east-1a",
    )


def test_launches_in_flight_count_and_fill_the_emptiest_zone():
    members = [member("i-1", "us-east-1a"), member("i-2", "us-east-1b")]
    in_flight = [InFlight("static-x", "us-east-1a", 0)]
    assert plan(4, None, members, in_flight, ZONES).launch == ("us-east-1c",)
    assert plan(3, None, members, in_flight, ZONES).idle


def test_dry_zones_are_skipped_until_every_zone_is_dry():
    assert plan(2, None, [], [], ZONES, dry_zones={"us-east-1a"}).launch == (
        "us-east-1b",
        "us-east-1c",
    )
    assert plan(1, None, [], [], ZONES, dry_zones=set(ZONES)).launch == (None,)
    assert still_dry({"us-east-1a": 100, "us-east-1b": 50}, now=60) == {"us-east-1a": 100}


def test_limits_instances_caps_the_launches():
    assert plan(5, 2, [member("i-1", "us-east-1a")], [], ZONES).launch == ("us-east-1b",)
    assert plan(5, 1, [member("i-1", "us-east-1a")], [], ZONES) == StaticPlan()


def test_members_over_the_limit_go_too():
    """A stopped member replaced, then started again (outside the service), is counted back:
    the pool is over `limits.instances` and the newest goes, replicas notwithstanding."""
    members = [member("i-old", "us-east-1a"), member("i-new", "us-east-1b", at="2026-02-01")]
    assert plan(2, 1, members, [], ZONES).terminate == ("i-new",)
    assert plan(2, 2, members, [], ZONES) == StaticPlan()


def test_extras_go_unreserved_first_then_newest():
    members = [
        member("i-old", "us-east-1a", at="2026-01-01"),
        member("i-new", "us-east-1a", at="2026-03-01"),
        member("i-reserved-new", "us-east-1b", capacity="reserved", at="2026-04-01"),
        member("i-mid", "us-east-1c", at="2026-02-01"),
    ]
    assert plan(2, None, members, [], ZONES).terminate == ("i-new", "i-mid")
    assert plan(0, None, members, [], ZONES).terminate == (
        "i-new",
        "i-mid",
        "i-old",
        "i-reserved-new",
    )


NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)


def reservation(rid: str, total: int, state: str = "active", **extra) -> ReservationSnapshot:
    return ReservationSnapshot(rid, "p5.48xlarge", "us-east-1a", state, total, total, **extra)


def test_replicas_from_reserved_count_active_reservations_once():
    held = [
        reservation("cr-odcr", 3),
        reservation("cr-odcr", 3),  # reached through two targets: counted once
        reservation("cr-future", 5, "scheduled"),  # future-dated: not yet
        reservation("cr-gone", 2, "expired"),
    ]
    assert reserved_capacity(held, NOW) == 3


def test_a_block_stops_counting_before_ec2_ends_its_instances():
    def block(ends_in: timedelta) -> ReservationSnapshot:
        return reservation("cr-block", 2, reservation_type="capacity-block", end_date=NOW + ends_in)

    assert reserved_capacity([block(timedelta(hours=2))], NOW) == 2
    # EC2 terminates a block's instances 30 minutes before its end: the pool lets them go first
    assert reserved_capacity([block(timedelta(minutes=31))], NOW) == 0
    # An ODCR with an end date is used to its end
    odcr = reservation("cr-odcr", 1, end_date=NOW + timedelta(minutes=31))
    assert reserved_capacity([odcr], NOW) == 1


def test_replicas_from_is_the_hubs_and_never_silently_dropped():
    """karpenter.sh/v1 has no spelling for it: a Karpenter document naming it is refused, and a
    hub pool with it cannot be read as Karpenter's (it would lose the field)."""
    karpenter = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "replicas": 2,
            "replicasFrom": "Reserved",
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    }
                }
            },
        },
    }
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(karpenter, PriorityTable())
    assert "replicasFrom" in str(refused.value)
    hub = NodePool.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"nodeClassRef": "gpu", "replicas": 2, "replicasFrom": "Reserved"},
        }
    )
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.convert(hub, None, "karpenter.sh/v1", "NodePool", PriorityTable())
    assert [e.field for e in refused.value.errors] == ["spec.replicasFrom"]


def test_scaling_back_lets_the_ending_blocks_instances_go_first():
    """A pool following an ODCR and a block near its end: the block's instances go (EC2 ends
    them anyway), not the ODCR's newer ones."""
    odcr = [
        StaticMember(f"i-odcr{n}", "us-east-1a", "reserved", "2026-11-28T10:00:00+00:00", "cr-o")
        for n in range(2)
    ]
    block = [
        StaticMember(f"i-blk{n}", "us-east-1a", "reserved", "2026-11-27T10:00:00+00:00", "cr-b")
        for n in range(2)
    ]
    assert plan(2, None, odcr + block, [], ZONES, leaving={"cr-b"}) == StaticPlan(
        terminate=("i-blk1", "i-blk0")
    )
    ending = reservation(
        "cr-b", 2, reservation_type="capacity-block", end_date=NOW + timedelta(minutes=31)
    )
    assert leaving_reservations([ending, reservation("cr-o", 2)], NOW) == {"cr-b"}
