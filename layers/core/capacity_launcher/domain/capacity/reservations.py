"""Capacity reservations: which ones a NodeClass selects, and what a snapshot of one says.

The rules live here once. A NodeClass names one target (a reservation id or a group ARN) or
selector terms (`ReservationSelection`); a term matches a reservation as
DescribeCapacityReservations filters it (`term_matches`); a snapshot says what is available,
used and claimable, and which market a launch into it needs. What the sync keeps and announces of
each (stored snapshots, coverage, flags, crossings): domain/capacity/reservation_state.py.
service/reservations.py applies them to the shared snapshots, or to EC2's live view when the
snapshots are stale; the adapters only translate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.capacity.offerings import RESERVED, Offering

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


@dataclass(frozen=True)
class ReservationKind:
    """What a kind of reservation asks of a launch into it. EC2 says the kind in two fields
    (ReservationType, Interruptible), which a snapshot keeps as read; `ReservationSnapshot.kind`
    reads the kind from them once, and the rules read this table."""

    name: str
    # InstanceMarketOptions.MarketType a launch into it needs (None: on-demand).
    market: str | None
    # CreateFleet's DefaultTargetCapacityType for it.
    fleet_capacity_type: str
    # EC2 terminates its instances BLOCK_TERMINATION_LEAD before its end date.
    ends_early: bool = False


ORDINARY = ReservationKind("ordinary", None, "on-demand")
BLOCK = ReservationKind("capacity-block", BLOCK_MARKET, "capacity-block", ends_early=True)
INTERRUPTIBLE = ReservationKind("interruptible", INTERRUPTIBLE_MARKET, "reserved-capacity")
# CreateFleet's DefaultTargetCapacityType for each market (on-demand for ordinary ODCRs).
FLEET_CAPACITY_TYPES = {
    BLOCK_MARKET: BLOCK.fleet_capacity_type,
    INTERRUPTIBLE_MARKET: INTERRUPTIBLE.fleet_capacity_type,
}
# A coverage key names one target or selector term the sync resolved (stored beside snapshots).
COVERAGE_PREFIX = "Covered#"


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
        if not self.kind.ends_early or self.end_date is None:
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
    def kind(self) -> ReservationKind:
        """Its kind, from EC2's ReservationType and Interruptible (a block is not interruptible)."""
        if self.reservation_type == CAPACITY_BLOCK:
            return BLOCK
        return INTERRUPTIBLE if self.interruptible else ORDINARY

    @property
    def market(self) -> str | None:
        """The InstanceMarketOptions.MarketType a launch into it needs (None: on-demand)."""
        return self.kind.market

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


def open_offerings(reservations: Iterable[ReservationSnapshot]) -> frozenset[tuple[str, str]]:
    """(instance type, zone) of every open reservation listed that is active or will be: where
    EC2 may put an instance whose launch names no reservation and whose preference is open."""
    return frozenset(
        (r.instance_type, r.zone)
        for r in reservations
        if r.instance_match_criteria == "open" and r.state in SELECTABLE_STATES
    )


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


# -- the crossings a sync announces ---------------------------------------------------------------
