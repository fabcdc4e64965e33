"""Issue 37: requests that may wait (`waitForCapacityUntil`) for room in their pool's admission
queue, some naming a PriorityClass; their invariants are queue_invariants.py's."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tests.simulation.priority_invariants import PRIORITY_CLASS

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

# Waits of a few minutes to an hour: deadlines pass within a soak's simulated time, and the
# clock jumps (advance_clock) carry others past theirs.
WAITS_SECONDS = (120, 300, 900, 1800, 3600)
QUEUE_WEIGHTS: dict[str, float] = {"submit_waiting": 8}


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


QUEUE_OPERATIONS = {"submit_waiting": submit_waiting}
