"""Issue 37: requests that may wait (`waitForCapacityUntil`) for room in their pool's admission
queue, some naming a PriorityClass; their invariants are queue_invariants.py's."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.simulation.priority_invariants import PRIORITY_CLASS

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

# Waits of a few minutes to an hour: deadlines pass within a soak's simulated time, and the
# clock jumps (advance_clock) carry others past theirs.
WAITS_SECONDS = (120, 300, 900, 1800, 3600)
QUEUE_WEIGHTS: dict[str, float] = {
    "submit_waiting": 8,
    "preemption_policy": 2,
    "preempting_waiter": 2,
    "preempting_waiter_at_limits": 1,
}
# Issue 37's preemption policies (preemption_invariants.py): Never is the default.
WITHIN_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_POLICIES = ("Never", "LowerPriority")
THRESHOLDS = (None, None, 10, 50, 100)
PREEMPTION_GRACE = ("30s", "90s")


def submit_waiting(sim: Simulation, rng: random.Random) -> str:
    """A request that waits for room rather than fail (half of them naming an applied class,
    or one that is not: Rejected naming the field)."""
    from tests.simulation.operations import request_body

    body = request_body(sim, rng)
    until = datetime.fromtimestamp(sim.world.now, UTC) + timedelta(
        seconds=rng.choice(WAITS_SECONDS)
    )
    body["waitForCapacityUntil"] = until.isoformat().replace("+00:00", "Z")
    classes = sorted(sim.world.partition(PRIORITY_CLASS))
    if rng.random() < 0.5:
        body["priorityClassName"] = (
            rng.choice(classes) if classes and rng.random() < 0.9 else "nonesuch"
        )
    sim.send([body], via_bus=rng.random() < 0.3)
    return f"{body.get('nodePool', 'any pool')} until {body['waitForCapacityUntil']}"


def preemption_policy(sim: Simulation, rng: random.Random, name: str | None = None) -> str:
    """A quota's withinClusterQueue and borrowWithinCohort (with or without a threshold) drawn,
    its other terms as applied: its waiting requests may preempt, or no longer."""
    from tests.simulation.operations import QUOTAS, quota_document

    name = name or rng.choice(sorted(QUOTAS))
    document = copy.deepcopy(sim.catalog.quotas.get(name) or quota_document(name))
    rules = dict(document["spec"].get("preemption") or {})
    rules["withinClusterQueue"] = rng.choice(WITHIN_POLICIES)
    borrow: dict[str, Any] = {"policy": rng.choice(BORROW_POLICIES)}
    threshold = rng.choice(THRESHOLDS)
    if threshold is not None:
        borrow["maxPriorityThreshold"] = threshold
    rules["borrowWithinCohort"] = borrow
    rules.setdefault("gracePeriod", rng.choice(PREEMPTION_GRACE))
    document["spec"]["preemption"] = rules
    applied = sim.apply(document)
    applied = sim.apply(document) if applied != "applied" else applied
    return f"{name} {rules['withinClusterQueue']} {borrow}: {applied}"


def preempting_waiter(sim: Simulation, rng: random.Random, *, at_limits: bool = False) -> str:
    """A team fills what its quota (withinClusterQueue) or its cohort (borrowWithinCohort) lets it
    run in a quota pool with requests of the lowest applied class, then asks, willing to wait,
    at the highest: its quota's policies (drawn) decide whether it preempts, and which.
    ``at_limits``: the pool's limit is lowered to 1 below what runs there first, so victims must
    free the pool's room as well as the quota (preemption_invariants.STILL_FITS)."""
    from tests.simulation.adversary import _body_for, _roomy_pool
    from tests.simulation.operations import QUOTA_POOLS
    from tests.simulation.priority_operations import stored_classes

    pool = rng.choice(QUOTA_POOLS)
    applied = (sim.catalog.pools.get(pool) or {}).get("spec", {})
    if applied.get("limits") != {"instances": "8"}:  # made roomy once, not at every draw
        sim.apply(_roomy_pool(sim, pool, rng))
    stored = stored_classes(sim.invariants.priority.snapshot())
    values = {name: int(document["value"]) for name, document in stored.items()}
    low = min(values, key=values.__getitem__) if values else None
    high = max(values, key=values.__getitem__) if values else None
    within = rng.random() < 0.5
    filler = "team-a" if within else "team-b"
    bodies = [_body_for(sim, rng, filler, pool) for _ in range(2)]
    for body in bodies:
        body["count"] = 3
        if low is not None:
            body["priorityClassName"] = low
    sim.send(bodies, via_bus=False)
    sim.poll_once()
    lowered = ""
    if at_limits:
        tight = _roomy_pool(sim, pool, rng)
        limit = max(1, sim.world.live_by_pool().get(pool, 0) - 1)
        tight["spec"]["limits"] = {"instances": str(limit)}
        lowered = f", {pool} lowered to {limit}: {sim.apply(tight)}"
    policy = preemption_policy(sim, rng, "quota-a")
    waiter = _body_for(sim, rng, "team-a", pool)
    if high is not None:
        waiter["priorityClassName"] = high
    until = datetime.fromtimestamp(sim.world.now, UTC) + timedelta(seconds=900)
    waiter["waitForCapacityUntil"] = until.isoformat().replace("+00:00", "Z")
    sim.send([waiter], via_bus=False)
    sim.poll_once()
    return f"{'within' if within else 'borrowing'} in {pool}, {low} then {high}, {policy}{lowered}"


def preempting_waiter_at_limits(sim: Simulation, rng: random.Random) -> str:
    """`preempting_waiter` in a pool whose limit is lowered below what runs there."""
    return preempting_waiter(sim, rng, at_limits=True)


QUEUE_OPERATIONS = {
    "submit_waiting": submit_waiting,
    "preemption_policy": preemption_policy,
    "preempting_waiter": preempting_waiter,
    "preempting_waiter_at_limits": preempting_waiter_at_limits,
}
