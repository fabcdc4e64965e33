"""Usage by team in the state table: one item per day and bucket, and the roll-up's watermark.

Only translation: what the hours mean is domain/accounting/team_usage.py, and the sync's
service/usage_rollup.py decides what to add.

- `Usage` / `CountedUntil`: the end of the last window rolled up (`countedUntil`, ISO-8601).
- `Usage#<YYYY-MM-DD>` / `Instances#<requester>#<pool>#<kind>#<type>#<reservation>`: that
  day's instance-hours of the bucket (`hours`), with the bucket's fields as attributes (`-` in
  the key for an absent value). One per distinct bucket and day: bounded by teams x pools x
  kinds x types (x reservations), never by instances or runs.
- `Usage#<YYYY-MM-DD>` / `Reservation#<cr-…>`: that day's `paidHours` and `usedHours`.

A window's hours and the new watermark are written in one transaction conditioned on the
watermark read, so a window is counted once whatever runs or retries. A window of more buckets
than one transaction holds (an estate of a hundred reservations, or teams x pools x types) is
written in parts of `PART_BUCKETS`:

- `Usage` / `Rolling`: the window being written in parts (`since`, `until`), put by its first
  part on the watermark it read; every part checks the watermark and it, and the last moves the
  watermark and deletes it. A run that finds it finishes that window (`mark`).
- Each bucket's update sets `countedTo` to the window's end, conditioned on its not being that
  end already: a part a dead run wrote is not added again by the run that finishes the window
  (the buckets a cancelled transaction names are dropped and the rest written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, to_item
from capacity_launcher.domain.accounting.team_usage import (
    ReservationHours,
    RollupMark,
    UsageBucket,
)
from capacity_launcher.domain.errors import ConditionFailed

WATERMARK = ("Usage", "CountedUntil")
ROLLING = ("Usage", "Rolling")
DAY_PREFIX = "Usage#"
INSTANCES = "Instances#"
RESERVATION = "Reservation#"
# DynamoDB's limit on one transaction is 100 items: two guard the window (the watermark, the
# window being written in parts), the rest are buckets.
GUARDS = 2
PART_BUCKETS = 100 - GUARDS
_ABSENT = "-"


class UsageStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def mark(self) -> RollupMark:
        """The watermark and a window begun in parts from it (one consistent BatchGetItem)."""
        found = {
            (i["pk"], i["sk"]): i
            for i in batch_get(self._db, self._table, [key(*WATERMARK), key(*ROLLING)])
        }
        counted = found.get(WATERMARK, {}).get("countedUntil")
        since = datetime.fromisoformat(str(counted)) if counted else None
        rolling = found.get(ROLLING, {})
        writing = (
            datetime.fromisoformat(str(rolling["until"]))
            if since is not None and rolling.get("since") == _iso(since) and rolling.get("until")
            else None
        )
        return RollupMark(since, writing)

    def add(
        self,
        since: datetime | None,
        until: datetime,
        usage: Mapping[UsageBucket, float],
        reservations: Iterable[ReservationHours],
    ) -> bool:
        """Add a window's hours and move the watermark from `since` (None: never set) to
        `until`, each bucket once; False when another writer moved the watermark, or began
        another window, first."""
        updates = [_instance_update(self._table, k, h, until) for k, h in usage.items() if h > 0]
        for r in reservations:
            updates += [
                _reservation_update(self._table, r, day, paid, r.used.get(day, 0.0), until)
                for day, paid in r.paid.items()
            ]
        parts = [updates[i : i + PART_BUCKETS] for i in range(0, len(updates), PART_BUCKETS)]
        if len(parts) <= 1:
            return self._write(self._last(since, until), updates)
        first, *middle, last = parts
        if not self._write(self._first(since, until), first):
            return False
        for part in middle:
            if not self._write(self._checks(since, until), part):
                return False
        return self._write(self._last(since, until), last)

    def _write(self, guards: Sequence[dict[str, Any]], buckets: Sequence[dict[str, Any]]) -> bool:
        """One transaction of the window's guards and these buckets; a bucket already counted in
        this window (a part a dead run wrote) is dropped and the rest written again. False when
        a guard does not hold."""
        left = list(buckets)
        while True:
            try:
                with aws_call("TransactWriteItems"):
                    self._db.transact_write_items(TransactItems=[*guards, *left])
            except ConditionFailed as failed:
                if any(failed.failed_at(n) for n in range(len(guards))):
                    return False
                counted = {n for n in range(len(left)) if failed.failed_at(len(guards) + n)}
                if not counted:
                    raise
                left = [u for n, u in enumerate(left) if n not in counted]
                continue
            return True

    def _watermark_holds(self, since: datetime | None) -> dict[str, Any]:
        if since is None:
            return {"ConditionExpression": "attribute_not_exists(pk)"}
        return {
            "ConditionExpression": "countedUntil = :since",
            "ExpressionAttributeValues": {":since": {"S": _iso(since)}},
        }

    def _first(self, since: datetime | None, until: datetime) -> list[dict[str, Any]]:
        """The first part's guards: the watermark read, and the window put (or found) as this
        one: another run's window, begun from the same watermark, refuses it."""
        rolling = {"pk": ROLLING[0], "sk": ROLLING[1], "since": _iso(since), "until": _iso(until)}
        return [
            {"ConditionCheck": {"TableName": self._table, "Key": key(*WATERMARK)}
             | self._watermark_holds(since)},
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(rolling),
                    "ConditionExpression": "attribute_not_exists(pk) OR "
                    "(#since = :since AND #until = :until)",
                    "ExpressionAttributeNames": {"#since": "since", "#until": "until"},
                    "ExpressionAttributeValues": to_item(
                        {":since": _iso(since), ":until": _iso(until)}
                    ),
                }
            },
        ]  # fmt: skip

    def _checks(self, since: datetime | None, until: datetime) -> list[dict[str, Any]]:
        """A middle part's guards: the watermark and this window, unchanged."""
        return [
            {"ConditionCheck": {"TableName": self._table, "Key": key(*WATERMARK)}
             | self._watermark_holds(since)},
            {"ConditionCheck": {"TableName": self._table, "Key": key(*ROLLING)}
             | _window_is(until)},
        ]  # fmt: skip

    def _last(self, since: datetime | None, until: datetime) -> list[dict[str, Any]]:
        """The last (or only) part's guards: the watermark moved from the one read, and the
        window in parts ended: none, or this one (another's refuses it)."""
        watermark = {"pk": WATERMARK[0], "sk": WATERMARK[1], "countedUntil": _iso(until)}
        window = _window_is(until)
        window["ConditionExpression"] = (
            f"attribute_not_exists(pk) OR {window['ConditionExpression']}"
        )
        return [
            {"Put": {"TableName": self._table, "Item": to_item(watermark)}
             | self._watermark_holds(since)},
            {"Delete": {"TableName": self._table, "Key": key(*ROLLING)} | window},
        ]  # fmt: skip

    def day(self, day: date) -> tuple[dict[UsageBucket, float], list[ReservationHours]]:
        """One day's buckets and reservations (one strongly consistent Query)."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"{DAY_PREFIX}{day.isoformat()}"}},
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        usage: dict[UsageBucket, float] = {}
        reservations: list[ReservationHours] = []
        for item in items:
            sk = str(item["sk"])
            if sk.startswith(INSTANCES):
                usage[_usage_key(day, item)] = float(item.get("hours", 0))
            elif sk.startswith(RESERVATION):
                reservations.append(
                    ReservationHours(
                        str(item["reservationId"]),
                        str(item.get("reservationType", "default")),
                        str(item.get("instanceType", "")),
                        {day: float(item.get("paidHours", 0))},
                        {day: float(item.get("usedHours", 0))},
                    )
                )
        return usage, reservations


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else _ABSENT


def _window_is(until: datetime) -> dict[str, Any]:
    return {
        "ConditionExpression": "#until = :until",
        "ExpressionAttributeNames": {"#until": "until"},
        "ExpressionAttributeValues": {":until": {"S": _iso(until)}},
    }


def _once_in(until: datetime) -> dict[str, Any]:
    """A bucket's update counted once in the window ending `until`."""
    return {
        "condition": "attribute_not_exists(#counted) OR #counted <> :until",
        "set": "#counted = :until",
        "names": {"#counted": "countedTo"},
        "values": {":until": _iso(until)},
    }


