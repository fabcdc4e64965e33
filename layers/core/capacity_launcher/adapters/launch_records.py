"""Request records and launch intents in the state table (instances: instance_records.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import (
    batch_get,
    batch_write,
    from_item,
    key,
    put_if_absent,
    to_item,
)
from capacity_launcher.adapters.intent_items import (
    INTENT_PREFIX,
    complete,
    completion_writes,
    intent_from_item,
    release,
)
from capacity_launcher.adapters.reservation_slots import claim_update
from capacity_launcher.domain.capacity.capacity_wait import HeldWait
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.index_shards import read_values, shard_value
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus

RECORD = "Record"
# The hash of the first body a requestId arrived with (domain LaunchRequest.body_hash).
BODY = "Body"
# How long history (records, intents, terminated instances' items) is kept: RECORD_RETENTION_DAYS.
DEFAULT_RETENTION_SECONDS = 30 * 24 * 3600
# Only a Waiting record carries `waiting` (the sparse WaitingRequests index's key, with its
# deadline as `waitingUntil`): the sync's backstop reads live waits, never history.
WAITING_INDEX = "WaitingRequests"
WAITING = "waiting"
_WAITING_STATUS = {":waiting": {"S": str(RequestStatus.WAITING)}}
# Every record carries `recentShard` (`recent#<n>`, by its requestId:
# domain/records/index_shards.py) and `receivedAt`: the RecentRequests index's keys, so operators
# list the newest records with one Query per shard, newest first, never a Scan of history.
RECENT_INDEX = "RecentRequests"
RECENT = "recent"


def request_pk(request_id: str) -> str:
    return f"Request#{request_id}"


def instance_pk(instance_id: str) -> str:
    return f"Instance#{instance_id}"


class HistoryItems:
    """A writer of the state table's history (requests' records and intents, instances' items):
    the table, its client, and when an item that became history now expires."""

    def __init__(
        self,
        table_name: str,
        dynamodb: Any | None = None,
        *,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
        clock: Callable[[], float],
    ) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")
        self._retention = retention_seconds
        self._clock = clock

    def _expiry(self) -> int:
        """The state table's TTL attribute (`ttl`, epoch seconds) for a history item written now."""
        return int(self._clock()) + self._retention


