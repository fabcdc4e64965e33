"""The state the launch phases pass along: what each request has got so far, one visit of a pool,
what a group's serve reports, and the record's words for what happened on the way."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.capacity.image_architectures import ImageArchitectures
from capacity_launcher.domain.capacity.reservations import ReservationSource
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent
from capacity_launcher.domain.records.status import (
    AwaitedReservation,
    CandidatesLeftOut,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
)
from capacity_launcher.service.launch.lifecycle import LEASE_READ, Phase, check
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.resolution import Prepared

# Why a reservation was left out before asking EC2: EC2's own code for a full reservation.
RESERVATION_FULL = "ReservationCapacityExceeded"
# The record's word for offerings too few to give the flexibility minValues asks.
MIN_VALUES = "MinValuesNotMet"
# The record's word for a pool a request that named none was not served by, and why.
POOL_PASSED_OVER = "NodePoolPassedOver"
# The record's word for a single-zone landing given up for another zone.
ZONE_ROLLED_BACK = "ZoneRolledBack"
# The record's word for instances terminated at settle: their lease expired under the launch
# and was reclaimed, and the pool's limits no longer held them (issue 34).
LEASE_RECLAIMED_OVER_LIMIT = "LeaseReclaimedOverLimit"
# The record's word for a replay that launched less than its lease held room for, the lease an
# earlier delivery took holding room for none of the types its pool allows now.
LEASE_HOLDS_NO_CANDIDATE = "LeaseHoldsNoCandidate"


@dataclass(frozen=True)
class Context:
    """What every phase works with: the ports, the clock and the launcher's settings."""

    ports: LaunchPorts
    clock: Callable[[], datetime]
    max_attempts: int
    # How in-process retries back off: the container's pause (service/wiring/), so a local
    # cloud's or the simulation's waits move their clock instead of sleeping.
    sleep: Callable[[float], None]
    # The deployment's name (STACK_NAME), tagged on every instance it launches.
    stack: str | None = None


