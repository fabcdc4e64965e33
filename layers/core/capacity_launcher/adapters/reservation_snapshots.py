"""Reservation snapshots shared by every worker: the state table's `Reservation` partition.

The sync writes one item per reservation (sk `cr-…`) and one coverage item per reservation target
or selector term it resolved (sk `Covered#…`), so a launcher resolves a NodeClass's reservations
with one Query and knows whether the sync has already seen what the NodeClass names. Launchers
decrement `available` when they launch into a reservation and flag it `exhausted` on an
insufficient-capacity error; the next sync overwrites both with what EC2 says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.dynamodb import (
    from_item,
    is_condition_failure,
    key,
    raise_for,
    to_item,
)
from capacity_launcher.domain.config import (
    CapacityReservationSelectorTerm,
    NodeClass,
)
from capacity_launcher.domain.offerings import ReservationSnapshot
from capacity_launcher.domain.planning import ReservationSource, ReservedTarget
from capacity_launcher.observability import logger

PARTITION = "Reservation"
RESERVATION_PREFIX = "cr-"
COVERAGE_PREFIX = "Covered#"
# Snapshots older than this mean the sync has stopped: launchers then ask EC2 directly.
STALE_AFTER_SECONDS = 300

# Events already announced for the current crossing (re-armed when the condition clears).
EXHAUSTED = "exhausted"
UTILIZATION_HIGH = "utilizationHigh"
EXPIRING = "expiring"


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
    """One reservation target or selector term the sync resolved, and when."""

    key: str
    synced_at: float
    members: tuple[str, ...] = ()


def target_key(id_or_arn: str) -> str:
    return f"{COVERAGE_PREFIX}target:{id_or_arn}"


def selector_key(term: CapacityReservationSelectorTerm) -> str:
    canonical = term.model_dump(mode="json", by_alias=True, exclude_none=True)
    return f"{COVERAGE_PREFIX}selector:{json.dumps(canonical, sort_keys=True)}"


def needed_coverage(node_class: NodeClass) -> list[str]:
    """The coverage keys a NodeClass's reservations are resolved from."""
    spec = node_class.spec
    target = node_class.spec.reservation_target
    if target is not None:
        name = target.capacity_reservation_id or target.capacity_reservation_resource_group_arn
        return [target_key(name or "")]
    return [selector_key(t) for t in spec.capacity_reservation_selector_terms or []]


def term_matches(term: CapacityReservationSelectorTerm, reservation: ReservationSnapshot) -> bool:
    """A selector term's fields ANDed, as DescribeCapacityReservations filters them (active only
    unless the term names an id)."""
    if term.id:
        return reservation.reservation_id == term.id
    if reservation.state != "active":
        return False
    if term.owner_id and reservation.owner_id != term.owner_id:
        return False
    if (
        term.instance_match_criteria
        and reservation.instance_match_criteria != term.instance_match_criteria
    ):
        return False
    return all(reservation.tags.get(k) == v for k, v in (term.tags or {}).items())


