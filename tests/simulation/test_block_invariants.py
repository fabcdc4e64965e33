"""The block invariant of issue 27 on its own, over a stand-in for the world: an instance first
seen in a Capacity Block was launched before the block's last 45 minutes (EC2 terminates a
block's instances from 30 minutes before its end; the service keeps a 15-minute boot margin)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from tests.simulation.block_end_invariants import NO_DROP, PoolLook
from tests.simulation.emulator import START
from tests.simulation.invariants import Invariants, Ledger
from tests.simulation.operations import Catalog
from tests.simulation.world import Observed, ReservationView, World

ENDING = "nothing launches into an ending block"
END = START.timestamp() + 24 * 3600


@dataclass
class StandIn:
    """What the reservation checks read of the world: instances, reservations and the time."""

    instances: dict[str, Observed] = field(default_factory=dict)
    blocks: dict[str, ReservationView] = field(default_factory=dict)
    now: float = START.timestamp()

    def reservations(self) -> dict[str, ReservationView]:
        return self.blocks


def _judged_launch(minutes_before_end: float) -> list[str]:
    world = StandIn()
    world.blocks["cr-block"] = ReservationView(
        "cr-block", "capacity-block", "active", START.timestamp(), END, "capacity-block",
        frozenset({"i-1"}), (),
    )  # fmt: skip
    launched_at = END - minutes_before_end * 60
    world.instances["i-1"] = Observed(
        "i-1", "r-1", "pool-gpu", "running", "p4d.24xlarge", "us-east-1a", "cr-block",
        lifecycle="capacity-block", launched_at=launched_at,
    )  # fmt: skip
    world.now = launched_at + 1
    invariants = Invariants(cast(World, world), Ledger(), seed=5, catalog=Catalog())
    invariants.capacity._launches_into_active_reservations(world.reservations())
    return [v.detail for v in invariants.violations if v.invariant == ENDING]


def test_a_launch_into_a_blocks_last_45_minutes_is_a_finding() -> None:
    (finding,) = _judged_launch(40)
    assert "i-1 for r-1" in finding and "last 45 minutes" in finding


def test_a_launch_before_the_last_45_minutes_is_not() -> None:
    assert _judged_launch(50) == []


def test_an_evacuation_that_drops_the_count_is_a_finding_what_ec2_ended_is_not() -> None:
    """block_end_invariants: judged from a quiescence's start to after its last sync, an instance
    gone before its block's last 30 minutes is the sync's and must leave the count whole; one
    EC2 ended at its block's end lowers the floor."""
    invariants = Invariants(cast(World, StandIn()), Ledger(), 1, Catalog())
    ends = {"cr-block": END, "cr-done": START.timestamp() + 3600}
    before = PoolLook({"i-1": "cr-block", "i-2": "cr-done", "i-3": None}, ends, START.timestamp())
    later = START.timestamp() + 2 * 3600  # cr-done's instances ended by EC2, cr-block's not yet
    # The block's i-1 cut, its replacement i-4 running; i-2 ended by EC2: judged, held
    invariants.block_end.no_drop(
        "pool", before, PoolLook({"i-3": None, "i-4": None}, ends, later), 3
    )
    assert invariants.checks[NO_DROP] == 1 and invariants.violations == []
    # The block's i-1 cut with no replacement: the count dropped, a finding
    invariants.block_end.no_drop("pool", before, PoolLook({"i-3": None}, ends, later), 3)
    assert [v.invariant for v in invariants.violations] == [NO_DROP]
