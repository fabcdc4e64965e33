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
watermark read, so a window is counted once whatever runs or retries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.accounting.team_usage import ReservationHours, UsageBucket
from capacity_launcher.domain.errors import CapacityLauncherError, ConditionFailed

WATERMARK = ("Usage", "CountedUntil")
DAY_PREFIX = "Usage#"
INSTANCES = "Instances#"
RESERVATION = "Reservation#"
# DynamoDB's limit on one transaction: the watermark and 99 buckets.
MAX_ITEMS = 100
_ABSENT = "-"


class TooManyBuckets(CapacityLauncherError):
    """A window with more buckets than one transaction holds."""


class UsageStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def counted_until(self) -> datetime | None:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(*WATERMARK), ConsistentRead=True
            ).get("Item")
        found = from_item(item).get("countedUntil") if item else None
        return datetime.fromisoformat(str(found)) if found else None

    def add(
        self,
        since: datetime | None,
        until: datetime,
        usage: Mapping[UsageBucket, float],
        reservations: Iterable[ReservationHours],
    ) -> bool:
        """Add a window's hours and move the watermark from `since` (None: never set) to
        `until`, all or nothing; False when another writer moved the watermark first."""
        updates = [_instance_update(self._table, k, h) for k, h in usage.items() if h > 0]
        for r in reservations:
            updates += [
                _reservation_update(self._table, r, day, paid, r.used.get(day, 0.0))
                for day, paid in r.paid.items()
            ]
        if len(updates) + 1 > MAX_ITEMS:
            raise TooManyBuckets(
                f"usage roll-up: {len(updates)} buckets in one window, more than one "
                f"transaction holds ({MAX_ITEMS - 1})"
            )
        watermark: dict[str, Any] = {
            "TableName": self._table,
            "Item": to_item({"pk": WATERMARK[0], "sk": WATERMARK[1], "countedUntil": _iso(until)}),
        }
        if since is None:
            watermark["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            watermark["ConditionExpression"] = "countedUntil = :since"
            watermark["ExpressionAttributeValues"] = {":since": {"S": _iso(since)}}
        try:
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=[{"Put": watermark}, *updates])
        except ConditionFailed:
            return False  # only the watermark is conditioned
        return True

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


def _iso(moment: datetime) -> str:
    return moment.isoformat()


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


def _instance_update(table: str, usage: UsageBucket, hours: float) -> dict[str, Any]:
    parts = (
        usage.requester,
        usage.node_pool,
        usage.capacity_kind,
        usage.instance_type,
        usage.reservation_id,
    )
    sort_key = INSTANCES + "#".join(_text(p) for p in parts)
    names = {"#h": "hours"}
    values: dict[str, Any] = {":h": round(hours, 6), ":k": usage.capacity_kind}
    expression = "ADD #h :h SET capacityKind = :k, instanceType = :t"
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
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
        }
    }


def _reservation_update(
    table: str, reservation: ReservationHours, day: date, paid: float, used: float
) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": key(f"{DAY_PREFIX}{day.isoformat()}", RESERVATION + reservation.reservation_id),
            "UpdateExpression": (
                "ADD paidHours :paid, usedHours :used "
                "SET reservationId = :id, reservationType = :rt, instanceType = :t"
            ),
            "ExpressionAttributeValues": to_item(
                {
                    ":paid": round(paid, 6),
                    ":used": round(used, 6),
                    ":id": reservation.reservation_id,
                    ":rt": reservation.reservation_type,
                    ":t": reservation.instance_type,
                }
            ),
        }
    }
