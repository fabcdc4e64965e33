"""An expired lease against the pool's limits (issue 34, item 1), drawn from the seed: a worker
killed between its lease and its intent (its lease left open until it expires), the clock moved
past that lease with the sync stopped (nobody reclaims it), and a redelivery in that window
under whose launch the late sync runs and another request asks the same pool for its room.

Before the fix the redelivery took the expired lease up as it was, the sync reclaimed it under
the launch, the other request leased the room it freed, and both launched: the invariant "live
<= limit (every step)" catches that pool over its limit (docs/simulation.md)."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

from capacity_launcher.settings import get_settings
from tests.simulation.emulator import AT_INTENT
from tests.simulation.operations import POOLS, _limit, request_body

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation


def _limited_pools(sim: Simulation) -> list[str]:
    return [p for p in POOLS if p in sim.catalog.pools and _limit(sim.catalog.pools[p])]


def kill_after_lease(sim: Simulation, rng: random.Random) -> str:
    """A request into a limited pool, served now by a worker killed before it writes its first
    intent: its lease stays open, nothing launched under it, until the lease expires."""
    pools = _limited_pools(sim)
    if not pools:
        return "no limited pool"
    pool = rng.choice(pools)
    body = request_body(sim, rng)
    body["nodePool"] = pool
    body.pop("requirements", None)
    sim.send([body], via_bus=False)
    messages = sim.world.receive_batch()
    if not messages:
        return "nothing visible"
    sim.pending_crash = AT_INTENT
    sim.poll_batch(messages)
    return f"{pool} {body['requestId']}"


def expire_unswept(sim: Simulation, rng: random.Random) -> str:
    """The clock moves past every open lease while the sync does not run (a late sync): expired
    leases stay open until it comes back. Mostly the redeliveries due meanwhile come at once, in
    that window (`redeliver_in_window`); otherwise the loop serves them as any message."""
    seconds = get_settings().limit_lease_seconds + rng.uniform(1.0, 120.0)
    paused = sim.pause_sync(seconds + 300.0)
    sim.world.emulator.clock.advance(seconds)
    moved = f"moved {seconds:.0f}s, sync paused {paused}"
    if rng.random() < 0.7:
        return f"{moved}; {redeliver_in_window(sim, rng)}"
    return moved


class _UnderTheLaunch:
    """A call watcher: before the served batch's first CreateFleet (its leases taken or taken up),
    the late sync runs, and another container serves another request for all of the pool's
    room; each once, and never from inside what it runs itself."""

    def __init__(self, sim: Simulation, rng: random.Random, pool: str) -> None:
        self._sim, self._rng, self._pool = sim, rng, pool
        self._busy = False
        self.fired = False

    def before(self, operation: str, _params: Any) -> None:
        if self.fired or self._busy or operation != "ec2:CreateFleet":
            return
        self._busy, self.fired = True, True
        try:
            sim = self._sim
            sim.note_invoked(sim.world.run_sync(arm=False))
            body = request_body(sim, self._rng)
            body.update(nodePool=self._pool, count=_limit(sim.catalog.pools[self._pool]) or 1)
            for key in ("requirements", "minCount", "singleZone"):
                body.pop(key, None)
            sim.send([body], via_bus=False)
            other = sim.world.receive_batch()
            if other:
                container = 1 % len(sim.world.launchers)
                sim.note_invoked(sim.world.invoke_launcher(container, other, arm=False), other)
        finally:
            self._busy = False

    def after(self, _operation: str, _params: Any) -> None:
        return


def redeliver_in_window(sim: Simulation, rng: random.Random) -> str:
    """What is visible now (redeliveries among it) served by one container; under its launch the
    late sync runs and another request asks the same pool for its room."""
    messages = sim.world.receive_batch()
    if not messages:
        return "nothing visible"
    pools = [_pool_of(m["Body"]) for m in messages]
    pool = next((p for p in pools if p in _limited_pools(sim)), None)
    if pool is None:
        sim.poll_batch(messages)
        return "no limited pool in the batch"
    watcher = _UnderTheLaunch(sim, rng, pool)
    sim.world.call_watchers.append(watcher)
    try:
        sim.poll_batch(messages)
    finally:
        sim.world.call_watchers.remove(watcher)
    done = "sync and another request under the launch" if watcher.fired else "no launch"
    return f"{pool}: {done}"


def _pool_of(body: str) -> str | None:
    try:
        found = json.loads(body)
    except ValueError:
        return None
    pool = found.get("nodePool") if isinstance(found, dict) else None
    return pool if isinstance(pool, str) else None


LEASE_OPERATIONS = {
    "kill_after_lease": kill_after_lease,
    "expire_unswept": expire_unswept,
    "redeliver_in_window": redeliver_in_window,
}
