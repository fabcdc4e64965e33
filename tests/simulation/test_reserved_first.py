"""The reserved-first invariant on its own, over a stand-in for the world: fed a recorded history
(EC2's room in a selected reservation over time, a launch, the request and pool behind it), it
flags an on-demand launch beside a reservation free for longer than the documented windows, and
stays quiet when the room came within them, or the room was broken, or the launch is out of
scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from capacity_launcher.settings import Settings
from tests.simulation.emulator import START
from tests.simulation.invariants import Invariants, Ledger
from tests.simulation.operations import Catalog
from tests.simulation.reserved_first import (
    BESIDE,
    RESERVED_FIRST,
    SYNC_EVERY_SECONDS,
    ReservedFirst,
    hidden_room_seconds,
)
from tests.simulation.scheduler import SYNC_EVERY_SECONDS as SCHEDULED_SYNC
from tests.simulation.world import Launch, Observed, Placement, ReservationFacts, World

T0 = START.timestamp()
M5 = Placement("m5.large", "us-east-1a", "Linux/UNIX", "default")
SETTINGS = Settings(
    state_table_name="state",
    unavailable_offerings_table_name="ice",
    idempotency_table_name="idempotency",
    event_bus_name="bus",
    ice_ttl_seconds=180,
    ice_local_copy_seconds=5.0,
    config_cache_seconds=10.0,
)
MARGIN = hidden_room_seconds(180, 5.0)
SUBMITTED = T0 + 1000.0


@dataclass
class StandIn:
    """What the invariant reads of the world: EC2's room and launches, instances, the time."""

    room: dict[str, int] = field(default_factory=dict)
    facts: dict[str, ReservationFacts] = field(default_factory=dict)
    launched: list[Launch] = field(default_factory=list)
    instances: dict[str, Observed] = field(default_factory=dict)
    now: float = T0

    def reservation_room(self) -> dict[str, int]:
        return dict(self.room)

    def reservation_facts(self, reservation_id: str) -> ReservationFacts:
        return self.facts[reservation_id]

    def launches_after(self, seen: int) -> list[Launch]:
        return self.launched[seen:]


def _world(capacity_types: tuple[str, ...] = ("reserved", "on-demand")) -> tuple[Any, ...]:
    world = StandIn()
    world.facts["cr-1"] = ReservationFacts(
        "cr-1", M5, (("simulation", "yes"),), "123456789012", "targeted", "default", False, None
    )
    catalog = Catalog()
    catalog.classes["class-selector"] = {
        "spec": {"capacityReservationSelectorTerms": [{"tags": {"simulation": "yes"}}]}
    }
    capacity = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types}
    catalog.pools["pool-1"] = {
        "metadata": {"name": "pool-1"},
        "spec": {"nodeClassRef": "class-selector", "requirements": [capacity]},
    }
    invariants = Invariants(cast(World, world), Ledger(), seed=5, catalog=catalog)
    return world, invariants, ReservedFirst(invariants, SETTINGS)


def _room(world: StandIn, reserved: ReservedFirst, at: float, free: int) -> None:
    """EC2's room in cr-1 changes at `at` (a launch, a termination, a modification)."""
    world.now, world.room["cr-1"] = at, free
    reserved.sample()


def _launch_on_demand(
    world: StandIn, invariants: Invariants, reserved: ReservedFirst, body: dict[str, Any]
) -> list[str]:
    """req-1 submitted at SUBMITTED, its instance launched on-demand a second later (the
    CreateFleet seen as it returns), and the step ending two seconds after."""
    invariants.ledger.submitted("req-1", SUBMITTED, 1, True, body, step=7)
    world.now = SUBMITTED + 1.0
    world.launched.append(Launch("i-1", world.now, M5, "on-demand", None))
    reserved.after("ec2:CreateFleet", {})
    world.instances["i-1"] = Observed(
        "i-1", "req-1", "pool-1", "running", "m5.large", "us-east-1a", None
    )
    world.now += 2.0
    reserved.every_step()
    return [v.detail for v in invariants.violations if v.invariant == RESERVED_FIRST]


BODY = {"requestId": "req-1", "count": 1, "nodePool": "pool-1"}


def test_the_margin_is_the_longest_window_that_hides_room_plus_the_launch_slack() -> None:
    # a snapshot's staleness bound (300 s) is the longest; a longer ICE TTL would be instead
    assert MARGIN == 300 + 60
    assert hidden_room_seconds(600, 5.0) == 605 + 60


def test_an_on_demand_launch_beside_a_reservation_free_for_long_is_a_finding() -> None:
    # Given a selected m5.large reservation in the instance's zone with 2 slots free from t=0
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 2)
    # When a request submitted at t=1000 is launched on-demand as m5.large in that zone
    found = _launch_on_demand(world, invariants, reserved, BODY)
    # Then the finding names instance, request, reservation and times
    assert found == [
        "i-1 (on-demand m5.large us-east-1a) for req-1 in pool-1 launched at t=1001s; selected"
        " targeted reservation cr-1 (default) kept 2 slot(s) free from t=640s (360s before the"
        " request's submission at t=1000s, step 7) to t=1003s, free without a break since t=0s"
    ]
    assert invariants.checks[RESERVED_FIRST] == 1


