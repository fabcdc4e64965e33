"""What the reservation sync keeps of each reservation and announces: the stored snapshot, the
coverage of a target or selector term, the flags it holds (exhausted until replenished) and the
crossings it announces (exhausted, replenished, utilization high, expiring, a block ending), decided
by `next_state`. The selection rules and snapshots themselves: domain/capacity/reservations.py."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.domain.capacity.idle_reservations import (
    IdlePeriod,
    IdlePolicy,
    IdleState,
    advance_idle,
)
from capacity_launcher.domain.capacity.reservations import (
    ACTIVE,
    BLOCK_TERMINATION_LEAD,
    EXPIRED_STATE,
    ReservationSnapshot,
    ReservationSource,
)
from capacity_launcher.domain.records.status import (
    BLOCK_EXPIRING,
    RESERVATION_ACTIVATED,
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRED,
    RESERVATION_EXPIRING,
    RESERVATION_REPLENISHED,
    RESERVATION_UNDERUTILIZED,
    RESERVATION_UTILIZATION_HIGH,
    Event,
)

# Snapshots older than this mean the sync has stopped: launchers then ask EC2 directly.
STALE_AFTER_SECONDS = 300


# EventBridge stamps an event's `time` to the second: the change happened within the second after.
EVENT_TIME_RESOLUTION = timedelta(seconds=1)


# Events already announced for the current crossing (re-armed when the condition clears).
EXHAUSTED = "exhausted"


UTILIZATION_HIGH = "utilizationHigh"


EXPIRING = "expiring"


BLOCK_ENDING = "blockEnding"


ENDED = "expired"


@dataclass(frozen=True)
class StoredReservation:
    """A snapshot as stored: what EC2 said at the last sync, plus what the workers learned since."""

    snapshot: ReservationSnapshot
    usage_by_requester: Mapping[str, int] = field(default_factory=dict)
    announced: frozenset[str] = frozenset()
    synced_at: datetime | None = None
    # Bumped by every launcher write, so a sync never overwrites what it has not seen.
    version: int = 0
    # Paid and idle instance-hours (domain/capacity/idle_reservations.py); None before a sync.
    idle: IdleState | None = None


@dataclass(frozen=True)
class InvalidSnapshot:
    """A stored snapshot that does not parse: left out of every read, reported to operators."""

    reservation_id: str
    reason: str


@dataclass(frozen=True)
class Coverage:
    """One reservation target or selector term the sync resolved, and when.

    `placements` is each member's (instance type, zone), which EC2 never changes for a
    reservation: a launcher reads only the snapshots of members its request could launch into.
    `room` is each member's room as the sync saw it (EC2's available count of an active one, 0
    otherwise): a launcher reads the snapshots of those with the most room first, and only as
    many as its request needs (`most_room_first`); the snapshot it then reads, strongly
    consistent, is what it decides and claims on."""

    key: str
    synced_at: float
    members: tuple[str, ...] = ()
    placements: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    room: Mapping[str, int] = field(default_factory=dict)

    def members_in(self, scope: ReservationScope, keep: Collection[str] = ()) -> tuple[str, ...]:
        """The members `scope` admits, and those in `keep` (a member of unknown placement,
        stored before placements were, is always admitted)."""
        return tuple(m for m in self.members if m in keep or scope.admits(self.placements.get(m)))


def most_room_first(
    members: Collection[str],
    coverage: Collection[Coverage],
    named: Collection[str] = (),
    landed: Collection[str] = (),
) -> list[str]:
    """`members` in the order a launcher reads their snapshots: those the NodeClass names by id
    first (a missing one is reported), then those `landed` in that the sync saw room in (a
    group's members the container's last launch into the group was put in: EC2 chooses the
    member, and the next launch is read where it most likely lands), then those of unknown room
    (a coverage item stored before room was), then the most room the sync saw first, as the
    launcher ranks reservations (Karpenter's rule: the most available first), equal ones by id."""
    room: dict[str, int] = {}
    for entry in coverage:
        room.update(entry.room)
    again = {m for m in landed if room.get(m, 1) > 0}
    return sorted(
        set(members),
        key=lambda m: (m not in named, m not in again, m in room, -room.get(m, 0), m),
    )


@dataclass(frozen=True)
class ReservationScope:
    """Where a request can launch: a reservation in another zone, or of an instance type the
    request does not allow, cannot serve it. None admits any."""

    zones: frozenset[str] | None = None
    instance_types: frozenset[str] | None = None

    def admits(self, placement: tuple[str, str] | None) -> bool:
        if placement is None:
            return True
        instance_type, zone = placement
        return (self.zones is None or zone in self.zones) and (
            self.instance_types is None or instance_type in self.instance_types
        )


ANYWHERE = ReservationScope()


def covered(
    keys: Collection[str], coverage: Mapping[str, Coverage], invalid: Collection[str], now: float
) -> bool:
    """The sync resolved every key recently, and every snapshot they reach parses."""
    fresh_after = now - STALE_AFTER_SECONDS
    members = {m for k in keys if k in coverage for m in coverage[k].members}
    if members & set(invalid):
        return False
    return all(k in coverage and coverage[k].synced_at >= fresh_after for k in keys)


def flag_holds(stored: StoredReservation, now: datetime, heartbeat: datetime | None = None) -> bool:
    """A worker's `exhausted` flag is honoured while a sync may still lift it: the sync looked at
    the snapshot within STALE_AFTER_SECONDS (it wrote it then, or `heartbeat`, the coverage it
    wrote that run, says it looked and found nothing to change). Past that (the sync has
    stopped) nothing would lift it: the ICE cache's entry, written with every flag, keeps the
    reservation out for its lifetime, as it does any dry offering, and EC2's room is launched
    into after it."""
    if not stored.snapshot.exhausted:
        return False
    looked = [t for t in (stored.synced_at, heartbeat) if t is not None]
    return not looked or (now - max(looked)).total_seconds() <= STALE_AFTER_SECONDS


def unchanged(prev: StoredReservation | None, new: StoredReservation) -> bool:
    """The sync found nothing to write: what EC2 says, the usage by requester and the crossings
    announced are as stored. Such a snapshot is not written again (its coverage, written every
    run, says the sync looked: `flag_holds`), so the sync's writes follow what changed."""
    return (
        prev is not None
        and prev.snapshot == new.snapshot
        and dict(prev.usage_by_requester) == dict(new.usage_by_requester)
        and prev.announced == new.announced
        and prev.idle == new.idle
    )


def event_time(text: object) -> datetime | None:
    """An EventBridge envelope's `time` (ISO 8601, `Z`), None when absent or unreadable: a
    release is then decided as if the event were on time."""
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) and text else None
    except ValueError:
        return None
    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)