class ReservationSnapshots:
    """The launcher's `Reservations` port, read from the shared snapshots; EC2 when they lack it."""

    def __init__(
        self,
        table_name: str,
        dynamodb: Any | None = None,
        ec2_reservations: CapacityReservations | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")
        self._ec2_reservations = ec2_reservations
        self._clock = clock

    @property
    def _ec2(self) -> CapacityReservations:
        # Built on first use: the instance-events function never asks EC2 anything.
        if self._ec2_reservations is None:
            self._ec2_reservations = CapacityReservations()
        return self._ec2_reservations

    # -- the launcher's port ----------------------------------------------------------------

    def sources(self, node_class: NodeClass) -> list[ReservationSource]:
        needed = needed_coverage(node_class)
        if not needed:
            return []
        stored, coverage, invalid = self._read()
        snapshots = {k: s.snapshot for k, s in stored.items()}
        fresh_after = self._clock() - STALE_AFTER_SECONDS
        members = {m for k in needed if k in coverage for m in coverage[k].members}
        if invalid & members or not all(
            k in coverage and coverage[k].synced_at >= fresh_after for k in needed
        ):
            # Not synced recently, or a snapshot it needs does not parse: ask EC2 itself.
            return [_with_flags(s, snapshots) for s in self._ec2.sources(node_class)]
        return _resolve(node_class, snapshots, coverage)

    def note_launched(self, launched: Mapping[str, int]) -> None:
        """Launches into reservations take their slots at once, for every worker (never below 0)."""
        for reservation_id, count in sorted(launched.items()):
            if count <= 0:
                continue
            taken = self._update(
                reservation_id,
                "ADD available :minus, version :one",
                "available >= :count",
                {":minus": -count, ":one": 1, ":count": count},
            )
            if not taken:
                self._update(
                    reservation_id,
                    "SET available = :zero ADD version :one",
                    None,
                    {
                        ":zero": 0,
                        ":one": 1,
                    },
                )

    def claim(self, reservation_id: str, count: int) -> int | None:
        """Take up to `count` slots before asking EC2, so concurrent workers never race for the
        last ones; None when no snapshot exists (nothing to claim against: ask EC2 directly)."""
        for _ in range(_CLAIM_TRIES):
            stored = self.get(reservation_id)
            if stored is None:
                return None
            available = stored.snapshot.available
            if stored.snapshot.exhausted or available <= 0:
                return 0
            take = min(count, available)
            if self._update(
                reservation_id,
                "ADD available :minus, version :one",
                "available >= :take",
                {":minus": -take, ":one": 1, ":take": take},
            ):
                return take
        return 0

    def give_back(self, reservation_id: str, count: int) -> None:
        """Slots claimed but not launched into (never above the reservation's total)."""
        stored = self.get(reservation_id) if count > 0 else None
        if stored is not None:
            self._update(
                reservation_id,
                "ADD available :count, version :one",
                "available <= :ceiling",
                {":count": count, ":one": 1, ":ceiling": stored.snapshot.total - count},
            )

    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None:
        """An insufficient-capacity error said it is full: skip it until a sync sees capacity."""
        for reservation_id in sorted(set(reservation_ids)):
            self._update(
                reservation_id,
                "SET exhausted = :true ADD version :one",
                None,
                {":true": True, ":one": 1},
            )

    def release_slot(self, reservation_id: str) -> bool:
        """An instance left the reservation: its slot is available again (never above total)."""
        return self._update(
            reservation_id,
            "ADD available :one, version :one",
            "available < #total",
            {":one": 1},
            names={"#total": "total"},
        )

    # -- the sync's side ----------------------------------------------------------------------

    def read(self) -> tuple[dict[str, StoredReservation], dict[str, Coverage]]:
        """Every snapshot and coverage item: one (paginated) strongly consistent Query."""
        stored, coverage, _ = self._read()
        return stored, coverage

    def _read(self) -> tuple[dict[str, StoredReservation], dict[str, Coverage], set[str]]:
        """The snapshots that parse, the coverage, and the ids of those that do not."""
        try:
            pages = self._db.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": PARTITION}},
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        except ClientError as error:
            raise_for("Query", error)
            raise
        stored: dict[str, StoredReservation] = {}
        coverage: dict[str, Coverage] = {}
        invalid: set[str] = set()
        for item in items:
            sk = str(item["sk"])
            if sk.startswith(RESERVATION_PREFIX):
                parsed = _parsed(item)
                if isinstance(parsed, StoredReservation):
                    stored[sk] = parsed
                else:
                    invalid.add(sk)
            elif sk.startswith(COVERAGE_PREFIX):
                coverage[sk] = Coverage(
                    sk, float(item.get("syncedAt", 0)), tuple(item.get("members", []))
                )
        return stored, coverage, invalid

    def get(self, reservation_id: str) -> StoredReservation | None:
        parsed = self._read_one(reservation_id)
        return parsed if isinstance(parsed, StoredReservation) else None

    def _read_one(self, reservation_id: str) -> StoredReservation | InvalidSnapshot | None:
        """One snapshot as stored (strongly consistent), parsed or said to be unparseable."""
        try:
            item = self._db.get_item(
                TableName=self._table, Key=key(PARTITION, reservation_id), ConsistentRead=True
            ).get("Item")
        except ClientError as error:
            raise_for("GetItem", error)
            raise
        return _parsed(from_item(item)) if item else None

    def invalid(self) -> list[InvalidSnapshot]:
        """Stored snapshots that do not parse (the next sync of their reservation replaces them)."""
        try:
            pages = self._db.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={
                    ":pk": {"S": PARTITION},
                    ":prefix": {"S": RESERVATION_PREFIX},
                },
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        except ClientError as error:
            raise_for("Query", error)
            raise
        return [p for p in (_parsed(i) for i in items) if isinstance(p, InvalidSnapshot)]

    def list(self) -> list[StoredReservation]:
        """Every snapshot, by id (for operators: `capacity-launcher get reservations`)."""
        stored, _ = self.read()
        return [stored[k] for k in sorted(stored)]

    def save(self, reservation: StoredReservation, expected_version: int | None) -> bool:
        """Write a synced snapshot unless a launcher changed it since it was read (then False).

        `expected_version` None means the sync saw no snapshot: write only if there still is none.
        """
        item = _item(reservation)
        if expected_version is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :version",
                "ExpressionAttributeValues": {":version": {"N": str(expected_version)}},
            }
        try:
            self._db.put_item(TableName=self._table, Item=to_item(item), **condition)
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("PutItem", error)
            if expected_version is not None or not self._unreadable(reservation_id_of(item)):
                return False
            # What is stored does not parse (so it was "not seen"): EC2's view replaces it.
            self.forget([reservation_id_of(item)])
            return self.save(reservation, None)
        return True

    def _unreadable(self, reservation_id: str) -> bool:
        return isinstance(self._read_one(reservation_id), InvalidSnapshot)

    def save_coverage(self, coverage: Iterable[Coverage]) -> None:
        for entry in coverage:
            item = {
                "pk": PARTITION,
                "sk": entry.key,
                "syncedAt": int(entry.synced_at),
                "members": list(entry.members),
            }
            try:
                self._db.put_item(TableName=self._table, Item=to_item(item))
            except ClientError as error:
                raise_for("PutItem", error)

    def forget(self, keys: Iterable[str]) -> None:
        """Snapshots and coverage no NodeClass uses any more."""
        for sk in keys:
            try:
                self._db.delete_item(TableName=self._table, Key=key(PARTITION, sk))
            except ClientError as error:
                raise_for("DeleteItem", error)

    def _update(
        self,
        reservation_id: str,
        expression: str,
        condition: str | None,
        values: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
    ) -> bool:
        """One update of an existing snapshot; False when it is absent or the condition fails."""
        exists = "attribute_exists(pk)"
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": key(PARTITION, reservation_id),
            "UpdateExpression": expression,
            "ConditionExpression": f"{exists} AND {condition}" if condition else exists,
            "ExpressionAttributeValues": to_item(values),
        }
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        try:
            self._db.update_item(**request)
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise_for("UpdateItem", error)
        return True


