"""A static NodePool's plan for one sync minute: how many to launch (and where), which to stop.

A static pool (`spec.replicas`, Karpenter's static capacity) keeps that many instances running.
Each minute the sync reads the pool's members and the launches it sent that have not ended, and
asks `plan`:

- **Short** (members + launches in flight < replicas, capped by `limits.instances`): one launch
  per missing instance, each pinned to the zone that has the fewest of the pool's instances and
  launches (ties by name), skipping zones where a launch of the pool found no capacity lately
  (`dry_zones`); when every zone is dry, the launch goes unpinned.
- **Over** (members > replicas, or > `limits.instances`: a member stopped, replaced and started
  again counts back): the extra members are terminated, in this order: those in a Capacity
  Block near its end first (`leaving`: EC2 ends them anyway), then those not in a
  reservation before those in one (a reservation is paid for whether used or not), then the
  newest first (the least running work lost), then by id. Launches in flight are not counted
  here: one that lands over replicas is terminated the next minute.

While the pool evacuates a Capacity Block (`evacuating`: its instances there do not count), its
launches avoid that block and every other one already due under its policy (`due`, `avoid`):
one landed in a due twin would not count either, and the cut would take it the next minute.

With `replicasFrom: Reserved` the target is `reserved_capacity`: what the pool's reservations
hold while active (a future-dated one counts from its activation; a Capacity Block stops
counting once too close to its end to launch into, so its instances are scaled back before EC2
ends them), `replicas` at most; its launches go into reservations only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from capacity_launcher.domain.capacity.block_ends import Noted
from capacity_launcher.domain.capacity.offerings import RESERVED
from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot

# How long a zone where a static launch found no capacity is skipped.
DRY_ZONE_SECONDS = 300
# How long a launch sent is counted in flight without a record: then taken for lost.
IN_FLIGHT_SECONDS = 900
# In `dry_until`: every zone, while a launch of the pool was Rejected lately (a NodeClass
# missing, a pool refused): the pool sends nothing until then.
HOLD_ALL_ZONES = "*"
# The request ids of a static pool's launches: only the sync's may name a static pool.
STATIC_PREFIX = "static-"


@dataclass(frozen=True)
class StaticMember:
    """One running instance of the pool, as its instance record says."""

    instance_id: str
    zone: str | None
    capacity_type: str
    launched_at: str | None  # ISO 8601; None sorts oldest
    reservation_id: str | None = None


@dataclass(frozen=True)
class InFlight:
    """A launch the sync sent for the pool and that has not ended."""

    request_id: str
    zone: str | None
    sent_at: int


@dataclass(frozen=True)
class StaticState:
    """What the sync keeps of a static pool between minutes: its launches in flight, the zones
    where one found no capacity (until when), the item's version (None: never written), and
    what the pool chose for each ending Capacity Block (by reservation id: block_ends.py)."""

    in_flight: tuple[InFlight, ...] = ()
    dry_until: dict[str, int] = field(default_factory=dict)
    version: int | None = None
    block_ends: dict[str, Noted] = field(default_factory=dict)


@dataclass(frozen=True)
class StaticPlan:
    launch: tuple[str | None, ...] = ()  # one zone (None: any) per instance to launch
    terminate: tuple[str, ...] = ()
    # The Capacity Blocks the launches must not go into: where an instance would not count.
    avoid: tuple[str, ...] = ()

    @property
    def idle(self) -> bool:
        return not self.launch and not self.terminate


def plan(
    replicas: int,
    limit: int | None,
    members: Sequence[StaticMember],
    in_flight: Sequence[InFlight],
    zones: Sequence[str],
    dry_zones: Collection[str] = (),
    leaving: Collection[str] = (),
    evacuating: Collection[str] = (),
    due: Collection[str] = (),
) -> StaticPlan:
    """What the pool does this minute (see the module docstring). `leaving`: the reservations
    whose instances EC2 ends soon (a Capacity Block near its end): theirs go first.
    `evacuating`: the blocks the pool evacuates (domain/capacity/block_ends.py): their
    instances do not count toward replicas, so replacements are launched for them (within
    `limit`, which counts them), and they are terminated only as those run. `due`: every
    active block already due under the pool's `capacityBlockEnd`, held or not. While the pool
    evacuates, its launches go into none of them (`avoid`): a replacement landed in a twin
    block, due too, would not count the next minute either (its block evacuated in turn), and
    the cut, counting it among the members, would take it, the newest, while the fill launched
    another: a launch and a termination each minute for as long as the blocks last."""
    # Never over the limit either: a member stopped, replaced and started again counts back.
    target = replicas if limit is None else min(replicas, limit)
    staying = [m for m in members if m.reservation_id not in evacuating]
    over = len(members) - target
    terminate = tuple(_first_to_go(members, {*leaving, *evacuating})[:over]) if over > 0 else ()
    missing = target - len(staying) - len(in_flight)
    if limit is not None:  # room under the limit, the evacuees still counted
        missing = min(missing, limit - len(members) + len(terminate) - len(in_flight))
    if missing <= 0:
        return StaticPlan(terminate=terminate)
    avoid = tuple(sorted({*evacuating, *due})) if evacuating else ()
    placed = Counter(m.zone for m in staying) + Counter(f.zone for f in in_flight)
    usable = [z for z in sorted(zones) if z not in dry_zones]
    launch: list[str | None] = []
    for _ in range(missing):
        if not usable:
            launch.append(None)
            continue
        zone = min(usable, key=lambda z: (placed[z], z))
        placed[zone] += 1
        launch.append(zone)
    return StaticPlan(launch=tuple(launch), terminate=terminate, avoid=avoid)


def reserved_capacity(reservations: Iterable[ReservationSnapshot], now: datetime) -> int:
    """The instances the pool's reservations hold now: each active one's total, once (a
    reservation reached through two targets counts once), none of a Capacity Block too close to
    its end to launch into (`ending`: EC2 terminates its instances 30 minutes before the end)."""
    held = {
        r.reservation_id: r.total for r in reservations if r.state == ACTIVE and not r.ending(now)
    }
    return sum(held.values())


def _first_to_go(members: Sequence[StaticMember], leaving: Collection[str] = ()) -> list[str]:
    """In a leaving reservation first; then not reserved before reserved; newest first; by id."""
    newest_first = sorted(members, key=lambda m: (m.launched_at or "", m.instance_id), reverse=True)
    ordered = sorted(
        newest_first,
        key=lambda m: (m.reservation_id not in leaving, m.capacity_type == RESERVED),
    )
    return [m.instance_id for m in ordered]


def leaving_reservations(reservations: Iterable[ReservationSnapshot], now: datetime) -> set[str]:
    """The active reservations `reserved_capacity` no longer counts: blocks near their end."""
    return {r.reservation_id for r in reservations if r.state == ACTIVE and r.ending(now)}


def static_request_id(pool: str, now: int, index: int) -> str:
    """The request id of a static pool's `index`-th launch of the minute `now`."""
    return f"{STATIC_PREFIX}{pool}-{now}-{index}"


def is_static_launch(request_id: str, pool: str, state: StaticState | None = None) -> bool:
    """Whether `request_id` is a launch the sync sent for static pool `pool`: shaped as the
    sync names them and, given the pool's state, recorded there in flight (the sync records a
    launch before it sends it; an id that is only shaped so is a producer's)."""
    shaped = request_id.startswith(f"{STATIC_PREFIX}{pool}-")
    if state is None:
        return shaped
    return shaped and any(f.request_id == request_id for f in state.in_flight)


def still_dry(dry_until: dict[str, int], now: int) -> dict[str, int]:
    """The zones still skipped at `now`."""
    return {zone: until for zone, until in dry_until.items() if until > now}