def test_an_on_demand_launch_beside_a_free_member_of_the_targeted_group_is_a_finding() -> None:
    # Given the pool's NodeClass targeting an ODCR group, cr-1 free since t=0, and the group's
    # members as the groups profile records them: cr-1 in it, then not
    group = "arn:aws:resource-groups:us-east-1:123456789012:group/sim-reservations"
    found = {}
    for members in (frozenset({"cr-1"}), frozenset({"cr-2"})):
        world, invariants, reserved = _world()
        target = {"capacityReservationTarget": {"capacityReservationResourceGroupArn": group}}
        invariants.catalog.classes["class-selector"] = {"spec": {"capacityReservationSpec": target}}
        reserved.groups[group] = members
        _room(world, reserved, T0, 2)
        # When a request is launched on-demand beside it
        found[members] = _launch_on_demand(world, invariants, reserved, BODY)
    # Then a member's room is selected room, another reservation's is not
    assert len(found[frozenset({"cr-1"})]) == 1
    assert "reservation cr-1" in found[frozenset({"cr-1"})][0]
    assert found[frozenset({"cr-2"})] == []


def test_room_that_came_within_the_margin_is_not_a_finding() -> None:
    # Given the reservation full until 30 s after the margin before the submission, free since
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 0)
    _room(world, reserved, SUBMITTED - MARGIN + 30, 2)
    # When the request is launched on-demand beside it
    found = _launch_on_demand(world, invariants, reserved, BODY)
    # Then the room may have been out of the launcher's sight: no finding, but it was judged
    assert found == []
    assert invariants.checks[RESERVED_FIRST] == 1
    assert invariants.checks[f"seen: {BESIDE}"]


def test_room_taken_within_the_window_is_not_a_finding() -> None:
    # Given the reservation free for long, but full for a moment before the launch (another
    # request's instance, since ended)
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 2)
    _room(world, reserved, SUBMITTED - 100, 0)
    _room(world, reserved, SUBMITTED - 50, 1)
    # Then an on-demand launch is no finding
    assert _launch_on_demand(world, invariants, reserved, BODY) == []


def test_room_made_within_the_window_does_not_stand_for_room_taken() -> None:
    # Given 2 slots free for long, a third freed within the window (someone else's instance
    # ended), and the request's own 2 reserved instances launched into it, leaving 1 free
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 2)
    _room(world, reserved, SUBMITTED - 30, 3)
    _room(world, reserved, SUBMITTED + 0.5, 1)
    # Then its on-demand launch is no finding: the long-free room was used, the slot left may
    # be the new one, which a launcher may not have seen yet
    assert _launch_on_demand(world, invariants, reserved, BODY) == []
    # But had it used only one of the long-free slots, the other is a finding
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 2)
    _room(world, reserved, SUBMITTED - 30, 3)
    _room(world, reserved, SUBMITTED + 0.5, 2)
    (finding,) = _launch_on_demand(world, invariants, reserved, BODY)
    assert "kept 1 slot(s) free" in finding


def test_a_reservation_filled_in_the_launching_step_is_not_a_finding() -> None:
    # Given the reservation free for long, filled in the same step after the on-demand launch
    # (a claim of another container whose CreateFleet came after)
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 1)
    invariants.ledger.submitted("req-1", SUBMITTED, 1, True, BODY, step=7)
    world.now = SUBMITTED + 1.0
    world.launched.append(Launch("i-1", world.now, M5, "on-demand", None))
    reserved.after("ec2:CreateFleet", {})
    world.room["cr-1"] = 0
    world.launched.append(Launch("i-2", world.now, M5, "on-demand", "cr-1"))
    reserved.after("ec2:CreateFleet", {})
    world.instances["i-1"] = Observed(
        "i-1", "req-1", "pool-1", "running", "m5.large", "us-east-1a", None
    )
    world.now += 2.0
    reserved.every_step()
    # Then no finding
    assert [v for v in invariants.violations if v.invariant == RESERVED_FIRST] == []


def test_launches_the_promise_does_not_cover_are_not_judged() -> None:
    on_demand_only = {
        "key": "karpenter.sh/capacity-type",
        "operator": "In",
        "values": ["on-demand"],
    }
    # A request pinning on-demand
    world, invariants, reserved = _world()
    _room(world, reserved, T0, 2)
    assert (
        _launch_on_demand(world, invariants, reserved, {**BODY, "requirements": [on_demand_only]})
        == []
    )
    assert invariants.checks[RESERVED_FIRST] == 0
    # A pool allowing no reserved capacity
    world, invariants, reserved = _world(capacity_types=("on-demand",))
    _room(world, reserved, T0, 2)
    assert _launch_on_demand(world, invariants, reserved, BODY) == []
    assert invariants.checks[RESERVED_FIRST] == 0
    # A reservation of another type, or one the NodeClass does not select
    world, invariants, reserved = _world()
    world.facts["cr-1"] = ReservationFacts(
        "cr-1", Placement("c5.large", "us-east-1a", "Linux/UNIX", "default"),
        (("simulation", "yes"),), "123456789012", "targeted", "default", False, None,
    )  # fmt: skip
    _room(world, reserved, T0, 2)
    assert _launch_on_demand(world, invariants, reserved, BODY) == []
    world, invariants, reserved = _world()
    world.facts["cr-1"] = ReservationFacts(
        "cr-1", M5, (("team", "other"),), "123456789012", "targeted", "default", False, None
    )
    _room(world, reserved, T0, 2)
    assert _launch_on_demand(world, invariants, reserved, BODY) == []


def test_the_margin_counts_the_sync_period_the_scheduler_runs_it_at() -> None:
    assert SYNC_EVERY_SECONDS == SCHEDULED_SYNC