@dataclass
class Progress:
    """What one request has got so far, across replays and attempts, and where it is in its
    lifecycle (`state`, moved only by the `mark_*` transitions: lifecycle.py)."""

    prepared: Prepared
    # The state recovery brought it to (`recovery.py`); phases move it on.
    state: Phase = Phase.RECOVERED
    granted: int = 0
    instance_ids: list[str] = field(default_factory=list)
    errors: list[ErrorDetail] = field(default_factory=list)
    # Its Waiting record, when an earlier delivery put it to wait for scheduled capacity.
    waited: RequestRecord | None = None
    # What it may wait for instead of failing (issue 37): each refusal room appearing could
    # cure (its quota, its pool's limits, capacity), gathered across the pools it visits.
    awaits: list[AwaitedReservation] = field(default_factory=list)
    # The first quota refusal a reclaim could answer: asked for only if the request ends with
    # no instance (another pool may still serve it).
    reclaim: QuotaExceeded | None = None
    # The first refusal by its quota's bounds or its cohort's idle quota: a waiting request
    # whose quota's policies allow it preempts for it (issue 37, room.request_preemption).
    preempt: QuotaExceeded | None = None
    # The first cut of its candidates, for its record: the types its lease left out (the room
    # left could not hold them), or the first CreateFleet's override limit.
    left_out: CandidatesLeftOut | None = None
    # The instance types its lease covers (None: every candidate): it launches no other.
    lease_types: frozenset[str] | None = None
    # Why its lease holds room for fewer than it asked for (its record says so if it ends short).
    short: ErrorDetail | None = None
    # Its intents' answers not stored yet (issue 38): its lease's settle carries them, else
    # `send.complete_left` writes them before the visit ends.
    completions: list[IntentCompletion] = field(default_factory=list)
    # The highest attempt number its earlier intents used: a launch of it, in any pool, numbers
    # on from there, so none of its ClientTokens is sent with other parameters (EC2 refuses it).
    attempts: int = 0
    # The states it was in, this delivery, before it came to the pool it is in now (another
    # pool's visit, or the same pool's before it was resolved again).
    before: tuple[Phase, ...] = ()
    # The states it has been in since it came to this pool, `state` last.
    here: list[Phase] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.here:
            self.here.append(self.state)

    # The transitions (lifecycle.ALLOWED says from where each may be taken).

    def _move(self, target: Phase) -> None:
        check(self.request_id, self.state, target)
        self.state = target
        self.here.append(target)

    def mark_waiting(self) -> None:
        """It waits for scheduled capacity, or for room (its quota, its pool's limits, capacity):
        its delivery ends with a Waiting record."""
        self._move(Phase.WAITING)

    def mark_leased(self, count: int, types: frozenset[str] | None) -> None:
        """It holds room for `count` instances of `types` here (None: every candidate)."""
        self._move(Phase.LEASED)
        self.granted, self.lease_types = count, types

    def mark_unleased(self) -> None:
        """Its lease here was read: none an earlier delivery took is left open untaken, and
        none holds room for it yet (a new one is asked for next, or was refused)."""
        self._move(Phase.UNLEASED)

    def mark_settled(self) -> None:
        """An earlier delivery settled its lease: it launches no more, only its record is left."""
        self._move(Phase.SETTLED)

    def mark_changed(self) -> None:
        """Its pool or class was applied since it was resolved: nothing was leased here."""
        self._move(Phase.CHANGED)

    def mark_launching(self) -> None:
        """An intent names it: its lease must outlive an exception. One an earlier delivery
        settled stays Settled (there is no lease to keep)."""
        if self.state is not Phase.SETTLED:
            self._move(Phase.LAUNCHING)

    def mark_passed_on(self) -> None:
        """It leaves this pool for the next one (`onward` builds it there)."""
        self._move(Phase.PASSED_ON)

    def mark_ended(self) -> None:
        """Its record is written."""
        self._move(Phase.ENDED)

    # What the trail says.

    @property
    def trail(self) -> tuple[Phase, ...]:
        """Every state it was in this delivery, in order."""
        return (*self.before, *self.here)

    @property
    def first(self) -> bool:
        """Its first delivery, and the first to bind its body: nothing of it (record, intent,
        lease) can be stored yet, so nothing is read back (see `LaunchBatch`)."""
        return self.trail[0] is Phase.FRESH

    @property
    def settled(self) -> bool:
        """Its lease was settled by an earlier delivery (found so in this pool)."""
        return Phase.SETTLED in self.here

    @property
    def launching(self) -> bool:
        """An intent named it in this pool: EC2 may have instances for it."""
        return Phase.LAUNCHING in self.here

    @property
    def lease_read(self) -> bool:
        """Its lease phase in this pool read its lease and left none an earlier delivery took
        open and untaken (took it up, gave it back, or found none): nothing is left for the
        visit's exit rule to give back (`pipeline.give_back_earlier`)."""
        return not LEASE_READ.isdisjoint(self.here)

    @property
    def changes(self) -> int:
        """How many times, this delivery, its pool or class was found applied since it was
        resolved (a second change sends the message back)."""
        return self.trail.count(Phase.CHANGED)

    def arriving(self, prepared: Prepared, errors: list[ErrorDetail], **kept: Any) -> Progress:
        """It as it comes to a pool anew (the next pool, or where it resolves again), in the
        state it is in now, with its trail: what this pool gave it (its lease, the record's cut
        of the candidates, what it launched) does not go with it; `kept`: what else does."""
        return Progress(
            prepared,
            state=self.state,
            errors=errors,
            before=self.trail[:-1],
            **kept,
        )

    @property
    def request(self) -> LaunchRequest:
        return self.prepared.request

    @property
    def request_id(self) -> str:
        return self.prepared.request.request_id

    @property
    def pool_name(self) -> str:
        return self.prepared.pool.metadata.name

    @property
    def wanted(self) -> int:
        return max(self.granted - len(self.instance_ids), 0)

    @property
    def covers_none(self) -> bool:
        """Its lease covers none of its candidate types: one an earlier delivery took, sized for
        the types of its time, taken up to replay that delivery's intents (`lease._taken_up`)."""
        return self.lease_types is not None and not self.lease_types

    def awaits_also(self, awaited: AwaitedReservation | None) -> None:
        """Something it may wait for instead of failing, once."""
        if awaited is not None and awaited not in self.awaits:
            self.awaits.append(awaited)

    def note(self, error: ErrorDetail) -> None:
        """An error on its record, once."""
        if error not in self.errors:
            self.errors.append(error)

    def passed_over(self) -> list[ErrorDetail]:
        """The pools it was passed over by on its way here (kept on every record it ends with)."""
        return [e for e in self.errors if e.code == POOL_PASSED_OVER]


