"""Capacity reservations: which ones a NodeClass selects, and what a snapshot of one says.

The rules live here once. A NodeClass names one target (a reservation id or a group ARN) or
selector terms (`ReservationSelection`); a term matches a reservation as
DescribeCapacityReservations filters it (`term_matches`); a snapshot says what is available,
used, claimable, and which crossings (exhausted, replenished, utilization high, expiring) to
announce (`next_state`). service/reservations.py applies them to the shared snapshots, or to
EC2's live view when the snapshots are stale; the adapters only translate.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from capacity_launcher.domain.apis.config import CapacityReservationSelectorTerm, NodeClass
from capacity_launcher.domain.capacity.offerings import RESERVED, Offering
from capacity_launcher.domain.records.status import (
    BLOCK_EXPIRING,
    RESERVATION_ACTIVATED,
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRED,
    RESERVATION_EXPIRING,
    RESERVATION_REPLENISHED,
    RESERVATION_UTILIZATION_HIGH,
    Event,
)

ACTIVE = "active"
EXPIRED_STATE = "expired"
# States a reservation passes through before `active` (EC2's "Capacity Reservation states"):
# a new ODCR is `pending`, a future-dated one `assessing`, `scheduled` or `delayed`, a
# Capacity Block `payment-pending` or `scheduled`. Such a reservation can still arrive.
UPCOMING_STATES = frozenset({"pending", "payment-pending", "assessing", "scheduled", "delayed"})
# EC2 terminates a Capacity Block's instances this long before its end date.
BLOCK_TERMINATION_LEAD = timedelta(minutes=30)
# How long an instance launched into a block must have before EC2 terminates it for the launch
# to be worth it: a GPU instance boots, joins and gets work in minutes, not seconds. A block
# is not launched into from BLOCK_TERMINATION_LEAD + BLOCK_BOOT_MARGIN before its end
# (docs/placement.md, Capacity Blocks).
BLOCK_BOOT_MARGIN = timedelta(minutes=15)
BLOCK_ENDING_REASON = "BlockEnding"
# EC2's ReservationType values (Karpenter's `capacity-reservation-type` label takes the same ones).
DEFAULT_TYPE = "default"
CAPACITY_BLOCK = "capacity-block"
# The launch market each kind needs: EC2 refuses a block or an interruptible reservation otherwise.
BLOCK_MARKET = "capacity-block"
INTERRUPTIBLE_MARKET = "interruptible-capacity-reservation"
# CreateFleet's DefaultTargetCapacityType for each market (on-demand for ordinary ODCRs).
FLEET_CAPACITY_TYPES = {BLOCK_MARKET: "capacity-block", INTERRUPTIBLE_MARKET: "reserved-capacity"}
# Snapshots older than this mean the sync has stopped: launchers then ask EC2 directly.
STALE_AFTER_SECONDS = 300
# A coverage key names one target or selector term the sync resolved (stored beside snapshots).
COVERAGE_PREFIX = "Covered#"

# Events already announced for the current crossing (re-armed when the condition clears).
EXHAUSTED = "exhausted"
UTILIZATION_HIGH = "utilizationHigh"
EXPIRING = "expiring"
BLOCK_ENDING = "blockEnding"
ENDED = "expired"

TARGET_ID_FIELD = "spec.capacityReservationSpec.capacityReservationTarget.capacityReservationId"
TARGET_GROUP_FIELD = (
    "spec.capacityReservationSpec.capacityReservationTarget.capacityReservationResourceGroupArn"
)
SELECTOR_TERMS_FIELD = "spec.capacityReservationSelectorTerms"

# EC2's CapacityReservationPreference values a launch template may carry.
Preference = Literal["capacity-reservations-only", "open", "none"]
ONLY_RESERVATIONS: Preference = "capacity-reservations-only"


@dataclass(frozen=True)
class ReservationSnapshot:
    """What is known of one capacity reservation: from EC2 directly or from the shared sync."""

    reservation_id: str
    instance_type: str
    zone: str
    state: str
    total: int
    available: int
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    instance_match_criteria: str = "open"
    owner_id: str | None = None
    end_date: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    reservation_type: str = DEFAULT_TYPE
    interruptible: bool = False
    start_date: datetime | None = None
    # Set when an insufficient-capacity error said it is full, until a sync sees capacity again.
    exhausted: bool = False
    # The cluster placement group it was created in (the name: PlacementGroupArn's last path
    # part); EC2 gives its capacity only to launches placed in that group.
    placement_group: str | None = None

    @property
    def usable(self) -> bool:
        return self.state == ACTIVE and self.available > 0 and not self.exhausted

    def ending(self, now: datetime) -> bool:
        """A Capacity Block too close to its end to launch into: EC2 starts terminating its
        instances BLOCK_TERMINATION_LEAD before the end, and a launch needs BLOCK_BOOT_MARGIN
        of life before that."""
        if self.reservation_type != CAPACITY_BLOCK or self.end_date is None:
            return False
        return now >= self.end_date - BLOCK_TERMINATION_LEAD - BLOCK_BOOT_MARGIN

    @property
    def upcoming(self) -> bool:
        """Not active yet, and still expected to be (scheduled, future-dated, being paid for)."""
        return self.state in UPCOMING_STATES

    @property
    def used(self) -> int:
        return max(self.total - self.available, 0)

    @property
    def utilization(self) -> float:
        return self.used / self.total if self.total else 0.0

    @property
    def market(self) -> str | None:
        """The InstanceMarketOptions.MarketType a launch into it needs (None: on-demand)."""
        if self.reservation_type == CAPACITY_BLOCK:
            return BLOCK_MARKET
        return INTERRUPTIBLE_MARKET if self.interruptible else None

    def offering(self) -> Offering:
        return Offering(RESERVED, self.instance_type, self.zone, self.reservation_id)

    def claimable(self, count: int) -> int:
        """How many of `count` slots a worker may claim now (none of an exhausted one)."""
        if self.exhausted or self.available <= 0:
            return 0
        return min(count, self.available)


@dataclass(frozen=True)
class ReservedTarget:
    """How a reserved attempt addresses EC2: one reservation id, or one reservation group ARN."""

    reservation_id: str | None = None
    group_arn: str | None = None
    # The market of the reservations it launches into (a group's members of other kinds are not).
    market: str | None = None
    # The cluster placement group of the reservations it launches into: every instance of the
    # attempt is placed in it, or EC2 does not give it their capacity (docs/placement.md,
    # Reservations in a cluster placement group).
    placement_group: str | None = None

    def __post_init__(self) -> None:
        if (self.reservation_id is None) == (self.group_arn is None):
            raise ValueError("a reserved target names exactly one reservation id or group ARN")

    @property
    def name(self) -> str:
        return self.reservation_id or self.group_arn or ""


@dataclass(frozen=True)
class ReservationSource:
    """One reservation target of a NodeClass and the reservations it can reach."""

    target: ReservedTarget
    reservations: tuple[ReservationSnapshot, ...]


def by_market(source: ReservationSource) -> list[ReservationSource]:
    """One source per market its reservations need and per cluster placement group they are
    in: one CreateFleet launches in one market, and places its instances in one group.

    Capacity Blocks go one source each, targeted by their own reservation id: EC2 launches into
    a block only by its id, never through a group ("Launch instances using Capacity Blocks"),
    and an EC2 Fleet into one block at a time (Karpenter keeps exactly one per launch).

    A reservation created in a cluster placement group serves only launches placed in that
    group ("Use Capacity Reservations with cluster placement groups"); a reservation group
    named with a placement group uses its members in that placement group ("Using Capacity
    Reservation in cluster placement groups with a Capacity Reservation group"). So the members
    of a group are launched into per placement group, each split naming its group."""
    splits: dict[tuple[str | None, str | None], list[ReservationSnapshot]] = {}
    for reservation in source.reservations:
        splits.setdefault((reservation.market, reservation.placement_group), []).append(reservation)
    if not splits:
        return [source]
    split: list[ReservationSource] = []
    for (market, placement_group), members in splits.items():
        if market == BLOCK_MARKET and (len(members) > 1 or source.target.group_arn):
            split += [
                ReservationSource(
                    ReservedTarget(
                        reservation_id=block.reservation_id,
                        market=market,
                        placement_group=placement_group,
                    ),
                    (block,),
                )
                for block in members
            ]
        else:
            target = replace(source.target, market=market, placement_group=placement_group)
            split.append(ReservationSource(target, tuple(members)))
    return split


@dataclass(frozen=True)
class ReservationUse:
    """How one launch may use reservations (its launch template's reservation specification)."""

    preference: Preference
    target: ReservedTarget | None = None
    market: str | None = None


def reservation_use(
    node_class: NodeClass, target: ReservedTarget | None, *, spot: bool = False
) -> ReservationUse:
    """A reserved attempt is `capacity-reservations-only` with its target, so EC2 never falls back
    to on-demand inside it; spot never uses reservations; others carry the NodeClass preference."""
    if target is not None:
        return ReservationUse(ONLY_RESERVATIONS, target, target.market)
    if spot:
        return ReservationUse("none")
    return ReservationUse(node_class.spec.reservation_preference)


def target_key(id_or_arn: str) -> str:
    return f"{COVERAGE_PREFIX}target:{id_or_arn}"


def selector_key(term: CapacityReservationSelectorTerm) -> str:
    canonical = term.model_dump(mode="json", by_alias=True, exclude_none=True)
    return f"{COVERAGE_PREFIX}selector:{json.dumps(canonical, sort_keys=True)}"


# What a selector term asks DescribeCapacityReservations for: active reservations, and those that
# will be (so the sync sees a scheduled block start, and a request may wait for it).
SELECTABLE_STATES = (ACTIVE, *sorted(UPCOMING_STATES))


def term_matches(term: CapacityReservationSelectorTerm, reservation: ReservationSnapshot) -> bool:
    """A selector term's fields ANDed, as DescribeCapacityReservations filters them (active or
    upcoming unless the term names an id; only active ones are ever launched into)."""
    if term.id:
        return reservation.reservation_id == term.id
    if reservation.state not in SELECTABLE_STATES:
        return False
    if term.owner_id and reservation.owner_id != term.owner_id:
        return False
    if (
        term.instance_match_criteria
        and reservation.instance_match_criteria != term.instance_match_criteria
    ):
        return False
    return all(reservation.tags.get(k) == v for k, v in (term.tags or {}).items())


@dataclass(frozen=True)
class ReservationSelection:
    """What a NodeClass asks of reservations: one target (id or group ARN), or selector terms."""

    target: ReservedTarget | None = None
    terms: tuple[CapacityReservationSelectorTerm, ...] = ()

    def __bool__(self) -> bool:
        return self.target is not None or bool(self.terms)

    def coverage_keys(self) -> list[str]:
        """The coverage keys its reservations are resolved from."""
        if self.target is not None:
            return [target_key(self.target.name)]
        return [selector_key(t) for t in self.terms]

    @property
    def field(self) -> str:
        """The NodeClass field that says how its reservations are found (blamed when AWS refuses
        to describe them: a group that does not exist, say)."""
        if self.target is None:
            return SELECTOR_TERMS_FIELD
        return TARGET_ID_FIELD if self.target.reservation_id else TARGET_GROUP_FIELD

    def named(self) -> list[tuple[str, str]]:
        """(document field, reservation id) for every reservation it names by id."""
        if self.target is not None:
            rid = self.target.reservation_id
            return [(TARGET_ID_FIELD, rid)] if rid else []
        return [
            (f"spec.capacityReservationSelectorTerms[{index}].id", term.id)
            for index, term in enumerate(self.terms)
            if term.id
        ]

    def named_ids(self) -> frozenset[str]:
        return frozenset(rid for _, rid in self.named())

    def resolve(
        self,
        reservations: Mapping[str, ReservationSnapshot],
        members: Mapping[str, Sequence[str]],
    ) -> list[ReservationSource]:
        """Its sources, given reservations by id and the ids each coverage key reaches (a group's
        members, a term's candidates): a target is one source, each term match is its own."""
        target = self.target
        if target is not None and target.reservation_id is not None:
            found = reservations.get(target.reservation_id)
            return [ReservationSource(target, (found,) if found else ())]
        if target is not None:
            reached = members.get(target_key(target.name), ())
            return [
                ReservationSource(
                    target, tuple(reservations[m] for m in sorted(reached) if m in reservations)
                )
            ]
        selected: dict[str, ReservationSnapshot] = {}
        for term in self.terms:
            for member in members.get(selector_key(term), ()):
                reservation = reservations.get(member)
                if reservation is not None and term_matches(term, reservation):
                    selected.setdefault(member, reservation)
        return [
            ReservationSource(ReservedTarget(reservation_id=k), (selected[k],))
            for k in sorted(selected)
        ]

    def missing(self, sources: Iterable[ReservationSource]) -> list[tuple[str, str]]:
        """(field, id) of the reservations it names that are not active among `sources`."""
        found = {r.reservation_id for s in sources for r in s.reservations if r.state == ACTIVE}
        return [(f, rid) for f, rid in self.named() if rid not in found]


def selection_of(node_class: NodeClass) -> ReservationSelection:
    """The NodeClass's reservations: its target wins; otherwise its selector terms, if any."""
    spec = node_class.spec
    target = spec.reservation_target
    if target is not None and target.capacity_reservation_id:
        return ReservationSelection(ReservedTarget(reservation_id=target.capacity_reservation_id))
    if target is not None and target.capacity_reservation_resource_group_arn:
        return ReservationSelection(
            ReservedTarget(group_arn=target.capacity_reservation_resource_group_arn)
        )
    return ReservationSelection(terms=tuple(spec.capacity_reservation_selector_terms or ()))


def in_group(reservation: ReservationSnapshot, group_arn: str) -> ReservationSnapshot:
    return replace(reservation, groups=tuple(sorted({*reservation.groups, group_arn})))


# -- what the shared snapshots hold ---------------------------------------------------------------


@dataclass(frozen=True)
class StoredReservation:
    """A snapshot as stored: what EC2 said at the last sync, plus what the workers learned since."""

    snapshot: ReservationSnapshot
    usage_by_requester: Mapping[str, int] = field(default_factory=dict)
    announced: frozenset[str] = frozenset()
    synced_at: datetime | None = None
    # Bumped by every launcher write, so a sync never overwrites what it has not seen.
    version: int = 0


@dataclass(frozen=True)
class InvalidSnapshot:
    """A stored snapshot that does not parse: left out of every read, reported to operators."""

    reservation_id: str
    reason: str


@dataclass(frozen=True)
class Coverage:
    """One reservation target or selector term the sync resolved, and when.

    `placements` is each member's (instance type, zone), which EC2 never changes for a
    reservation: a launcher reads only the snapshots of members its request could launch into."""

    key: str
    synced_at: float
    members: tuple[str, ...] = ()
    placements: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def members_in(self, scope: ReservationScope, keep: Collection[str] = ()) -> tuple[str, ...]:
        """The members `scope` admits, and those in `keep` (a member of unknown placement,
        stored before placements were, is always admitted)."""
        return tuple(m for m in self.members if m in keep or scope.admits(self.placements.get(m)))


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


# -- the crossings a sync announces ---------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    utilization_high: float
    expiring_horizon: timedelta
    # EC2 terminates a block's instances 30 minutes before its end: warn owners before that.
    block_expiring_horizon: timedelta = timedelta(minutes=60)


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
    stored = StoredReservation(
        snapshot=replace(seen, exhausted=exhausted),
        usage_by_requester={k: n for k, n in usage_by_requester.items() if k},
        announced=frozenset(announced),
        synced_at=now,
        version=prev.version + 1 if prev else 0,
    )
    return stored, [Event(t, _detail(stored, t, thresholds, held, now)) for t in events]


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
    block = seen.reservation_type == CAPACITY_BLOCK
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