def _text(value: str | None) -> str:
    return value if value else _ABSENT


def _usage_key(day: date, item: Mapping[str, Any]) -> UsageBucket:
    def field(name: str) -> str | None:
        value = item.get(name)
        return str(value) if value else None

    return UsageBucket(
        day,
        field("requester"),
        field("nodePool"),
        str(item.get("capacityKind", "on-demand")),
        str(item.get("instanceType", "")),
        field("reservationId"),
    )


def _instance_update(
    table: str, usage: UsageBucket, hours: float, until: datetime
) -> dict[str, Any]:
    parts = (
        usage.requester,
        usage.node_pool,
        usage.capacity_kind,
        usage.instance_type,
        usage.reservation_id,
    )
    sort_key = INSTANCES + "#".join(_text(p) for p in parts)
    once = _once_in(until)
    names = {"#h": "hours", **once["names"]}
    values: dict[str, Any] = {":h": round(hours, 6), ":k": usage.capacity_kind, **once["values"]}
    expression = f"ADD #h :h SET capacityKind = :k, instanceType = :t, {once['set']}"
    values[":t"] = usage.instance_type
    for attribute, value in (
        ("requester", usage.requester),
        ("nodePool", usage.node_pool),
        ("reservationId", usage.reservation_id),
    ):
        if value:
            expression += f", {attribute} = :{attribute}"
            values[f":{attribute}"] = value
    return {
        "Update": {
            "TableName": table,
            "Key": key(f"{DAY_PREFIX}{usage.day.isoformat()}", sort_key),
            "UpdateExpression": expression,
            "ConditionExpression": once["condition"],
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
        }
    }


def _reservation_update(
    table: str,
    reservation: ReservationHours,
    day: date,
    paid: float,
    used: float,
    until: datetime,
) -> dict[str, Any]:
    once = _once_in(until)
    return {
        "Update": {
            "TableName": table,
            "Key": key(f"{DAY_PREFIX}{day.isoformat()}", RESERVATION + reservation.reservation_id),
            "UpdateExpression": (
                "ADD paidHours :paid, usedHours :used "
                f"SET reservationId = :id, reservationType = :rt, instanceType = :t, {once['set']}"
            ),
            "ConditionExpression": once["condition"],
            "ExpressionAttributeNames": once["names"],
            "ExpressionAttributeValues": to_item(
                {
                    ":paid": round(paid, 6),
                    ":used": round(used, 6),
                    ":id": reservation.reservation_id,
                    ":rt": reservation.reservation_type,
                    ":t": reservation.instance_type,
                    **once["values"],
                }
            ),
        }
    }
