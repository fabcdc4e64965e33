"""`limits.unready` (docs/provisioner.md), judged as the service writes: every lease transaction
and every `Ready#` mark is seen the moment it commits (`World.call_watchers`), with the pool's
partition read from moto's backend just before it (no other worker runs in between).

- **At every lease grant** in a pool whose stored limits have `unready`, the pool's unready
  instances before the grant (every open lease's `count`, plus its members without a `Ready#`
  mark) are at most what the limit allows: `N`, or `floor(P * I / 100)` for `P%`, `I` being the
  leased and member instances. As documented (and as in Karpenter), the limit gates new launches:
  a lease admitted within it may take the pool over it, so the lease's own count is not added.
- **A `Ready#` mark** names an instance EC2 shows running with both status checks `ok` at the
  moment it is written (the emulator's checks are `initializing` for a while after a launch or a
  start, so a mark that skips them is seen).
- **Nothing is launched past it**: every instance first seen in a pool whose stored limits have
  `unready` came under a lease granted in that pool for its request, and no request runs more
  instances in the pool than its leases there granted.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

GRANT = "limits.unready holds at each lease grant"
READY = "a Ready# mark names an instance passing its status checks"
LAUNCHED = "nothing launches past limits.unready"
TRANSACT = "dynamodb:TransactWriteItems"


@dataclass(frozen=True)
class PoolCount:
    """A pool's partition as one lease saw it: unready and all instances, and the limit."""

    unready: int
    instances: int
    limit: int | str | None

    @property
    def allowed(self) -> int | None:
        if self.limit is None:
            return None
        text = str(self.limit)
        if text.endswith("%"):
            return self.instances * int(text[:-1]) // 100
        return int(text)


@dataclass(frozen=True)
class Seen:
    """One write of the transaction about to commit: a lease put or a Ready# mark."""

    pool: str
    key: str  # the request id (lease) or the instance id (mark)
    count: int = 0
    before: PoolCount | None = None  # a lease's
    passing: bool = True  # a mark's: EC2's status checks passed when it was written


def unready_limit(document: str | None) -> int | str | None:
    """`spec.limits.unready` of a stored NodePool document (None: absent or unreadable)."""
    if document is None:
        return None
    try:
        limits = json.loads(document).get("spec", {}).get("limits") or {}
    except ValueError:
        return None
    found = limits.get("unready")
    return found if isinstance(found, int | str) else None


def count_partition(items: dict[str, dict[str, Any]], limit: int | str | None) -> PoolCount:
    """The pool's unready and all instances, from its Lease#, Member# and Ready# items."""
    leased = sum(int(a.get("count", 0)) for sk, a in items.items() if sk.startswith("Lease#"))
    members = {sk.removeprefix("Member#") for sk in items if sk.startswith("Member#")}
    ready = {sk.removeprefix("Ready#") for sk in items if sk.startswith("Ready#")}
    return PoolCount(leased + len(members - ready), leased + len(members), limit)


class UnreadyInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        # (thread, call): a watcher may make calls of its own inside another's (quota applies under
        # a lease transaction, quota_generations.py), so a call's `after` pairs with its `before`.
        self._pending: dict[tuple[int, int], list[Seen]] = {}
        self.granted: Counter[tuple[str, str]] = Counter()  # (pool, request) → instances leased
        self._judged: set[str] = set()
        self._running: Counter[tuple[str, str]] = Counter()

    # -- the service's writes, as they commit ---------------------------------------------------

    def before(self, operation: str, params: Any) -> None:
        if operation != TRANSACT:
            return
        seen = []
        for entry in params.get("TransactItems") or []:
            item = entry.get("Put", {}).get("Item", {})
            pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
            if not pk.startswith("Limits#"):
                continue
            pool = pk.removeprefix("Limits#")
            if sk.startswith("Lease#"):
                seen.append(self._lease(pool, sk.removeprefix("Lease#"), item))
            elif sk.startswith("Ready#"):
                instance = sk.removeprefix("Ready#")
                seen.append(Seen(pool, instance, passing=self.world.status_checks_passed(instance)))
        self._pending[threading.get_ident(), id(params)] = seen

    def _lease(self, pool: str, request_id: str, item: dict[str, Any]) -> Seen:
        stored = self.world.partition("NodePool").get(pool, {}).get("document")
        limit = unready_limit(None if stored is None else str(stored))
        before = count_partition(self.world.partition(f"Limits#{pool}"), limit)
        return Seen(pool, request_id, int(item.get("count", {}).get("N", "0")), before)

    def after(self, operation: str, params: Any) -> None:
        if operation != TRANSACT:
            return
        for seen in self._pending.pop((threading.get_ident(), id(params)), []):
            if seen.before is None:
                self._mark_judged(seen)
            else:
                self._grant_judged(seen, seen.before)

    def _mark_judged(self, seen: Seen) -> None:
        self.checks[READY] += 1
        if not seen.passing:
            self.base._violate(
                READY,
                f"pool {seen.pool}: {seen.key} marked ready while EC2 shows it not running"
                " with both status checks ok",
            )

    def _grant_judged(self, seen: Seen, before: PoolCount) -> None:
        self.granted[(seen.pool, seen.key)] += seen.count
        allowed = before.allowed
        if allowed is None:
            return
        self.checks[GRANT] += 1
        self.checks["seen: a lease in a pool with limits.unready"] += 1
        if before.unready > allowed:
            self.base._violate(
                GRANT,
                f"pool {seen.pool}: lease {seen.key} x{seen.count} granted with"
                f" {before.unready} of {before.instances} instances unready, limits.unready"
                f" {before.limit} allows {allowed}",
            )

    # -- every step -----------------------------------------------------------------------------

    def every_step(self) -> None:
        """Each instance first seen in a pool with `limits.unready` came under a lease there."""
        pools = self.world.partition("NodePool")
        for observed in list(self.world.instances.values()):
            if observed.instance_id in self._judged:
                continue
            self._judged.add(observed.instance_id)
            key = (observed.pool, observed.request_id)
            self._running[key] += 1
            stored = pools.get(observed.pool, {}).get("document")
            if unready_limit(None if stored is None else str(stored)) is None:
                continue
            self.checks[LAUNCHED] += 1
            if self._running[key] > self.granted[key]:
                self.base._violate(
                    LAUNCHED,
                    f"pool {observed.pool}: {observed.instance_id} is instance"
                    f" {self._running[key]} of {observed.request_id}, whose leases there"
                    f" granted {self.granted[key]}",
                )
