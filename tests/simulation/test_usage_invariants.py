"""The usage-by-team invariant on its own, over a stand-in for the world: the roll-up's stored
hours against the instances' lives, a right total passing and a wrong one (or hours under the
wrong team) found."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from tests.simulation.invariants import Invariants, Ledger
from tests.simulation.operations import Catalog
from tests.simulation.usage_invariants import (
    BY_TEAM,
    TOTAL,
    Life,
    Recorded,
    lived_and_allowed,
)
from tests.simulation.world import Observed, World

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC).timestamp()
DAY = "Usage#2026-03-02"


def _iso(offset: float) -> str:
    return datetime.fromtimestamp(T0 + offset, UTC).isoformat()


@dataclass
class StandIn:
    """The state table's partitions, EC2's instances and when each left live, as read."""

    partitions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    instances: dict[str, Observed] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    now: float = T0

    def partition(self, pk: str) -> dict[str, dict[str, Any]]:
        return self.partitions.get(pk, {})

    def left_live_at(self, instance_id: str) -> float | None:
        return self.ended.get(instance_id)

    def roll_up(self) -> None:
        """The sync's roll-up at `now` (only its watermark: the test writes the hours)."""
        self.partitions["Usage"] = {"CountedUntil": {"countedUntil": _iso(self.now - T0)}}


def _world() -> tuple[Invariants, StandIn]:
    world = StandIn()
    return Invariants(cast(World, world), Ledger(), seed=5, catalog=Catalog()), world


def _found(invariants: Invariants, name: str) -> list[str]:
    return [v.detail for v in invariants.violations if v.invariant == name]


def _run(invariants: Invariants, world: StandIn, hours: dict[tuple[str, str], float]) -> None:
    """Two instances: i-a (team-a, pool-0) launched 30 s before the first roll-up, running
    throughout; i-b (team-b, pool-1) launched at 100 s, terminated at 250 s (released at 251 s).
    The sync rolls up every minute from 60 s to 360 s; then the stored `hours` are judged."""
    a = Observed("i-a", "r1", "pool-0", "running", "m5.large", "us-east-1a", None, "team-a")
    a.launched_at = T0 + 30
    world.instances["i-a"] = a
    world.partitions["Instance#i-a"] = {"Instance": {"launchedAt": _iso(31)}}
    for second in range(60, 361, 10):
        world.now = T0 + second
        if second == 100:
            b = Observed("i-b", "r2", "pool-1", "running", "m5.large", "us-east-1a", None, "team-b")
            b.launched_at = T0 + 100
            world.instances["i-b"] = b
            world.partitions["Instance#i-b"] = {"Instance": {"launchedAt": _iso(100)}}
        if second == 250:
            world.instances["i-b"].state = "terminated"
            world.ended["i-b"] = T0 + 250
            world.partitions["Instance#i-b"]["Instance"]["releasedAt"] = _iso(251)
        if second % 60 == 0:
            world.roll_up()
        invariants.usage.every_step()
    world.partitions[DAY] = {
        f"Instances#{requester}#{pool}#on-demand#m5.large#-": {
            "hours": str(h),
            "requester": requester,
            "nodePool": pool,
        }
        for (requester, pool), h in hours.items()
    }
    invariants.usage.after_quiescence()


# What the roll-up counts of them over [60 s, 360 s): i-a throughout (300 s); i-b from its
# record's launch to its recorded release (151 s), which is 1 s more than it lived.
RIGHT = {("team-a", "pool-0"): 300 / 3600, ("team-b", "pool-1"): 151 / 3600}


def test_the_stored_hours_of_the_instances_lifetimes_pass() -> None:
    invariants, world = _world()
    _run(invariants, world, RIGHT)
    assert invariants.violations == []
    assert invariants.checks[TOTAL] == 1 and invariants.checks[BY_TEAM] == 2


def test_every_window_counted_twice_is_a_finding() -> None:
    invariants, world = _world()
    _run(invariants, world, {**RIGHT, ("team-a", "pool-0"): 600 / 3600})
    # allowed: i-b's launch and end, each its window (60 s), 2 s and its recorded lag (0 s, 1 s)
    assert _found(invariants, TOTAL) == [
        "all: stored 0.2086 h, lived 0.1250 h, allowed ±0.0347 h over "
        "[2026-03-02T08:01:00Z, 2026-03-02T08:06:00Z), 5 windows"
    ]
    assert len(_found(invariants, BY_TEAM)) == 1


def test_hours_under_another_team_are_a_finding_though_the_total_is_right() -> None:
    invariants, world = _world()
    _run(invariants, world, {("team-a", "pool-0"): 300 / 3600, ("team-a", "pool-1"): 151 / 3600})
    assert _found(invariants, TOTAL) == []
    assert [d.split(":")[0] for d in _found(invariants, BY_TEAM)] == [
        "requester team-a pool pool-1",
        "requester team-b pool pool-1",
    ]


def test_the_tolerance_is_the_window_of_each_change_and_the_recorded_lags() -> None:
    watermarks = [T0 + 60 * n for n in range(1, 7)]  # windows of 60 s from 60 s to 360 s
    # Launched at 100 s (recorded at 103 s), ended at 250 s, its release recorded at 251 s:
    # the launch's window and 3 s, the end's window and 1 s, 2 s of resolution each
    life = Life("team-b", "pool-1", [[T0 + 100, T0 + 250]])
    lived, allowed = lived_and_allowed(life, Recorded(T0 + 103, T0 + 251), watermarks)
    assert lived * 3600 == 150
    assert round(allowed * 3600, 6) == 60 + 3 + 2 + 60 + 1 + 2
    # Its release not recorded: the window after its end instead of the lag
    _, allowed = lived_and_allowed(life, Recorded(T0 + 100, None), watermarks)
    assert round(allowed * 3600, 6) == 60 + 2 + 60 + 60 + 2
    # Running throughout, launched before the first roll-up: exact
    life = Life("team-a", "pool-0", [[T0, None]])
    assert lived_and_allowed(life, Recorded(T0 + 1, None), watermarks) == (300 / 3600, 0.0)
    # Terminated at a watermark's own moment after a long window (a clock jump's end, the
    # sync's look first: it counts nothing of that window): the longer window is allowed
    jumped = [T0 + 60, T0 + 420, T0 + 480, T0 + 540]
    life = Life("team-b", "pool-1", [[T0 + 100, T0 + 420]])
    _, allowed = lived_and_allowed(life, Recorded(T0 + 100, T0 + 421), jumped)
    assert round(allowed * 3600, 6) == 360 + 2 + 360 + 2 + 1