class LaunchRecords(HistoryItems):
    # -- one request's partition: its record and pointers to the intents that serve it --

    def load(self, request_id: str) -> tuple[RequestRecord | None, list[LaunchIntent]]:
        """The request's record (if finished) and its intents in attempt order: one Query of the
        partition's `Intent#`.. range, which holds the pointers and `Record` and sorts the `Body`
        hash before it (the launch path reads the hash only for a duplicate)."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND sk >= :pointers",
                ExpressionAttributeValues={
                    ":pk": {"S": request_pk(request_id)},
                    ":pointers": {"S": INTENT_PREFIX},
                },
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        record = None
        tokens = []
        for item in items:
            if item["sk"] == RECORD:
                record = RequestRecord.from_detail(json.loads(item["detail"]))
            elif str(item["sk"]).startswith(INTENT_PREFIX):
                tokens.append(str(item["sk"])[len(INTENT_PREFIX) :])
        intents = self.intents(tokens)
        return record, sorted(intents, key=lambda i: i.attempt)

    def put_record(self, record: RequestRecord, held_by: str | None = None) -> None:
        self._put_record(record, only_if_absent=False, held_by=held_by)

    def put_record_if_absent(self, record: RequestRecord) -> bool:
        return self._put_record(record, only_if_absent=True)

    def put_records(self, records: Sequence[RequestRecord]) -> None:
        """Put the records of distinct requests as `put_record` puts each (unconditionally), in
        BatchWriteItem calls of 25: the records of requests served together."""
        puts = [{"PutRequest": {"Item": to_item(self._item(r))}} for r in records]
        batch_write(self._db, self._table, puts)

    def waiting(self, request_id: str) -> tuple[RequestRecord, str | None] | None:
        """A Waiting request's record and the id of the queue message holding its wait; also a
        wait the backstop ended (its record keeps the id of the held copy it outlived)."""
        item = self._record_item(request_id)
        if item is None:
            return None
        record = RequestRecord.from_detail(json.loads(item["detail"]))
        held_by = item.get("heldBy")
        if record.is_final and not held_by:
            return None
        return record, str(held_by) if held_by else None

    def take_wait(self, request_id: str, held_by: str) -> bool:
        """The delivery of the held copy begins serving its wait; False if the wait is not held by
        it any more (the backstop ended it, or another delivery holds it now)."""
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(request_pk(request_id), RECORD),
                    UpdateExpression="ADD served :one",
                    ConditionExpression="#status = :waiting AND heldBy = :held",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={
                        ":one": {"N": "1"},
                        ":held": {"S": held_by},
                        **_WAITING_STATUS,
                    },
                )
        except ConditionFailed:
            return False
        return True

    def rehold(self, request_id: str, held_by: str | None, new: str) -> bool:
        """A wake sent a copy of a Waiting request's message: that copy holds its wait now (the
        one held before is dropped when it comes); False if the wait is not as read any more."""
        held = _held_condition(held_by)
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(request_pk(request_id), RECORD),
                    UpdateExpression="SET heldBy = :new",
                    ConditionExpression=f"#status = :waiting AND {held[0]}",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={":new": {"S": new}, **_WAITING_STATUS, **held[1]},
                )
        except ConditionFailed:
            return False
        return True

    def overdue_waits(self, deadline_before: datetime) -> list[HeldWait]:
        """Waits whose deadline is before the given time, and backstop outcomes not yet published:
        one Query of the sparse WaitingRequests index per shard value (only live waits carry its
        key; domain/records/index_shards.py)."""
        items: list[dict[str, Any]] = []
        for value in read_values(WAITING):  # each shard, and the bare value of older waits
            with aws_call("Query"):
                pages = all_pages(
                    self._db.query,
                    TableName=self._table,
                    IndexName=WAITING_INDEX,
                    KeyConditionExpression="waiting = :waiting AND waitingUntil < :before",
                    ExpressionAttributeValues={
                        ":waiting": {"S": value},
                        ":before": {"N": str(int(deadline_before.timestamp()))},
                    },
                )
                items += [from_item(i) for page in pages for i in page["Items"]]
        return [
            HeldWait(
                record=RequestRecord.from_detail(json.loads(item["detail"])),
                held_by=str(item["heldBy"]) if item.get("heldBy") else None,
                served=int(item.get("served", 0)),
                waiting_until=int(item["waitingUntil"]) if "waitingUntil" in item else None,
            )
            for item in items
        ]

    def end_wait(self, wait: HeldWait, outcome: RequestRecord) -> bool:
        """Write a wait's final record if it is still as read (Waiting, the same held copy, no
        delivery began serving it since); it stays in the index until `clear_wait`, so an outcome
        whose event was not published yet is found again."""
        detail = outcome.to_detail()
        held = _held_condition(wait.held_by)
        served = (
            ("served = :served", {":served": {"N": str(wait.served)}})
            if wait.served
            else ("attribute_not_exists(served)", {})
        )
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(request_pk(outcome.request_id), RECORD),
                    UpdateExpression="SET #status = :status, finishedAt = :at, detail = :detail",
                    ConditionExpression=f"#status = :waiting AND {held[0]} AND {served[0]}",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={
                        ":status": {"S": str(outcome.status)},
                        ":at": {"S": detail["finishedAt"]},
                        ":detail": {"S": json.dumps(detail, sort_keys=True)},
                        **_WAITING_STATUS,
                        **held[1],
                        **served[1],
                    },
                )
        except ConditionFailed:
            return False
        return True

    def clear_wait(self, request_id: str) -> None:
        """Its outcome is published: the record leaves the WaitingRequests index."""
        try:
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(request_pk(request_id), RECORD),
                    UpdateExpression="REMOVE waiting, waitingUntil",
                    ConditionExpression="attribute_exists(pk)",
                )
        except ConditionFailed:
            pass  # the record expired meanwhile: nothing is left to clear

    def _put_record(
        self, record: RequestRecord, *, only_if_absent: bool, held_by: str | None = None
    ) -> bool:
        item = self._item(record, held_by)
        condition = {"ConditionExpression": "attribute_not_exists(pk)"} if only_if_absent else {}
        try:
            with aws_call("PutItem"):
                self._db.put_item(TableName=self._table, Item=to_item(item), **condition)
        except ConditionFailed:
            if not only_if_absent:
                # No condition was asked: the record was not written, and saying nothing would
                # let its event be published with no record behind it.
                raise
            return False
        return True

    def _item(self, record: RequestRecord, held_by: str | None = None) -> dict[str, Any]:
        """The record's item: its detail, and the keys of the indexes it belongs to."""
        detail = record.to_detail()
        item = {
            "pk": request_pk(record.request_id),
            "sk": RECORD,
            "status": str(record.status),
            "nodePool": record.node_pool,
            "requester": record.requester,
            "finishedAt": detail["finishedAt"],
            "recentShard": shard_value(RECENT, record.request_id),
            "receivedAt": detail["receivedAt"],
            "detail": json.dumps(detail, sort_keys=True),
            "ttl": self._expiry(),
        }
        if held_by is not None:
            item["heldBy"] = held_by
        if record.status is RequestStatus.WAITING and record.wait_for_capacity_until is not None:
            item["waiting"] = shard_value(WAITING, record.request_id)
            item["waitingUntil"] = int(record.wait_for_capacity_until.timestamp())
        return item

    def bind_body(self, request_id: str, body_hash: str) -> str:
        """Bind the requestId to its first body: the hash it is bound to (this one if first)."""
        return self.bind_first_body(request_id, body_hash)[0]

    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]:
        """`bind_body`, and whether this call bound it: True only when no delivery bound the
        requestId before (within the retention), so nothing of the request is stored yet."""
        item = {
            "pk": request_pk(request_id),
            "sk": BODY,
            "bodyHash": body_hash,
            "ttl": self._expiry(),
        }
        if put_if_absent(self._db, self._table, item):
            return body_hash, True
        return self.bound_body(request_id) or body_hash, False

    def bound_body(self, request_id: str) -> str | None:
        """The hash of the body the requestId is bound to, if it is bound."""
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(request_pk(request_id), BODY), ConsistentRead=True
            ).get("Item")
        return str(from_item(item)["bodyHash"]) if item else None

    def get_record(self, request_id: str) -> RequestRecord | None:
        item = self._record_item(request_id)
        return RequestRecord.from_detail(json.loads(item["detail"])) if item else None

    def still_waiting(self, request_id: str) -> bool:
        """Whether the request's record says Waiting (one GetItem): a preemption asked for it
        is enforced only while it waits."""
        record = self.get_record(request_id)
        return record is not None and record.status is RequestStatus.WAITING

    def get_records(self, request_ids: Sequence[str]) -> dict[str, RequestRecord]:
        """The records of `request_ids` that exist, by id: one BatchGetItem per 100."""
        keys = [key(request_pk(r), RECORD) for r in dict.fromkeys(request_ids)]
        records = (
            RequestRecord.from_detail(json.loads(item["detail"]))
            for item in batch_get(self._db, self._table, keys)
        )
        return {record.request_id: record for record in records}

    def _record_item(self, request_id: str) -> dict[str, Any] | None:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(request_pk(request_id), RECORD), ConsistentRead=True
            ).get("Item")
        return from_item(item) if item else None

    def list_records(self, limit: int = 100) -> list[RequestRecord]:
        """For operators (the CLI): the newest `limit` records, newest first. One Query per
        shard of the RecentRequests index (its newest `limit`), merged: the cost grows with
        `limit`, not with history; the launch path never lists. Records written before the
        index existed carry no key there and are not listed (`status` still reads them)."""
        records = []
        for shard in read_values(RECENT)[1:]:  # no record was written unsharded
            with aws_call("Query"):
                page = self._db.query(
                    TableName=self._table,
                    IndexName=RECENT_INDEX,
                    KeyConditionExpression="recentShard = :shard",
                    ExpressionAttributeValues={":shard": {"S": shard}},
                    ScanIndexForward=False,
                    Limit=limit,
                )
            records += [
                RequestRecord.from_detail(json.loads(from_item(i)["detail"])) for i in page["Items"]
            ]
        return sorted(records, key=lambda r: r.received_at, reverse=True)[:limit]

    # -- intents --

    def write_intent(self, intent: LaunchIntent) -> bool:
        """Write the intent and a pointer per request it serves, and claim the slots it records
        (`claimed`) in its reservation's snapshot, in one transaction; False if it already
        exists, ConditionFailed when the snapshot has not those slots claimable (or is gone)."""
        item = to_item(
            {
                "pk": INTENT_PREFIX + intent.token,
                "sk": "Intent",
                "attempt": intent.attempt,
                "capacityType": intent.capacity_type,
                "shares": [{"requestId": s.request_id, "count": s.count} for s in intent.shares],
                "fleetInput": json.dumps(intent.fleet_input, sort_keys=True, default=str),
                "offerings": list(intent.offerings),
                "state": "pending",
                "ttl": self._expiry(),
                **({"claimed": intent.claimed} if intent.claimed else {}),
            }
        )
        transact: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        transact += [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "pk": request_pk(s.request_id),
                            "sk": INTENT_PREFIX + intent.token,
                            "ttl": self._expiry(),
                        }
                    ),
                }
            }
            for s in intent.shares
        ]
        if intent.claimed and intent.reservation_id:
            transact.append(
                {"Update": claim_update(self._table, intent.reservation_id, intent.claimed)}
            )
        try:
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=transact)
        except ConditionFailed as failed:
            if failed.failed_at(0) or not intent.claimed:
                return False
            raise
        return True

    def complete_intent(self, done: IntentCompletion) -> None:
        """Store a CreateFleet's answer on its intent, with the slots it gives back and those
        its instances took (`intent_items.complete`)."""
        complete(self._db, self._table, done)

    def release_claim(self, intent: LaunchIntent) -> None:
        """Let a pending intent's claim go, its slots given back (`intent_items.release`)."""
        release(self._db, self._table, intent)

    def completion_updates(self, completions: Iterable[IntentCompletion]) -> list[dict[str, Any]]:
        """Each intent's completion as a TransactWriteItems update, for the lease settle that
        counts its instances to carry (issue 38: no UpdateItem of its own), each with the slots
        its instances took (`noted`). One that gives slots back is stored alone
        (`complete_intent`): its give-back needs the snapshot read."""
        done = list(completions)
        if any(c.slots_back is not None for c in done):
            raise ValueError("completions: one gives slots back; store it with complete_intent")
        return [item for c in done for item in completion_writes(self._table, c)]

    def intents(self, tokens: Sequence[str]) -> list[LaunchIntent]:
        if not tokens:
            return []
        keys = [key(INTENT_PREFIX + t, "Intent") for t in tokens]
        return [intent_from_item(item) for item in batch_get(self._db, self._table, keys)]


def _held_condition(held_by: str | None) -> tuple[str, dict[str, Any]]:
    """The condition that a wait is still held by `held_by` (None: by no message)."""
    if held_by:
        return "heldBy = :held", {":held": {"S": held_by}}
    return "attribute_not_exists(heldBy)", {}