def slot_counted_free(stored: StoredReservation | None, ended_at: datetime | None) -> bool:
    """Whether the snapshot already holds free the slot of an instance that ended at `ended_at`
    (the time of EC2's event): a sync wrote it from EC2 after that, and EC2 counted the slot
    free then. Giving it back again would show room EC2 does not have once a launch has taken
    the slot (a late event). An event's time is to the second, so a sync within that second
    may have looked before the end: the release is then due, as it is when no sync wrote since
    (one that found nothing to change writes nothing). Erring that way costs at most one
    CreateFleet that EC2 refuses, which flags the reservation until the next sync; a release
    refused wrongly (EC2 had not freed the slot yet when the sync looked, as while an instance
    is still shutting down) hides one slot until the next sync."""
    return (
        stored is not None
        and ended_at is not None
        and stored.synced_at is not None
        and stored.synced_at >= ended_at + EVENT_TIME_RESOLUTION
    )


def more_room_seen(
    held: StoredReservation,
    seen: ReservationSnapshot,
    now: datetime,
    heartbeat: datetime | None = None,
) -> bool:
    """EC2, looked at after the snapshot `held` was read, shows room it does not hold: the
    reservation grew (ModifyCapacityReservation), or an instance the service did not launch left
    it, since the sync. A flag that holds stays (only a sync lifts it); one that no longer holds
    (`flag_holds`) hides any room EC2 shows."""
    if seen.state != ACTIVE:
        return False
    if held.snapshot.exhausted:
        return seen.available > 0 and not flag_holds(held, now, heartbeat)
    return seen.available > held.snapshot.available


