"""Reservation snapshots shared by every worker: the state table's `Reservation` partition.

Only translation to and from DynamoDB items: what they mean is
domain/capacity/reservations.py, and the launchers read them through service/reservations.py.

The sync writes one item per reservation (sk `cr-…`, only when it changed) and one coverage item
per reservation target or selector term it resolved (sk `Covered#…`, every run: its members, each
one's instance type and zone, and the room the sync saw in each), so a launcher reads its
NodeClass's coverage items, knows whether the sync has looked at what the NodeClass names lately,
and then reads only the snapshots its request could launch into, the most room first and no more
than it needs (BatchGetItem, independent of every other NodeClass's reservations, and of how
many of its own it could use). Launchers
decrement `available` when they launch into a reservation and flag it `exhausted` on an
insufficient-capacity error, and raise it to what their own look at EC2 shows when that is more
(`catch_up`); the next sync overwrites both with what EC2 says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import batch_get, batch_write, from_item, key, to_item
from capacity_launcher.adapters.reservation_slots import (
    PARTITION,
    claim_update,
    give_back_update,
    note_update,
    snapshot_update,
)
from capacity_launcher.domain.capacity.idle_reservations import IdleState
from capacity_launcher.domain.capacity.reservation_state import (
    Coverage,
    InvalidSnapshot,
    StoredReservation,
)
from capacity_launcher.domain.capacity.reservations import (
    COVERAGE_PREFIX,
    DEFAULT_TYPE,
    ReservationSnapshot,
)
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.observability import logger

RESERVATION_PREFIX = "cr-"


class ReservationSnapshots:
    """The snapshots and coverage items in DynamoDB; each write is one conditional update."""

    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    # -- the launchers' writes ----------------------------------------------------------------

    def take(self, reservation_id: str, count: int) -> bool:
        """Take `count` slots if that many are available (False otherwise, or with no snapshot)."""
        return self._write(note_update(self._table, reservation_id, count))

    def take_claimable(self, reservation_id: str, count: int) -> bool:
        """Take `count` slots of a snapshot that has that many available and is not exhausted,
        unread (False otherwise, or with no snapshot): a worker's claim of the whole count."""
        return self._write(claim_update(self._table, reservation_id, count))

    def empty(self, reservation_id: str) -> None:
        """No slot is available any more (if there is a snapshot)."""
        self._update(
            reservation_id, "SET available = :zero ADD version :one", None, {":zero": 0, ":one": 1}
        )

    def add(self, reservation_id: str, count: int, *, at_most: int) -> bool:
        """Give `count` slots back unless that would make more than `at_most` available."""
        return self._write(give_back_update(self._table, reservation_id, count, at_most))

    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None:
        """An insufficient-capacity error said it is full: skip it until a sync sees capacity."""
        for reservation_id in sorted(set(reservation_ids)):
            self._update(
                reservation_id,
                "SET exhausted = :true ADD version :one",
                None,
                {":true": True, ":one": 1},
            )

    def catch_up(
        self, reservation_id: str, available: int, total: int, *, expected_version: int
    ) -> bool:
        """EC2's room, seen by a launcher's own look after it read the snapshot at
        `expected_version` (lifting a flag no sync would lift any more): written unless a
        launcher wrote since (then False)."""
        return self._update(
            reservation_id,
            "SET available = :available, #total = :total, exhausted = :false ADD version :one",
            "version = :version",
            {
                ":available": available,
                ":total": total,
                ":false": False,
                ":one": 1,
                ":version": expected_version,
            },
            names={"#total": "total"},
        )

    def release_slot(self, reservation_id: str, synced_at: datetime | None) -> bool:
        """An instance of ours left the reservation: its slot is available again (never above
        total), and a flag that said it had no room is lifted, since EC2 just freed one in it.
        Written only if no sync wrote the snapshot since it was read with `synced_at` (the
        sync's write holds what EC2 said after). False when nothing was written: a sync wrote
        since, or the snapshot held every slot free already and no flag."""
        as_read, values = _synced_as_read(synced_at)
        released = self._update(
            reservation_id,
            "SET exhausted = :false ADD available :one, version :one",
            f"available < #total AND {as_read}",
            {":one": 1, ":false": False, **values},
            names={"#total": "total"},
        )
        return released or self._update(
            reservation_id,
            "SET exhausted = :false ADD version :one",
            f"exhausted = :true AND {as_read}",
            {":one": 1, ":false": False, ":true": True, **values},
        )

    # -- the sync's side ----------------------------------------------------------------------

    def read(self) -> tuple[dict[str, StoredReservation], dict[str, Coverage]]:
        """Every snapshot and coverage item: one (paginated) strongly consistent Query. The sync
        and operators read this; a launcher reads only `coverage` and `snapshots` it needs."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": PARTITION}},
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        stored, _ = _snapshots_of(i for i in items if str(i["sk"]).startswith(RESERVATION_PREFIX))
        coverage = {
            str(i["sk"]): _coverage(i) for i in items if str(i["sk"]).startswith(COVERAGE_PREFIX)
        }
        return stored, coverage

    def coverage(self, keys: Sequence[str]) -> dict[str, Coverage]:
        """The coverage items of `keys` that exist (one strongly consistent BatchGetItem)."""
        return self.coverage_with(keys, [])[0]

    def coverage_with(
        self, keys: Sequence[str], reservation_ids: Sequence[str]
    ) -> tuple[dict[str, Coverage], dict[str, StoredReservation], set[str]]:
        """The coverage items of `keys` that exist, and the snapshots of `reservation_ids` that
        parse and the ids of those that do not, read together (strongly consistent BatchGetItem,
        100 keys a call)."""
        wanted = [*sorted(set(keys)), *sorted(set(reservation_ids))]
        items = batch_get(self._db, self._table, [key(PARTITION, k) for k in wanted])
        covering = [i for i in items if str(i["sk"]).startswith(COVERAGE_PREFIX)]
        stored, invalid = _snapshots_of(i for i in items if i not in covering)
        return {str(i["sk"]): _coverage(i) for i in covering}, stored, invalid

    def snapshots(
        self, reservation_ids: Sequence[str]
    ) -> tuple[dict[str, StoredReservation], set[str]]:
        """The snapshots of `reservation_ids` that parse, and the ids of those that do not
        (strongly consistent BatchGetItem, 100 keys a call)."""
        ids = sorted(set(reservation_ids))
        return _snapshots_of(batch_get(self._db, self._table, [key(PARTITION, r) for r in ids]))

    def get(self, reservation_id: str) -> StoredReservation | None:
        parsed = self._read_one(reservation_id)
        return parsed if isinstance(parsed, StoredReservation) else None

    def _read_one(self, reservation_id: str) -> StoredReservation | InvalidSnapshot | None:
        """One snapshot as stored (strongly consistent), parsed or said to be unparseable."""
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(PARTITION, reservation_id), ConsistentRead=True
            ).get("Item")
        return _parsed(from_item(item)) if item else None

    def invalid(self) -> list[InvalidSnapshot]:
        """Stored snapshots that do not parse (the next sync of their reservation replaces them)."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={
                    ":pk": {"S": PARTITION},
                    ":prefix": {"S": RESERVATION_PREFIX},
                },
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
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
            with aws_call("PutItem"):
                self._db.put_item(TableName=self._table, Item=to_item(item), **condition)
        except ConditionFailed:
            if expected_version is not None or not self._unreadable(reservation_id_of(item)):
                return False
            # What is stored does not parse (so it was "not seen"): EC2's view replaces it.
            self.forget([reservation_id_of(item)])
            return self.save(reservation, None)
        return True

    def _unreadable(self, reservation_id: str) -> bool:
        return isinstance(self._read_one(reservation_id), InvalidSnapshot)

    def save_coverage(self, coverage: Iterable[Coverage]) -> None:
        """Every coverage item, written each run (its `syncedAt` says the sync looked): nothing
        is decided on their old contents, so they go unconditioned, 25 to a BatchWriteItem."""
        puts = [{"PutRequest": {"Item": to_item(_coverage_item(entry))}} for entry in coverage]
        batch_write(self._db, self._table, puts)

    def forget(self, keys: Iterable[str]) -> None:
        """Snapshots and coverage no NodeClass uses any more (unconditioned deletes, batched)."""
        deletes = [{"DeleteRequest": {"Key": key(PARTITION, sk)}} for sk in sorted(set(keys))]
        batch_write(self._db, self._table, deletes)

    def _update(
        self,
        reservation_id: str,
        expression: str,
        condition: str | None,
        values: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
    ) -> bool:
        """One update of an existing snapshot; False when it is absent or the condition fails."""
        request = snapshot_update(self._table, reservation_id, expression, condition, values, names)
        return self._write(request)

    def _write(self, request: Mapping[str, Any]) -> bool:
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(**request)
        except ConditionFailed:
            return False
        return True


