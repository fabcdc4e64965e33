"""Before a Capacity Block ends (issue 39, docs/static-capacity.md), judged at each quiescence
for the block pool (static_operations.py, BLOCK_END_POOL), its capacityBlockEnd drawn:

- **At most one extension per block end**: every extension ever bought of every block (the
  emulator's own list: no call), grouped by the block and the end it extends from, is one.
- **Never over replicas outside its ending blocks**: the pool's live instances not in a block
  within its lead of the end are at most its replicas (an evacuation's replacements run beside
  the block's instances until those go).
- **An opted-in request's count never drops** (launch requests with `capacityBlockEnd`,
  static_operations.OPT_IN_POOL, which allows on-demand): when a sync terminates a request's
  instances in a block before EC2 would, the request's live instances with its replacements'
  (`<id>.evac-...`) after it are at least what they were (what the request launched at most:
  its replacements run beside the block's instances until those go).
- **A replacement is never duplicated**: every instance ever launched for a replacement request
  id (a redelivery, a second sync, a crash between the note and the send) adds up to at most
  the count its record asked.
- **An evacuation never drops the count**: when a sync terminates the pool's instances in a
  block before EC2 would (30 minutes before its end), the pool's live instances after it are at
  least what they were, or its replicas when fewer (the pool allows on-demand of a type no other
  operation dries, so other capacity is always allowed).

Both evacuation checks look from the quiescence's start (before its drain) to after its last
sync, so an evacuation the quiescence's own syncs carry out is judged; an instance EC2 ended at
its block's end meanwhile lowers the floor (it is no evacuation's).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants
    from tests.simulation.world import World

OPT_IN_NO_DROP = "an evacuation never lets an opted-in request's count drop"
ONE_REPLACEMENT = "a replacement launches at most its count, once (never a duplicate)"
ONE_EXTENSION = "at most one Capacity Block extension bought per block end"
NOT_OVER = "a block-end pool is never over its replicas outside its ending blocks (quiescent)"
NO_DROP = "an evacuation never lets a static pool's count drop"
SEEN_EXTENSION = "seen: a Capacity Block extension bought (block ends extended)"
EC2_TERMINATES_BEFORE_END = 30 * 60


@dataclass(frozen=True)
class PoolLook:
    """The pool's live instances (id -> reservation) and the blocks' ends, at one moment."""

    live: dict[str, str | None]
    ends: dict[str, float | None]
    now: float


def look(world: World, pool: str) -> PoolLook:
    live = {
        o.instance_id: o.reservation_id
        for o in world.instances.values()
        if o.pool == pool and o.state in ("pending", "running")
    }
    ends = {rid: view.end for rid, view in world.reservations().items()}
    return PoolLook(live, ends, world.now)


def policy_of(document: dict[str, Any] | None) -> tuple[int, float] | None:
    """(replicas, lead in seconds) of the stored block pool; None: no policy acting."""
    spec = (document or {}).get("spec", {})
    policy = spec.get("capacityBlockEnd") or {}
    if spec.get("replicas") is None or policy.get("action", "Evacuate") == "None":
        return None
    return int(spec["replicas"]), 60.0 * int(policy.get("leadMinutes", 120))


class BlockEndInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self._invariants = invariants

    def one_extension_per_end(self, world: World) -> None:
        self._invariants.checks[ONE_EXTENSION] += 1
        bought = Counter(world.block_extensions())
        self._invariants.checks[SEEN_EXTENSION] = len(bought)
        for (rid, start), count in bought.items():
            if count > 1:
                self._invariants._violate(ONE_EXTENSION, f"{rid}: {count} extensions from {start}")

    def not_over(self, pool: str, seen: PoolLook, replicas: int, lead: float) -> None:
        self._invariants.checks[NOT_OVER] += 1
        outside = [i for i, rid in seen.live.items() if not _due(seen, rid, lead)]
        if len(outside) > replicas:
            self._invariants._violate(
                NOT_OVER, f"{pool}: {len(outside)} live outside ending blocks, replicas {replicas}"
            )

    def no_drop(self, pool: str, before: PoolLook, after: PoolLook, replicas: int) -> None:
        """Judged when a block's instance went before EC2 would have ended it."""
        _judge_no_drop(self._invariants, NO_DROP, pool, before, after, replicas, "replicas")


def _judge_no_drop(
    invariants: Invariants,
    name: str,
    who: str,
    before: PoolLook,
    after: PoolLook,
    bound: int,
    bound_word: str,
) -> None:
    """Once a block's instance went before EC2 would have ended it, `who` keeps as many live as
    lived before less those EC2 ended, at most `bound` (a static pool's replicas, or what an
    opted-in request launched): one judge for both."""
    early, ended = _gone(before, after)
    if not early:
        return
    invariants.checks[name] += 1
    floor = min(len(before.live) - len(ended), bound)
    if len(after.live) < floor:
        invariants._violate(
            name,
            f"{who}: {len(after.live)} live after its block's {early} went, was "
            f"{len(before.live)}, {bound_word} {bound}",
        )


def _due(seen: PoolLook, reservation_id: str | None, lead: float) -> bool:
    end = seen.ends.get(reservation_id) if reservation_id is not None else None
    return end is not None and seen.now >= end - lead


def lineage(world: World, original: str) -> dict[str, str | None]:
    """An opted-in request's live instances with its replacements' (id -> reservation)."""
    return {
        o.instance_id: o.reservation_id
        for o in world.instances.values()
        if (o.request_id == original or o.request_id.startswith(f"{original}.evac-"))
        and o.state in ("pending", "running")
    }


class OptInInvariants:
    """Requests that opted in (block_end_invariants' module docstring), judged at quiescence."""

    def __init__(self, invariants: Invariants) -> None:
        self._invariants = invariants

    def no_drop(self, original: str, before: PoolLook, after: PoolLook, held: int) -> None:
        """`held`: what the original launched (its replacements run beside its block's
        instances until those go: the lineage's floor is that, or fewer when fewer lived)."""
        _judge_no_drop(self._invariants, OPT_IN_NO_DROP, original, before, after, held, "launched")

    def replacements_once(self, world: World) -> None:
        launched = Counter(
            o.request_id for o in world.instances.values() if ".evac-" in o.request_id
        )
        for request_id, count in sorted(launched.items()):
            self._invariants.checks[ONE_REPLACEMENT] += 1
            record = world.record(request_id) or {}
            asked = int(record.get("requested", 0))
            if count > asked:
                self._invariants._violate(
                    ONE_REPLACEMENT, f"{request_id}: {count} instances launched, {asked} asked"
                )


def _gone(before: PoolLook, after: PoolLook) -> tuple[list[str], list[str]]:
    """The instances live in a block at `before` and gone at `after`: those gone before EC2
    would have ended them (30 minutes before the block's end), and those gone once it would."""
    early: list[str] = []
    ended: list[str] = []
    for i, rid in before.live.items():
        end = before.ends.get(rid) if rid is not None else None
        if i not in after.live and end is not None:
            (early if after.now < end - EC2_TERMINATES_BEFORE_END else ended).append(i)
    return early, ended
