"""The `live <= limit` invariant on its own, over a stand-in for the world: it allows what a
lowered limit or a deleted pool legitimately leaves running, catches a launch past the limit,
and its finding says which applies, deletions and requests made up the count."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from tests.simulation.emulator import START
from tests.simulation.invariants import Disturbance, Invariants, Ledger
from tests.simulation.operations import Catalog
from tests.simulation.world import Observed, World

LIMIT = "live <= limit (every step)"


@dataclass
class StandIn:
    """What `_limits_hold` reads of the world: EC2's managed instances and the usage items."""

    instances: dict[str, Observed] = field(default_factory=dict)
    restarted: set[str] = field(default_factory=set)
    now: float = START.timestamp()

    def live_by_pool(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for observed in self.instances.values():
            counts[observed.pool] = counts.get(observed.pool, 0) + 1
        return counts

    def stored_usage(self) -> dict[str, int]:
        return self.live_by_pool()

    def launch(self, request_id: str, pool: str, count: int) -> None:
        for _ in range(count):
            instance_id = f"i-{len(self.instances):017x}"
            self.instances[instance_id] = Observed(
                instance_id, request_id, pool, "running", "m5.large", "us-east-1a", None
            )


def _invariants() -> tuple[Invariants, StandIn]:
    world = StandIn()
    invariants = Invariants(cast(World, world), Ledger(), seed=5, catalog=Catalog())
    return invariants, world


def _at(invariants: Invariants, step: int, *submitted: str) -> None:
    invariants.step = step
    for request_id in submitted:
        invariants.ledger.submitted(request_id, 0.0, 1, True, step=step)


def _check(invariants: Invariants) -> None:
    """A step's checks of EC2, in `every_step`'s order (it notes when each instance was seen)."""
    invariants._limits_hold()
    invariants._nothing_after_end()


def _findings(invariants: Invariants) -> list[Any]:
    return [v for v in invariants.violations if v.invariant == LIMIT]


def test_launching_into_a_deleted_pool_past_its_last_limit_is_an_overrun_that_explains_itself():
    # Given pool-2 applied with limit 1 and full (the soak's seed 5)
    invariants, world = _invariants()
    _at(invariants, 0)
    invariants.lowered("pool-2", 1, committed=0)
    _at(invariants, 1, "req-5-9")
    world.launch("req-5-9", "pool-2", 1)
    _check(invariants)
    # When the pool is deleted and 4 more join its instance (a container's copy served them)
    _at(invariants, 56)
    invariants.deleted("pool-2")
    _check(invariants)
    _at(invariants, 57, "req-5-110")
    world.launch("req-5-110", "pool-2", 4)
    _check(invariants)
    _at(invariants, 58)
    _check(invariants)
    # Then one finding, at the step they appeared, naming the applies, the deletion and who runs
    [finding] = _findings(invariants)
    assert finding.step == 57
    assert "5 live, limit 1" in finding.detail
    assert "step 0 applied (committed 0), limit 1; step 56 deleted, limit 1" in finding.detail
    first_new = "i-00000000000000001 seen step 57"
    assert f"req-5-110 x4 (submitted step 57, open: {first_new}" in finding.detail
    assert "req-5-9 x1 (submitted step 1, open: i-00000000000000000 seen step 1)" in finding.detail


def test_a_lowered_limit_allows_what_ran_then_but_no_launch_past_it():
    # Given pool-1 limited to 8 running 5
    invariants, world = _invariants()
    _at(invariants, 0, "req-a")
    invariants.lowered("pool-1", 8, committed=0)
    world.launch("req-a", "pool-1", 5)
    _check(invariants)
    # When its limit is lowered to 1 (deleted and applied again): the 5 are not an overrun
    _at(invariants, 10)
    invariants.deleted("pool-1")
    invariants.lowered("pool-1", 1, committed=5)
    _check(invariants)
    assert _findings(invariants) == []
    # But one more launched meanwhile is
    _at(invariants, 11, "req-b")
    world.launch("req-b", "pool-1", 1)
    _check(invariants)
    [finding] = _findings(invariants)
    assert "6 live, limit 1 (grace 5)" in finding.detail
    assert "step 10 deleted, limit 8; step 10 applied (committed 5), limit 1" in finding.detail


@dataclass
class DeadLetters(StandIn):
    letters: list[str] = field(default_factory=list)

    def dead_letters(self) -> list[str]:
        return self.letters


def _dead_lettered(request_id: str, *disturbances: Disturbance) -> list[str]:
    """The DLQ invariant's findings when `request_id` (not the simulation's own) is
    dead-lettered, under `disturbances`."""
    world = DeadLetters(letters=[json.dumps({"requestId": request_id, "count": 1})])
    invariants = Invariants(cast(World, world), Ledger(), seed=3, catalog=Catalog())
    invariants.ledger.disturbances.extend(disturbances)
    invariants._dead_letters_only_permanent()
    return [v.detail for v in invariants.violations if v.invariant == "DLQ only permanent faults"]


def test_a_static_launch_sent_before_a_permanent_outage_may_be_dead_lettered() -> None:
    """Seed 3 (soak, --steps 830): 5 launches the sync sent for pool-static were found in the
    DLQ "with no permanent fault": the simulation did not send them, so the ledger had no
    entry saying a permanent outage held while they were in flight."""
    sent = int(START.timestamp()) + 600
    outage = Disturbance("ec2:CreateFleet RequestLimitExceeded", sent + 30.0, None, True)
    assert _dead_lettered(f"static-pool-static-{sent}-0", outage) == []
    ended = Disturbance("ec2:CreateFleet RequestLimitExceeded", sent + 30.0, sent + 900.0, True)
    assert _dead_lettered(f"static-pool-static-{sent}-1", ended) == []


def test_a_static_launch_dead_lettered_with_no_permanent_fault_since_it_was_sent_is_found() -> None:
    sent = int(START.timestamp()) + 600
    before = Disturbance("ec2:CreateFleet RequestLimitExceeded", sent - 900.0, sent - 1.0, True)
    transient = Disturbance("ec2:CreateFleet InsufficientInstanceCapacity", sent + 5.0, None)
    assert len(_dead_lettered(f"static-pool-static-{sent}-0", before, transient)) == 1
    assert len(_dead_lettered("req-3-1", Disturbance("x", sent, None, True))) == 1
