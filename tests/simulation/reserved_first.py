"""The product's money promise (README; docs/placement.md, "Attempt order"): a launch lands in a
matching selected On-Demand Capacity Reservation, reservation group or Capacity Block first, and
goes on-demand or spot only when no selected matching reservation has room, within the windows
docs/operations.md documents ("How launchers use them").

Judged from EC2's own counts over time, never from the service's snapshots: after every EC2
call anyone makes (`World.call_watchers`: the service's launches and terminations, a user's
instances started, stopped or ended, reservations created, modified or cancelled) and at the end
of every step (the emulator's own transitions), each reservation's room is read from the
emulator (`World.reservation_room`: its available count while active, other users' instances
counted), and every instance EC2 launches is noted with the moment, market and reservation it
launched in (`World.launches_after`). Once the instance is seen with its request's and pool's
tags, it is judged.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.capacity.reservation_state import STALE_AFTER_SECONDS
from capacity_launcher.service.reservations import RECHECK_SECONDS
from capacity_launcher.settings import Settings, get_settings
from tests.simulation.capacity_invariants import (
    BLOCK_LAST_LAUNCH_SECONDS,
    CAPACITY_TYPE,
    DECISION_TO_LAUNCH_SLACK,
    _requirements,
)
from tests.simulation.emulator import START
from tests.simulation.world import Launch, Observed, ReservationFacts

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants, Request

RESERVED_FIRST = "a launch uses a free selected reservation first"
BESIDE = "an on-demand launch beside a selected reservation like it"
# The sync's schedule (scheduler.SYNC_EVERY_SECONDS; the template's `rate(1 minute)`).
SYNC_EVERY_SECONDS = 60.0
INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
# Markets EC2 runs an instance in outside any reservation.
OUTSIDE = ("on-demand", "spot")
# Calls after which EC2 holds new instances.
LAUNCHES = ("ec2:CreateFleet", "ec2:RunInstances")


def hidden_room_seconds(ice_ttl: float, ice_local_copy: float) -> float:
    """The longest a slot EC2 shows free may stay out of a launcher's sight, plus the slack
    between a decision and EC2's launch (docs/operations.md, "How launchers use them"):

    - the sync sees it within its period (SYNC_EVERY_SECONDS); a launcher whose synced view
      shows too little room for a request looks at EC2 itself, at most once per
      RECHECK_SECONDS per NodeClass selection and container: a look up to that old is used;
    - an `exhausted` flag, set when EC2 refused a launch for want of room (so before the room
      came), holds until a sync sees the room, and with the sync stopped only while the
      snapshot it is on is fresh: STALE_AFTER_SECONDS after the last sync, which wrote the
      snapshot before the flag, so before the room;
    - the flag's ICE cache entry holds the reservation out for `ice_ttl_seconds`, and a
      container's copy of the cache for `ice_local_copy_seconds` more.

    These windows do not add: each ends on its own clock, all started no later than the room
    came (a look once the snapshot ages past STALE_AFTER_SECONDS is made on every request). So
    the longest of them, plus DECISION_TO_LAUNCH_SLACK for the CreateFleet after the decision.
    """
    windows = (
        SYNC_EVERY_SECONDS + RECHECK_SECONDS,
        float(STALE_AFTER_SECONDS),
        ice_ttl + ice_local_copy,
    )
    return max(windows) + DECISION_TO_LAUNCH_SLACK


@dataclass
class RoomHistory:
    """What the world recorded: each reservation's facts, its room at every change (moment,
    free slots EC2 showed), and every launch."""

    facts: dict[str, ReservationFacts] = field(default_factory=dict)
    moments: dict[str, list[float]] = field(default_factory=dict)
    free: dict[str, list[int]] = field(default_factory=dict)
    launches: dict[str, Launch] = field(default_factory=dict)
    launched: int = 0  # instances the emulator launched so far (World.launches_after)

    def note(self, reservation_id: str, moment: float, free: int) -> None:
        """The room EC2 shows now; only a change is kept."""
        frees = self.free.setdefault(reservation_id, [])
        if frees and frees[-1] == free:
            return
        self.moments.setdefault(reservation_id, []).append(moment)
        frees.append(free)

    def kept_free(self, reservation_id: str, start: float, end: float) -> int:
        """The slots EC2 showed free at `start` that stayed free until `end` (0 if the
        reservation was not known at `start`). Slots are counted, not named, so every drop (a
        launch, a start, a shrink) is taken from them first, and room made after `start`
        never counts: a slot freed within the window may have been out of sight."""
        moments = self.moments.get(reservation_id, [])
        first = bisect.bisect_right(moments, start) - 1
        if first < 0:
            return 0
        frees = self.free[reservation_id][first : bisect.bisect_right(moments, end)]
        kept = frees[0]
        for before, after in itertools.pairwise(frees):
            kept = max(0, kept - max(0, before - after))
        return kept

    def free_since(self, reservation_id: str, moment: float) -> float:
        """When the run of free moments that holds at `moment` began."""
        moments, frees = self.moments[reservation_id], self.free[reservation_id]
        index = bisect.bisect_right(moments, moment) - 1
        while index > 0 and frees[index - 1] > 0:
            index -= 1
        return moments[index]


def selects(
    node_class: dict[str, Any],
    facts: ReservationFacts,
    groups: Mapping[str, frozenset[str]] | None = None,
) -> bool:
    """The NodeClass reaches the reservation: its target by id or by group (a member of the
    group, `groups`: ARN → the reservations grouped in it), or one of its selector terms (by id,
    or by every tag, owner and match criteria it names)."""
    spec = node_class.get("spec", {})
    target = (spec.get("capacityReservationSpec") or {}).get("capacityReservationTarget") or {}
    if target:
        group = target.get("capacityReservationResourceGroupArn")
        if group is not None:
            return facts.reservation_id in (groups or {}).get(group, frozenset())
        return target.get("capacityReservationId") == facts.reservation_id
    tags = dict(facts.tags)
    for term in spec.get("capacityReservationSelectorTerms") or []:
        if "id" in term:
            if term["id"] == facts.reservation_id:
                return True
            continue
        wanted = term.get("tags") or {}
        if (
            all(tags.get(k) == v for k, v in wanted.items())
            and term.get("ownerID", facts.owner_id) == facts.owner_id
            and term.get("instanceMatchCriteria", facts.match_criteria) == facts.match_criteria
        ):
            return True
    return False


def allows_reserved(document_or_body: dict[str, Any], *, default: bool) -> bool:
    """Its capacity-type requirement admits `reserved` (`default` when it names none)."""
    allowed = _requirements(document_or_body).get(CAPACITY_TYPE)
    return default if allowed is None else "reserved" in allowed


def _opts_into_interruptible(*documents: dict[str, Any]) -> bool:
    return all("true" in _requirements(d).get(INTERRUPTIBLE, set()) for d in documents)


class ReservedFirst:
    """Flags an instance EC2 launched on-demand or spot for a pool that allows reserved capacity
    and whose NodeClass selects reservations, when a selected reservation matching the instance
    (type, zone, platform, tenancy; an interruptible one only if pool and request opt in; a
    block only before its last 45 minutes) kept a slot free in EC2 from `margin` before the
    request's submission until the step that launched it ended (`RoomHistory.kept_free`: room
    made within that window does not count, every drop in it takes from the older room).

    `margin` is `hidden_room_seconds` of the settings the world runs with: room free that long
    was in any launcher's sight when it decided, whenever between the submission and the launch
    that was (a redelivery replays an older decision, so the submission, not the launch, starts
    the window). The window runs on to the step's end rather than to the launch: another
    container may hold the slot by a claim whose CreateFleet comes after (a race the claims
    settle without asking EC2). Requests that pin a capacity type without `reserved`, and pools
    that do not allow it, are out of scope; a request whose pool or NodeClass was applied or
    deleted within the launchers' configuration cache before its submission, or since, is
    counted apart, not judged."""

    def __init__(self, invariants: Invariants, settings: Settings | None = None) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        self.history = RoomHistory()
        self._settings = settings  # None: the world's, read when first needed
        self._judged: set[str] = set()
        self._reported: set[tuple[str, str]] = set()  # (request, reservation)
        # ODCR groups' members (group_operations.py): group ARN → every reservation grouped.
        self.groups: dict[str, frozenset[str]] = {}

    @cached_property
    def margin(self) -> float:
        settings = self._settings or get_settings()
        return hidden_room_seconds(
            float(settings.ice_ttl_seconds), float(settings.ice_local_copy_seconds)
        )

    @cached_property
    def _config_cache(self) -> float:
        return float((self._settings or get_settings()).config_cache_seconds)

    # -- what EC2 does, as it happens (World.call_watchers) -------------------------------------

    def before(self, operation: str, params: Any) -> None:
        del operation, params

    def after(self, operation: str, params: Any) -> None:
        del params
        if not operation.startswith("ec2:"):
            return
        if operation in LAUNCHES:
            self._note_launches()
        self.sample()

    def sample(self) -> None:
        """Each reservation's room as EC2 shows it now."""
        now = self.world.now
        for reservation_id, free in self.world.reservation_room().items():
            if reservation_id not in self.history.facts:
                self.history.facts[reservation_id] = self.world.reservation_facts(reservation_id)
            self.history.note(reservation_id, now, free)

    def _note_launches(self) -> None:
        launched = self.world.launches_after(self.history.launched)
        self.history.launched += len(launched)
        for launch in launched:
            self.history.launches[launch.instance_id] = launch

    # -- the judgement --------------------------------------------------------------------------

    def every_step(self) -> None:
        self.sample()  # the emulator's own transitions of the step (settle)
        for observed in list(self.world.instances.values()):
            if observed.instance_id in self._judged:
                continue
            launch = self.history.launches.get(observed.instance_id)
            if launch is None:
                continue
            self._judged.add(observed.instance_id)
            self.judge(observed, launch)

    def judge(self, observed: Observed, launch: Launch) -> None:
        if launch.reservation_id is not None or launch.market not in OUTSIDE:
            return
        request = self.base.ledger.requests.get(observed.request_id)
        scope = self._scope(observed, request)
        if scope is None or request is None:
            return
        pool, node_class = scope
        self.checks[RESERVED_FIRST] += 1
        start = request.submitted_at - self.margin
        now = self.world.now
        for facts in self.history.facts.values():
            if not self._candidate(facts, launch, node_class, pool, request):
                continue
            self.checks[f"seen: {BESIDE}"] += 1
            kept = self.history.kept_free(facts.reservation_id, start, now)
            reported = (request.request_id, facts.reservation_id)
            if kept > 0 and reported not in self._reported:  # once, for its first instance
                self._reported.add(reported)
                self._violate(observed, launch, request, facts, kept)

    def _scope(
        self, observed: Observed, request: Request | None
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The pool and NodeClass that launched it, if the promise covers the launch."""
        body = None if request is None else request.body
        if request is None or body is None:
            self.checks[f"{RESERVED_FIRST}: not judged (no single valid body)"] += 1
            return None
        if not allows_reserved(body, default=True):
            self.checks[f"{RESERVED_FIRST}: out of scope (the request pins no reserved)"] += 1
            return None
        catalog = self.base.catalog
        pool = catalog.pools.get(observed.pool)
        class_name = None if pool is None else pool["spec"]["nodeClassRef"]
        node_class = catalog.classes.get(class_name or "")
        if pool is None or node_class is None:
            self.checks[f"{RESERVED_FIRST}: not judged (pool or NodeClass gone)"] += 1
            return None
        since = request.submitted_at - self._config_cache - 1.0
        changes = (f"NodePool/{observed.pool}", f"NodeClass/{class_name}")
        if any(catalog.last_changed.get(key, since - 1.0) >= since for key in changes):
            self.checks[f"{RESERVED_FIRST}: not judged (its pool or NodeClass changed)"] += 1
            return None
        if not allows_reserved(pool, default=True):
            self.checks[f"{RESERVED_FIRST}: out of scope (the pool allows no reserved)"] += 1
            return None
        return pool, node_class

    def _candidate(
        self,
        facts: ReservationFacts,
        launch: Launch,
        node_class: dict[str, Any],
        pool: dict[str, Any],
        request: Request,
    ) -> bool:
        """A selected reservation the launched instance could have run in, usable until the
        launch (a block's last 45 minutes are not: docs/placement.md, Capacity Blocks)."""
        if facts.placement != launch.placement or not selects(node_class, facts, self.groups):
            return False
        if facts.interruptible and not _opts_into_interruptible(pool, request.body or {}):
            return False
        if facts.end is None:
            return True
        last_launch = BLOCK_LAST_LAUNCH_SECONDS if facts.kind == "capacity-block" else 0.0
        return launch.at < facts.end - last_launch

    def _violate(
        self,
        observed: Observed,
        launch: Launch,
        request: Request,
        facts: ReservationFacts,
        kept: int,
    ) -> None:
        start = request.submitted_at - self.margin
        since = self.history.free_since(facts.reservation_id, start)
        placement = launch.placement
        self.base._violate(
            RESERVED_FIRST,
            f"{observed.instance_id} ({launch.market} {placement.instance_type}"
            f" {placement.zone}) for {request.request_id} in {observed.pool} launched at"
            f" t={_t(launch.at)}s; selected {facts.match_criteria} reservation"
            f" {facts.reservation_id} ({facts.kind}) kept {kept} slot(s) free from t={_t(start)}s"
            f" ({self.margin:.0f}s before the request's submission at"
            f" t={_t(request.submitted_at)}s, step {request.submitted_step}) to"
            f" t={_t(self.world.now)}s, free without a break since t={_t(since)}s",
        )


def _t(moment: float) -> str:
    return f"{moment - START.timestamp():.0f}"
