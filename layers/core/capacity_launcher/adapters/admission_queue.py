"""The admission queues' items in the state table (issue 37): one partition per NodePool
(`AdmissionQueue#<pool>`), one item per waiting request, sorted by priority (highest first), then
arrival, then requestId (domain/accounting/admission_queue.py holds the keys and every decision).
The head is one Query with Limit; nothing here reads a whole queue."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import from_item, key
from capacity_launcher.domain.accounting.admission_queue import QueueEntry, queue_partition
from capacity_launcher.domain.errors import ConditionFailed


class AdmissionQueueItems:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def put(self, entry: QueueEntry) -> QueueEntry | None:
        """Write the entry (not woken); the one it replaced, if any: how many times it was passed
        over is kept, its place in a wake chain returned (one UpdateItem)."""
        with aws_call("UpdateItem"):
            answer = self._db.update_item(
                TableName=self._table,
                Key=key(queue_partition(entry.pool), entry.key),
                UpdateExpression=(
                    "SET requestId = :id, priority = :priority, arrival = :arrival, "
                    "deadline = :deadline, body = :body, queueArn = :arn, wake = :zero, "
                    "passes = if_not_exists(passes, :zero), #ttl = :ttl"
                    + (", requester = :requester" if entry.requester is not None else "")
                ),
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={
                    ":id": {"S": entry.request_id},
                    ":priority": {"N": str(entry.priority)},
                    ":arrival": {"S": entry.arrival.isoformat()},
                    ":deadline": {"S": entry.deadline.isoformat()},
                    ":body": {"S": entry.body},
                    ":arn": {"S": entry.queue_arn},
                    ":zero": {"N": "0"},
                    # Kept a day past its deadline: an entry nobody removed expires on its own.
                    ":ttl": {"N": str(int(entry.deadline.timestamp()) + 86_400)},
                    **_requester(entry),
                },
                ReturnValues="ALL_OLD",
            )
        old = answer.get("Attributes")
        return _entry(entry.pool, from_item(old)) if old else None

    def head(self, pool: str, after: str | None = None, limit: int = 1) -> list[QueueEntry]:
        """The first `limit` entries of the pool's queue (after the entry keyed `after`): one
        Query, strongly consistent."""
        start = {"ExclusiveStartKey": key(queue_partition(pool), after)} if after else {}
        with aws_call("Query"):
            page = self._db.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": queue_partition(pool)}},
                ConsistentRead=True,
                Limit=limit,
                **start,
            )
        return [_entry(pool, from_item(item)) for item in page.get("Items", [])]

    def entries(self, pool: str, limit: int) -> list[QueueEntry]:
        """The first `limit` entries of the pool's queue, in order (an operator's view: pages of
        the pool's partition until `limit`, bodies left out)."""
        found: list[QueueEntry] = []
        start: dict[str, Any] = {}
        while len(found) < limit:
            with aws_call("Query"):
                page = self._db.query(
                    TableName=self._table,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": queue_partition(pool)}},
                    # Everything but the body (a launch request's, up to SQS's 256 KB).
                    ProjectionExpression=", ".join(f"#{n}" for n in _VIEWED),
                    ExpressionAttributeNames={f"#{n}": n for n in _VIEWED},
                    Limit=limit - len(found),
                    **start,
                )
            found += [_entry(pool, {"body": "", **from_item(i)}) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        return found

    def ahead(self, pool: str, entry_key: str) -> int:
        """How many entries of the pool's queue sort before `entry_key` (a dry run's "behind
        how many"): Queries that count, every page."""
        counted = 0
        start: dict[str, Any] = {}
        while True:
            with aws_call("Query"):
                page = self._db.query(
                    TableName=self._table,
                    KeyConditionExpression="pk = :pk AND sk < :key",
                    ExpressionAttributeValues={
                        ":pk": {"S": queue_partition(pool)},
                        ":key": {"S": entry_key},
                    },
                    Select="COUNT",
                    **start,
                )
            counted += int(page.get("Count", 0))
            if "LastEvaluatedKey" not in page:
                return counted
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def woken(self, entry: QueueEntry, wake: int) -> None:
        """The entry was woken as the `wake`-th of a room event's chain (if it is still there)."""
        self._update(entry, "SET wake = :wake", {":wake": {"N": str(wake)}})

    def passed_over(self, entry: QueueEntry) -> None:
        """An entry behind it is woken after it was refused again."""
        self._update(entry, "ADD passes :one", {":one": {"N": "1"}})

    def remove(self, pool: str, entry_key: str) -> None:
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key=key(queue_partition(pool), entry_key))

    def _update(self, entry: QueueEntry, expression: str, values: dict[str, Any]) -> None:
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(queue_partition(entry.pool), entry.key),
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues=values,
                )
        except ConditionFailed:
            pass  # it left the queue meanwhile (admitted, or ended)


_VIEWED = (
    "pk", "sk", "requestId", "priority", "arrival", "deadline", "queueArn", "wake", "passes",
    "requester",
)  # fmt: skip


def _requester(entry: QueueEntry) -> dict[str, Any]:
    return {":requester": {"S": entry.requester}} if entry.requester is not None else {}


def _entry(pool: str, item: dict[str, Any]) -> QueueEntry:
    return QueueEntry(
        pool=pool,
        key=str(item["sk"]),
        request_id=str(item["requestId"]),
        priority=int(item["priority"]),
        arrival=datetime.fromisoformat(str(item["arrival"])),
        deadline=datetime.fromisoformat(str(item["deadline"])),
        body=str(item["body"]),
        queue_arn=str(item["queueArn"]),
        wake=int(item.get("wake", 0)),
        passes=int(item.get("passes", 0)),
        requester=str(item["requester"]) if "requester" in item else None,
    )