def with_room_held(
    source: ReservationSource, held: Mapping[str, ReservationSnapshot]
) -> ReservationSource:
    """A launcher's look at EC2, each reservation with at least the room its snapshot holds
    now: slots given back since the look, or before EC2 counts them (an instance released, a
    claim returned), are room; the claim before each CreateFleet decides on the snapshot."""
    reservations = tuple(
        replace(r, available=held[r.reservation_id].available)
        if r.reservation_id in held and held[r.reservation_id].available > r.available
        else r
        for r in source.reservations
    )
    return ReservationSource(source.target, reservations)


def with_flags(source: ReservationSource, flagged: Collection[str]) -> ReservationSource:
    """EC2's live view, still skipping what a worker found exhausted since the last sync (the
    ids in `flagged`: flags that hold)."""
    reservations = tuple(
        replace(r, exhausted=True) if r.reservation_id in flagged else r
        for r in source.reservations
    )
    return ReservationSource(source.target, reservations)


@dataclass(frozen=True)
class Thresholds:
    utilization_high: float
    expiring_horizon: timedelta
    # EC2 terminates a block's instances 30 minutes before its end: warn owners before that.
    block_expiring_horizon: timedelta = timedelta(minutes=60)
    # Capacity Reservation Underutilized: below this utilization for a whole period.
    idle: IdlePolicy = field(default_factory=IdlePolicy)


@dataclass(frozen=True)
class HeldInstance:
    """One of our instances in a reservation, and the request that launched it (if known)."""

    instance_id: str
    request_id: str | None = None


def next_state(
    prev: StoredReservation | None,
    seen: ReservationSnapshot,
    usage_by_requester: Mapping[str, int],
    thresholds: Thresholds,
    now: datetime,
    held: Sequence[HeldInstance] = (),
) -> tuple[StoredReservation, list[Event]]:
    """The snapshot to store and the events of the crossings since `prev` (each once).

    `held` are our instances in it, named when a block's end will terminate them."""
    announced = set(prev.announced) if prev else set()
    events: list[str] = []
    exhausted = _availability_crossings(prev, seen, announced, events)
    _utilization_crossing(seen, thresholds, announced, events)
    _ending_crossings(seen, thresholds, now, announced, events)
    # An expiry seen on the first sync is history, not news.
    if seen.state == EXPIRED_STATE and prev is not None and ENDED not in announced:
        events.append(RESERVATION_EXPIRED)
        announced.add(ENDED)
    idle, underutilized = advance_idle(prev.idle if prev else None, seen, thresholds.idle, now)
    if underutilized is not None:
        events.append(RESERVATION_UNDERUTILIZED)
    stored = StoredReservation(
        snapshot=replace(seen, exhausted=exhausted),
        usage_by_requester={k: n for k, n in usage_by_requester.items() if k},
        announced=frozenset(announced),
        synced_at=now,
        version=prev.version + 1 if prev else 0,
        idle=idle,
    )
    return stored, [
        Event(t, _detail(stored, t, thresholds, held, now, underutilized)) for t in events
    ]


def _availability_crossings(
    prev: StoredReservation | None,
    seen: ReservationSnapshot,
    announced: set[str],
    events: list[str],
) -> bool:
    """Activation, replenishment and exhaustion; whether the snapshot stays exhausted."""
    exhausted = prev.snapshot.exhausted if prev else False
    # A scheduled reservation or block that started: announced as such, never as "replenished".
    activated = prev is not None and prev.snapshot.state != ACTIVE and seen.state == ACTIVE
    if activated:
        events.append(RESERVATION_ACTIVATED)
    if seen.state == ACTIVE and seen.available > 0:
        was_empty = prev is not None and (
            prev.snapshot.exhausted or prev.snapshot.available == 0 or EXHAUSTED in announced
        )
        if was_empty and not activated:
            events.append(RESERVATION_REPLENISHED)
        exhausted = False
        announced.discard(EXHAUSTED)
    elif seen.state == ACTIVE and seen.total > 0 and EXHAUSTED not in announced:
        events.append(RESERVATION_EXHAUSTED)
        announced.add(EXHAUSTED)
    return exhausted


