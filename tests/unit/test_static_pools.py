"""A static NodePool's minute (domain/capacity/static_pools.plan): launches to fill it, spread
across zones and away from dry ones, capped by limits.instances; extras terminated in the
documented order."""

from __future__ import annotations

from capacity_launcher.domain.capacity.static_pools import (
    InFlight,
    StaticMember,
    StaticPlan,
    plan,
    still_dry,
)

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