@dataclass
class Visit:
    """Requests served together in one pool: a coalesced group, or what another pool passed on;
    with the intents a predecessor made there, replayed before anything new is sent."""

    progress: list[Progress]
    intents: list[LaunchIntent] = field(default_factory=list)


@dataclass
class OwnFills:
    """Dry marks of reservations that this serve's own instances filled, held back until the
    requests are settled: a reservation a rolled-back gang filled has free slots again, so its
    exhaustion was no evidence of dryness (README "How it works": the ICE cache holds dry ones)."""

    # Reservation id -> its ICE-cache mark (key, code, message).
    marks: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # Every instance this serve saw land, rolled back or not.
    landings: list[InstanceLanding] = field(default_factory=list)


@dataclass
class LaunchReport:
    """What happened to a group; the handler publishes the records and emits the metrics."""

    records: dict[str, RequestRecord]
    replayed: set[str] = field(default_factory=set)
    fleet_calls: int = 0
    fallbacks_to_on_demand: int = 0
    cache_hits: dict[str, int] = field(default_factory=dict)
    cache_writes: dict[str, int] = field(default_factory=dict)
    # Requests that wait for scheduled capacity (their records are Waiting, not stored here):
    # request id -> seconds until the next look.
    waiting: dict[str, int] = field(default_factory=dict)
    # Instances of shared fleets EC2 did not know in time for their request's tags: the sync's
    # reconciliation tags them from their instance records.
    untagged: list[str] = field(default_factory=list)

    def hit(self, capacity_type: str) -> None:
        self.cache_hits[capacity_type] = self.cache_hits.get(capacity_type, 0) + 1

    def wrote(self, capacity_type: str, count: int = 1) -> None:
        self.cache_writes[capacity_type] = max(self.cache_writes.get(capacity_type, 0) + count, 0)


@dataclass
class Run:
    """One visit's launching, from the lease on: what its replays and attempts learn, and what
    the settle reads."""

    progress: list[Progress]
    active: list[Progress]
    replaying: bool
    observed: list[UnavailableOffering] = field(default_factory=list)
    seen: list[InstanceLanding] = field(default_factory=list)
    own_fills: OwnFills = field(default_factory=OwnFills)
    attempts: int = 0
    # A replayed intent's instances → the reservation it targeted (words.as_launched).
    replayed_in: dict[str, str | None] = field(default_factory=dict)
    # A replayed reserved intent's instances (launched `capacity-reservations-only`).
    replayed_reserved: set[str] = field(default_factory=set)

    @property
    def wanted(self) -> int:
        return sum(p.wanted for p in self.active)


@dataclass(frozen=True)
class PoolView:
    """What one pool offers a group, read once per visit."""

    lead: Prepared
    subnets: Mapping[str, Sequence[str]]
    sources: list[ReservationSource]
    # The NodeClass's images by architecture (None: EC2 does not know its main image).
    architecture: ImageArchitectures | None
    candidates: Candidates
    # The candidates less what the ICE cache holds, and a record line for each one it held.
    usable: Candidates
    skipped: list[UnavailableOffering]

    @property
    def pool_name(self) -> str:
        return self.lead.pool.metadata.name

    @property
    def per_instance(self) -> Resources:
        """What a lease sizes each instance by: the largest candidate."""
        return self.candidates.largest() if self.candidates else Resources.ZERO


@dataclass(frozen=True)
class Refusal:
    """A pool's answer that ends a request there. `pass_on`: one that named no pool tries the
    next pool first (the error's message says why this one passed it over)."""

    error: ErrorDetail
    status: RequestStatus = RequestStatus.REJECTED
    pass_on: bool = True