_CLAIM_TRIES = 3


def _resolve(
    node_class: NodeClass,
    snapshots: Mapping[str, ReservationSnapshot],
    coverage: Mapping[str, Coverage],
) -> list[ReservationSource]:
    spec = node_class.spec
    target = node_class.spec.reservation_target
    if target is not None and target.capacity_reservation_id:
        found = snapshots.get(target.capacity_reservation_id)
        return [
            ReservationSource(
                ReservedTarget(reservation_id=target.capacity_reservation_id),
                (found,) if found else (),
            )
        ]
    if target is not None and target.capacity_reservation_resource_group_arn:
        arn = target.capacity_reservation_resource_group_arn
        members = coverage[target_key(arn)].members
        found_members = tuple(snapshots[m] for m in sorted(members) if m in snapshots)
        return [ReservationSource(ReservedTarget(group_arn=arn), found_members)]
    selected: dict[str, ReservationSnapshot] = {}
    for term in spec.capacity_reservation_selector_terms or []:
        for members_id in coverage[selector_key(term)].members:
            snapshot = snapshots.get(members_id)
            if snapshot is not None and term_matches(term, snapshot):
                selected.setdefault(members_id, snapshot)
    return [
        ReservationSource(ReservedTarget(reservation_id=k), (selected[k],))
        for k in sorted(selected)
    ]