def _synced_as_read(synced_at: datetime | None) -> tuple[str, dict[str, Any]]:
    """A condition that no sync wrote the snapshot since it was read with `synced_at`."""
    if synced_at is None:
        return "attribute_not_exists(syncedAt)", {}
    return "syncedAt = :syncedAt", {":syncedAt": _iso(synced_at)}


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
        "reservationType": s.reservation_type,
        "interruptible": s.interruptible,
        "startDate": _iso(s.start_date) if s.start_date else None,
        "ownerId": s.owner_id,
        "tags": dict(s.tags),
        "groups": list(s.groups),
        "exhausted": s.exhausted,
        "placementGroup": s.placement_group,
        # DynamoDB refuses empty map keys: an absent requester is never a key.
        "usageByRequester": {k: n for k, n in stored.usage_by_requester.items() if k},
        "announced": sorted(stored.announced),
        "syncedAt": _iso(stored.synced_at) if stored.synced_at else None,
        "version": stored.version,
        "idle": _idle_item(stored.idle) if stored.idle else None,
    }


def _idle_item(idle: IdleState) -> dict[str, Any]:
    """The idle accounting: a fixed set of numbers and two times, never a growing list."""
    return {
        "countedUntil": _iso(idle.counted_until),
        "periodStart": _iso(idle.period_start),
        "total": idle.total,
        "available": idle.available,
        "periodPaidHours": idle.period_paid_hours,
        "periodIdleHours": idle.period_idle_hours,
        "peakUtilization": idle.peak_utilization,
        "paidHours": idle.paid_hours,
        "idleHours": idle.idle_hours,
    }


