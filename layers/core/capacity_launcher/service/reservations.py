"""The launchers' capacity reservations: the shared snapshots first, EC2 when they are stale.

One provider per concept, as Karpenter's `capacityreservation` provider: the rules are
domain/capacity/reservations.py, the DynamoDB and EC2 translations are the adapters behind the
`ReservationStore` and `Ec2Reservations` ports.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.reservation_state import (
    ANYWHERE,
    Coverage,
    ReservationScope,
    StoredReservation,
    covered,
    flag_holds,
    more_room_seen,
    most_room_first,
    with_flags,
    with_room_held,
)
from capacity_launcher.domain.capacity.reservations import (
    ReservationSelection,
    ReservationSnapshot,
    ReservationSource,
    in_group,
    selection_of,
    target_key,
)
from capacity_launcher.domain.errors import LaunchFailed, NodeClassRefused
from capacity_launcher.service.ports import Ec2Reservations, ReservationStore
from capacity_launcher.service.reservation_pages import FIRST_PAGE, ONE_CALL, EarlyRead, first_page

# Whether the reservations found have room for all a request asks (the launcher's candidates).
EnoughRoom = Callable[[Sequence[ReservationSource]], bool]
# A claim re-reads a snapshot this many times while other workers take its slots.
CLAIM_TRIES = 3
# When the last sync found too little room for a request in the reservations it could use (none,
# all full, or fewer slots than it asks), a launcher asks EC2 itself (a reservation created, or
# room made, since the sync), at most once per NodeClass selection per this many seconds: a burst
# of such requests in one container makes one look, not one each.
RECHECK_SECONDS = 30.0
# A launcher keeps the coverage it last read of a selection this long, to read with the next
# one, in the same call, the snapshots it would read first: a guess only (what the coverage read
# back says to read first decides, read again when it differs), so a steady stream of requests
# reads its coverage and snapshots in one call (issue 38).
COVERAGE_KEPT_SECONDS = 60.0


@dataclass(frozen=True)
class _Room:
    """EC2's counts of a reservation, seen by this launcher's own look after it read the
    snapshot at `version`: written into the snapshot by the next claim of its slots."""

    available: int
    total: int
    version: int


@dataclass(frozen=True)
class _Look:
    """What EC2 described for one selection, and when (this launcher's own look)."""

    at: float
    sources: list[ReservationSource]


class ReservationProvider:
    """The launcher's `Reservations` port."""

    def __init__(
        self,
        snapshots: ReservationStore,
        ec2: Ec2Reservations,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._snapshots = snapshots
        self._ec2 = ec2
        self._clock = clock
        self._looks: dict[tuple[str, ...], _Look] = {}
        self._as_of: dict[tuple[str, ...], float] = {}
        self._room_seen: dict[str, _Room] = {}
        self._kept: dict[tuple[str, ...], tuple[float, dict[str, Coverage]]] = {}
        # A group's members this container's last launch into the group landed in (`landed_in`).
        self._landed: dict[tuple[str, ...], frozenset[str]] = {}

    def sources(
        self,
        node_class: NodeClass,
        scope: ReservationScope = ANYWHERE,
        enough_room: EnoughRoom | None = None,
        *,
        most_room_first: bool = False,
    ) -> list[ReservationSource]:
        """The NodeClass's reservation targets, each with the reservations it reaches that
        `scope` admits (and every one it names by id, so a missing one is still reported).

        Reads the NodeClass's coverage items, then only the snapshots of the members in scope:
        what other NodeClasses select, or reservations elsewhere, is never read. With
        `most_room_first` (a request's launch), and the sync's coverage fresh, the snapshots are
        read a page at a time, the most room the sync saw first, until those read have
        `enough_room`: the rest are not read, and not returned (a request for a few instances
        reads a few snapshots, however many reservations it could use or members its group
        has; EC2 places a launch into a group in any member, so the members the container's
        last launch into it landed in are read first, and one landed in that was not read is
        read after the launch: `landed_in`). When the sync's view
        has not `enough_room` for the request (by default: no active reservation with room in
        `scope`), every snapshot is read and EC2 is looked at for what was created or freed
        since. Raises NodeClassRefused naming the selection's field when AWS refuses for good
        to say what it reaches (a group that does not exist, say)."""
        selection = selection_of(node_class)
        if not selection:
            return []
        if enough_room is None:
            enough_room = partial(_any_usable, scope=scope)
        try:
            return self._sources(selection, scope, enough_room, most_room_first)
        except NodeClassRefused:
            raise
        except LaunchFailed as refused:
            name, field = node_class.metadata.name, selection.field
            raise NodeClassRefused(refused.code, refused.message, name, field) from refused

    def _sources(
        self,
        selection: ReservationSelection,
        scope: ReservationScope,
        enough_room: EnoughRoom,
        paged: bool,
    ) -> list[ReservationSource]:
        needed = selection.coverage_keys()
        named = selection.named_ids()
        landed = self._landed.get(tuple(needed), frozenset())
        coverage, early = self._coverage(needed, scope, named, paged, landed)
        members = {k: c.members_in(scope, named) for k, c in coverage.items()}
        if paged and covered(needed, coverage, (), self._clock()):
            order = most_room_first(
                {m for ms in members.values() for m in ms}, coverage.values(), named, landed
            )
            stored, invalid = self._read_paged(selection, order, members, enough_room, early)
        else:
            everyone = [m for ms in members.values() for m in ms]
            stored, invalid = early.read(everyone) or self._snapshots.snapshots(everyone)
        known = {k: s.snapshot for k, s in stored.items()}
        heartbeat = _heartbeat(needed, coverage)
        key = tuple(needed)
        if covered(needed, coverage, invalid, self._clock()):
            synced = selection.resolve(known, members)
            synced_at = min(c.synced_at for c in coverage.values())
            self._as_of[key] = synced_at
            if enough_room(synced):
                return synced
            looked = self._looked_since(selection, synced_at, stored, known, heartbeat)
            if looked is None:
                return synced
            live = looked
        else:
            # Not synced recently, or a snapshot it needs does not parse: ask EC2 itself.
            live = self._live(selection)
            self._as_of[key] = self._clock()
            self._note_room(stored, live, heartbeat)
        read = set(known) | invalid
        return self._flagged(live, stored, read, named, scope, heartbeat)

    def _coverage(
        self,
        needed: Sequence[str],
        scope: ReservationScope,
        named: frozenset[str],
        paged: bool,
        landed: frozenset[str],
    ) -> tuple[dict[str, Coverage], EarlyRead]:
        """The coverage items `needed` (strongly consistent), and, read in the same call, the
        snapshots the coverage this launcher read last of them says to read first (`_first`),
        kept `COVERAGE_KEPT_SECONDS`: the caller uses them only if the coverage read now says
        to read the same."""
        key, now = tuple(needed), self._clock()
        kept = self._kept.get(key)
        guess = (
            first_page(kept[1], scope, named, paged, landed)
            if kept and now - kept[0] < COVERAGE_KEPT_SECONDS
            else []
        )
        if not guess or len(guess) + len(needed) > ONE_CALL:
            coverage, early = self._snapshots.coverage(needed), EarlyRead()
        else:
            coverage, stored, invalid = self._snapshots.coverage_with(needed, guess)
            early = EarlyRead(frozenset(guess), stored, frozenset(invalid))
        self._kept[key] = (now, coverage)
        return coverage, early

    def _read_paged(
        self,
        selection: ReservationSelection,
        order: Sequence[str],
        members: Mapping[str, Sequence[str]],
        enough_room: EnoughRoom,
        early: EarlyRead,
    ) -> tuple[dict[str, StoredReservation], set[str]]:
        """The snapshots of `members` in `order` (`most_room_first`), a page at a time
        (FIRST_PAGE, then twice as many each time), until those read have `enough_room` as they
        stand now (strongly consistent: what the claims decide on), or one does not parse (then
        the caller asks EC2, as it would), or every one is read. A member the sync saw full,
        whose slots were given back since, is read when those with more room are not enough."""
        stored: dict[str, StoredReservation] = {}
        invalid: set[str] = set()
        start, size = 0, FIRST_PAGE
        while start < len(order):
            page = order[start : start + size]
            found, bad = (start == 0 and early.read(page)) or self._snapshots.snapshots(page)
            stored.update(found)
            invalid |= bad
            start, size = start + size, size * 2
            if invalid:
                break
            known = {k: held.snapshot for k, held in stored.items()}
            if enough_room(selection.resolve(known, members)):
                break
        return stored, invalid

    def _looked_since(
        self,
        selection: ReservationSelection,
        synced_at: float,
        stored: Mapping[str, StoredReservation],
        known: Mapping[str, ReservationSnapshot],
        heartbeat: datetime | None,
    ) -> list[ReservationSource] | None:
        """The sync saw too little room for this request: a reservation created since (a second
        one beside a full one, a block bought for a waiting request), or room made since in one
        it saw, is not seen yet. EC2's view when newer than the sync's (None: the sync's is)."""
        looked = self._recheck(selection, synced_at)
        if looked is None:
            return None
        live, made_now = looked
        if made_now:
            self._note_room(stored, live, heartbeat)
        # The snapshots, which the claims decide on, may hold more since (slots given back).
        return [with_room_held(source, known) for source in live]

    def _flagged(
        self,
        live: list[ReservationSource],
        stored: Mapping[str, StoredReservation],
        read: set[str],
        named: frozenset[str],
        scope: ReservationScope,
        heartbeat: datetime | None,
    ) -> list[ReservationSource]:
        """`live` with the flags their snapshots hold (the sync's marks); the snapshots of the
        reservations it names or `scope` admits that were not `read` yet (found by EC2 after
        the sync) are read first."""
        unread = {
            r.reservation_id
            for s in live
            for r in s.reservations
            if r.reservation_id in named or scope.admits((r.instance_type, r.zone))
        } - read
        if unread:
            stored = {**stored, **self._snapshots.snapshots(sorted(unread))[0]}
        now = self._now()
        flagged = {k for k, held in stored.items() if flag_holds(held, now, heartbeat)}
        return [with_flags(s, flagged) for s in live]

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def as_of(self, node_class: NodeClass) -> float | None:
        """When what `sources` last returned for this NodeClass was read from EC2 (epoch seconds:
        the last sync's, or this launcher's own look), None before any; no read."""
        return self._as_of.get(tuple(selection_of(node_class).coverage_keys()))

    def _recheck(
        self, selection: ReservationSelection, synced_at: float
    ) -> tuple[list[ReservationSource], bool] | None:
        """EC2's view of `selection` when it is newer than the sync's, looking again only once
        per `RECHECK_SECONDS`, and whether it was looked at now; None when the sync has looked
        since (its snapshots are better)."""
        key = tuple(selection.coverage_keys())
        now = self._clock()
        look = self._looks.get(key)
        made_now = look is None or now - look.at >= RECHECK_SECONDS
        if look is None or made_now:
            look = _Look(now, self._live(selection))
            self._looks[key] = look
        if look.at < synced_at:
            return None
        self._as_of[key] = look.at
        return look.sources, made_now

    def _note_room(
        self,
        stored: Mapping[str, StoredReservation],
        seen: Sequence[ReservationSource],
        heartbeat: datetime | None,
    ) -> None:
        """Room EC2 shows now that the snapshots read just before the look do not hold (a
        reservation grown, or a slot freed by an instance not ours, since the sync; with the
        sync stopped, any drift): the next claim of its slots writes it into the snapshot first
        (a dry run, which claims nothing, writes nothing)."""
        now = self._now()
        for reservation in (r for source in seen for r in source.reservations):
            held = stored.get(reservation.reservation_id)
            if held is not None and more_room_seen(held, reservation, now, heartbeat):
                self._room_seen[reservation.reservation_id] = _Room(
                    reservation.available, reservation.total, held.version
                )

    def _live(self, selection: ReservationSelection) -> list[ReservationSource]:
        """The selection resolved against what EC2 describes now."""
        target = selection.target
        if target is not None and target.reservation_id is not None:
            return selection.resolve(_by_id(self._ec2.describe(ids=[target.reservation_id])), {})
        if target is not None and target.group_arn is not None:
            members = self._ec2.group_members(target.group_arn)
            described = self._ec2.describe(ids=members) if members else []
            grouped = [in_group(r, target.group_arn) for r in described]
            return selection.resolve(_by_id(grouped), {target_key(target.group_arn): members})
        found: dict[str, ReservationSnapshot] = {}
        candidates: dict[str, list[str]] = {}
        for key, term in zip(selection.coverage_keys(), selection.terms, strict=True):
            matches = self._ec2.matching(term)
            candidates[key] = [r.reservation_id for r in matches]
            for reservation in matches:
                found.setdefault(reservation.reservation_id, reservation)
        return selection.resolve(found, candidates)

    def claim(
        self, reservation_id: str, count: int, take: Callable[[int], bool] | None = None
    ) -> int | None:
        """Take up to `count` slots before asking EC2, so concurrent workers never race for the
        last ones; None when no snapshot exists (nothing to claim against: ask EC2 directly).
        `take(n)`: the write that takes n slots, conditioned on their being claimable (False
        when they are not): a launch's writes its intent with them in one transaction.

        Room this launcher's own look saw beyond the snapshot goes into it first, unless a
        launcher or the sync wrote it since the read before the look (its version): every
        worker's claims then see it."""
        room = self._room_seen.pop(reservation_id, None)
        if room is not None:
            self._snapshots.catch_up(
                reservation_id, room.available, room.total, expected_version=room.version
            )
        first = take or partial(self._snapshots.take_claimable, reservation_id)
        if count > 0 and first(count):
            # The whole count, conditioned on what `claimable` checks (issue 38: no read first);
            # fewer slots, none, or no snapshot: read, and take what it allows.
            return count
        for _ in range(CLAIM_TRIES):
            stored = self._snapshots.get(reservation_id)
            if stored is None:
                return None
            allowed = stored.snapshot.claimable(count)
            if allowed == 0:
                return 0
            if (take or partial(self._snapshots.take, reservation_id))(allowed):
                return allowed
        return 0

    def give_back(self, reservation_id: str, count: int) -> None:
        """Slots claimed but not launched into (never above the reservation's total)."""
        stored = self._snapshots.get(reservation_id) if count > 0 else None
        if stored is not None:
            self._snapshots.add(reservation_id, count, at_most=stored.snapshot.total)

    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None:
        self._snapshots.mark_exhausted(reservation_ids)

    def landed_in(
        self, node_class: NodeClass, reservation_ids: Collection[str], known: Collection[str]
    ) -> dict[str, ReservationSnapshot]:
        """The snapshots of the reservations the NodeClass's coverage lists that a launch's
        instances landed in and `known` (what its read returned) lacks: a group's member EC2
        chose that the read did not reach (one BatchGetItem of those, however many members the
        group has), so the record names its type and dates. The members of a group landed in
        are read first by the next launch into it. No read when each is known, or is in no
        coverage kept (an open reservation EC2 matched on its own: named by id only)."""
        selection = selection_of(node_class)
        key = tuple(selection.coverage_keys())
        kept = self._kept.get(key)
        listed = {m for c in kept[1].values() for m in c.members} if kept else set()
        landed = listed.intersection(reservation_ids)
        if selection.target is not None and selection.target.group_arn is not None and landed:
            self._landed[key] = frozenset(landed)
        unread = sorted(landed.difference(known))
        stored = self._snapshots.snapshots(unread)[0] if unread else {}
        return {k: held.snapshot for k, held in stored.items()}

    def note_launched(self, launched: Mapping[str, int]) -> None:
        """Launches into reservations take their slots at once, for every worker (never below 0)."""
        for reservation_id, count in sorted(launched.items()):
            if count > 0 and not self._snapshots.take(reservation_id, count):
                self._snapshots.empty(reservation_id)


def _any_usable(sources: Sequence[ReservationSource], scope: ReservationScope) -> bool:
    """Room any request in `scope` may use (when the caller does not say what its request could
    use): interruptible capacity is opt-in, so a loan's room does not spare the look (a request
    that opts in only costs one more look per 30 s)."""
    return any(
        r.usable and not r.interruptible and scope.admits((r.instance_type, r.zone))
        for s in sources
        for r in s.reservations
    )


def _by_id(reservations: Sequence[ReservationSnapshot]) -> dict[str, ReservationSnapshot]:
    return {r.reservation_id: r for r in reservations}


def _heartbeat(needed: Collection[str], coverage: Mapping[str, Coverage]) -> datetime | None:
    """When the sync last looked at every snapshot `needed` reaches: its coverage of them, written
    every run (a snapshot it found unchanged is not written again: `unchanged`). None when a key
    is not covered."""
    if not needed or any(k not in coverage for k in needed):
        return None
    return datetime.fromtimestamp(min(coverage[k].synced_at for k in needed), UTC)