def _with_flags(
    source: ReservationSource, snapshots: Mapping[str, ReservationSnapshot]
) -> ReservationSource:
    """EC2's live view, still skipping what a worker found exhausted since the last sync."""
    flagged = tuple(
        replace(r, exhausted=True)
        if r.reservation_id in snapshots and snapshots[r.reservation_id].exhausted
        else r
        for r in source.reservations
    )
    return ReservationSource(source.target, flagged)


def reservation_id_of(item: Mapping[str, Any]) -> str:
    return str(item["sk"])


def _item(stored: StoredReservation) -> dict[str, Any]:
    s = stored.snapshot
    return {
        "pk": PARTITION,
        "sk": s.reservation_id,
        "reservationId": s.reservation_id,
        "instanceType": s.instance_type,
        "zone": s.zone,
        "platform": s.platform,
        "tenancy": s.tenancy,
        "instanceMatchCriteria": s.instance_match_criteria,
        "state": s.state,
        "total": s.total,
        "available": s.available,
        "endDate": _iso(s.end_date) if s.end_date else None,
        "ownerId": s.owner_id,
        "tags": dict(s.tags),
        "groups": list(s.groups),
        "exhausted": s.exhausted,
        # DynamoDB refuses empty map keys: an absent requester is never a key.
        "usageByRequester": {k: n for k, n in stored.usage_by_requester.items() if k},
        "announced": sorted(stored.announced),
        "syncedAt": _iso(stored.synced_at) if stored.synced_at else None,
        "version": stored.version,
    }


def _parsed(item: Mapping[str, Any]) -> StoredReservation | InvalidSnapshot:
    """One stored snapshot, or why it cannot be read (it then affects only itself)."""
    try:
        return _stored(item)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        reservation_id = str(item.get("sk", ""))
        reason = f"{type(error).__name__}: {error}"
        logger.warning(
            "stored reservation snapshot does not parse: skipped",
            extra={"reservationId": reservation_id, "reason": reason},
        )
        return InvalidSnapshot(reservation_id, reason)


def _stored(item: Mapping[str, Any]) -> StoredReservation:
    end_date = item.get("endDate")
    synced_at = item.get("syncedAt")
    snapshot = ReservationSnapshot(
        reservation_id=str(item["sk"]),
        instance_type=str(item.get("instanceType", "")),
        zone=str(item.get("zone", "")),
        state=str(item.get("state", "active")),
        total=int(item.get("total", 0)),
        available=max(int(item.get("available", 0)), 0),
        platform=str(item.get("platform", "Linux/UNIX")),
        tenancy=str(item.get("tenancy", "default")),
        instance_match_criteria=str(item.get("instanceMatchCriteria", "open")),
        owner_id=item.get("ownerId"),
        end_date=datetime.fromisoformat(end_date) if end_date else None,
        tags={str(k): str(v) for k, v in (item.get("tags") or {}).items()},
        groups=tuple(item.get("groups") or ()),
        exhausted=bool(item.get("exhausted", False)),
    )
    return StoredReservation(
        snapshot=snapshot,
        usage_by_requester={
            str(k): int(v) for k, v in (item.get("usageByRequester") or {}).items()
        },
        announced=frozenset(str(a) for a in item.get("announced") or ()),
        synced_at=datetime.fromisoformat(synced_at) if synced_at else None,
        version=int(item.get("version", 0)),
    )


def _iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()