def _idle(item: Mapping[str, Any] | None) -> IdleState | None:
    if not item:
        return None
    return IdleState(
        counted_until=datetime.fromisoformat(str(item["countedUntil"])),
        period_start=datetime.fromisoformat(str(item["periodStart"])),
        total=int(item.get("total", 0)),
        available=int(item.get("available", 0)),
        period_paid_hours=float(item.get("periodPaidHours", 0)),
        period_idle_hours=float(item.get("periodIdleHours", 0)),
        peak_utilization=float(item.get("peakUtilization", 0)),
        paid_hours=float(item.get("paidHours", 0)),
        idle_hours=float(item.get("idleHours", 0)),
    )


def _snapshots_of(
    items: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, StoredReservation], set[str]]:
    stored: dict[str, StoredReservation] = {}
    invalid: set[str] = set()
    for item in items:
        parsed = _parsed(item)
        if isinstance(parsed, StoredReservation):
            stored[parsed.snapshot.reservation_id] = parsed
        else:
            invalid.add(parsed.reservation_id)
    return stored, invalid


def _coverage_item(entry: Coverage) -> dict[str, Any]:
    return {
        "pk": PARTITION,
        "sk": entry.key,
        "syncedAt": int(entry.synced_at),
        "members": list(entry.members),
        # "instance type/zone" per member: launchers skip the snapshots they cannot use.
        "placements": {m: "/".join(p) for m, p in entry.placements.items()},
        # The room the sync saw in each: launchers read the most room first (and no more).
        "room": dict(entry.room),
    }


def _coverage(item: Mapping[str, Any]) -> Coverage:
    placements: dict[str, tuple[str, str]] = {}
    for member, text in (item.get("placements") or {}).items():
        instance_type, _, zone = str(text).partition("/")
        if instance_type and zone:
            placements[str(member)] = (instance_type, zone)
    return Coverage(
        str(item["sk"]),
        float(item.get("syncedAt", 0)),
        tuple(str(m) for m in item.get("members", [])),
        placements,
        {str(m): int(n) for m, n in (item.get("room") or {}).items()},
    )


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
    start_date = item.get("startDate")
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
        reservation_type=str(item.get("reservationType") or DEFAULT_TYPE),
        interruptible=bool(item.get("interruptible", False)),
        start_date=datetime.fromisoformat(start_date) if start_date else None,
        exhausted=bool(item.get("exhausted", False)),
        placement_group=str(item["placementGroup"]) if item.get("placementGroup") else None,
    )
    return StoredReservation(
        snapshot=snapshot,
        usage_by_requester={
            str(k): int(v) for k, v in (item.get("usageByRequester") or {}).items()
        },
        announced=frozenset(str(a) for a in item.get("announced") or ()),
        synced_at=datetime.fromisoformat(synced_at) if synced_at else None,
        version=int(item.get("version", 0)),
        idle=_idle(item.get("idle")),
    )


def _iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()