def _utilization_crossing(
    seen: ReservationSnapshot, thresholds: Thresholds, announced: set[str], events: list[str]
) -> None:
    if seen.state == ACTIVE and seen.total and seen.utilization >= thresholds.utilization_high:
        if UTILIZATION_HIGH not in announced:
            events.append(RESERVATION_UTILIZATION_HIGH)
            announced.add(UTILIZATION_HIGH)
    else:
        announced.discard(UTILIZATION_HIGH)


def _ending_crossings(
    seen: ReservationSnapshot,
    thresholds: Thresholds,
    now: datetime,
    announced: set[str],
    events: list[str],
) -> None:
    block = seen.kind.ends_early
    ending = seen.end_date is not None and seen.end_date - now <= thresholds.expiring_horizon
    # A block always ends at its end date: it gets its own, shorter warning below.
    if seen.state == ACTIVE and ending and not block:
        if EXPIRING not in announced:
            events.append(RESERVATION_EXPIRING)
            announced.add(EXPIRING)
    else:
        announced.discard(EXPIRING)
    block_ending = (
        block
        and seen.end_date is not None
        and seen.end_date - now <= thresholds.block_expiring_horizon
    )
    if seen.state == ACTIVE and block_ending and BLOCK_ENDING not in announced:
        events.append(BLOCK_EXPIRING)
        announced.add(BLOCK_ENDING)


def _detail(
    stored: StoredReservation,
    detail_type: str,
    thresholds: Thresholds,
    held: Sequence[HeldInstance],
    now: datetime,
    underutilized: IdlePeriod | None = None,
) -> dict[str, Any]:
    s = stored.snapshot
    detail: dict[str, Any] = {
        "capacityReservationId": s.reservation_id,
        "instanceType": s.instance_type,
        "zone": s.zone,
        "state": s.state,
        "total": s.total,
        "available": s.available,
        "utilization": round(s.utilization, 4),
        "reservationType": s.reservation_type,
        "interruptible": s.interruptible,
        "startDate": s.start_date.isoformat() if s.start_date else None,
        "endDate": s.end_date.isoformat() if s.end_date else None,
        "groups": list(s.groups),
        "usageByRequester": dict(stored.usage_by_requester),
    }
    if detail_type == RESERVATION_UTILIZATION_HIGH:
        detail["threshold"] = thresholds.utilization_high
    if detail_type == RESERVATION_UNDERUTILIZED and underutilized is not None:
        detail.update(_underutilized(underutilized, thresholds.idle))
    if detail_type == RESERVATION_EXPIRING:
        detail["horizonHours"] = thresholds.expiring_horizon.total_seconds() / 3600
    if detail_type == BLOCK_EXPIRING and s.end_date is not None:
        # EC2 terminates every instance in a block 30 minutes before its end date.
        terminated_at = s.end_date - BLOCK_TERMINATION_LEAD
        detail["instancesTerminatedAt"] = terminated_at.isoformat()
        detail["secondsUntilTermination"] = max(int((terminated_at - now).total_seconds()), 0)
        detail["instances"] = [
            {"instanceId": h.instance_id, "requestId": h.request_id}
            for h in sorted(held, key=lambda h: h.instance_id)
        ]
        detail["requestIds"] = sorted({h.request_id for h in held if h.request_id})
    return detail


def _underutilized(period: IdlePeriod, policy: IdlePolicy) -> dict[str, Any]:
    """What `Capacity Reservation Underutilized` adds: the period and its hours."""
    return {
        "threshold": policy.threshold,
        "periodHours": round(policy.period.total_seconds() / 3600, 4),
        "periodStart": period.start.isoformat(),
        "periodEnd": period.end.isoformat(),
        "paidInstanceHours": round(period.paid_hours, 4),
        "usedInstanceHours": round(period.used_hours, 4),
        "idleInstanceHours": round(period.idle_hours, 4),
        "periodUtilization": round(period.utilization, 4),
        "peakUtilization": round(period.peak_utilization, 4),
    }
