"""Instance records (domain/records/instance_records.py) as items `Instance#<id>` / `Instance`.

The one mapping between the typed record and its item (whose attributes the simulation, the
tests and operators read), and its lifecycle: the launcher puts them, instance events release
them exactly once, the sync reads them in batches and adopts what a crashed worker never recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from decimal import Decimal
from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.dynamodb import batch_get, batch_write, from_item, key, to_item
from capacity_launcher.adapters.launch_records import (
    RECORD,
    HistoryItems,
    instance_pk,
    request_pk,
)
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.instance_records import RUNNING, InstanceRecord

INSTANCE = "Instance"
# A terminated instance's item is history: it expires (the table's `ttl`) after the retention.
_GONE = frozenset({"shutting-down", "terminated"})


def to_attributes(record: InstanceRecord) -> dict[str, Any]:
    """The item's attributes (None values are not stored)."""
    return {
        "instanceId": record.instance_id,
        "requestId": record.request_id,
        "nodePool": record.node_pool,
        "nodeClass": record.node_class,
        "requester": record.requester,
        "instanceType": record.instance_type,
        "zone": record.zone,
        "capacityType": record.capacity_type,
        "capacityReservationId": record.capacity_reservation_id,
        "cpu": record.cpu,
        "memoryMiB": record.memory_mib,
        "gpu": record.gpu,
        "state": record.state,
        "launchedAt": record.launched_at,
        "adoptedAt": record.adopted_at,
        "releasedAt": record.released_at,
        "requestTags": dict(record.request_tags) or None,
        "priority": record.priority,
        "blockEnd": json.dumps(record.block_end, sort_keys=True) if record.block_end else None,
    }


def from_attributes(item: Mapping[str, Any]) -> InstanceRecord:
    def text(name: str) -> str | None:
        value = item.get(name)
        return None if value is None else str(value)

    return InstanceRecord(
        instance_id=str(item["instanceId"]),
        instance_type=str(item.get("instanceType", "")),
        capacity_type=str(item.get("capacityType", "")),
        request_id=text("requestId"),
        node_pool=text("nodePool"),
        node_class=text("nodeClass"),
        requester=text("requester"),
        zone=text("zone"),
        capacity_reservation_id=text("capacityReservationId"),
        cpu=Decimal(str(item.get("cpu", 0))),
        memory_mib=int(item.get("memoryMiB", 0)),
        gpu=int(item.get("gpu", 0)),
        state=str(item.get("state", RUNNING)),
        launched_at=text("launchedAt"),
        adopted_at=text("adoptedAt"),
        released_at=text("releasedAt"),
        request_tags={str(k): str(v) for k, v in (item.get("requestTags") or {}).items()},
        priority=None if item.get("priority") is None else int(item["priority"]),
        block_end=json.loads(str(item["blockEnd"])) if item.get("blockEnd") else None,
    )


def _item(record: InstanceRecord) -> dict[str, Any]:
    return to_item({"pk": instance_pk(record.instance_id), "sk": INSTANCE, **to_attributes(record)})


class InstanceRecords(HistoryItems):
    def _state_update(self, state: str, expression: str) -> tuple[str, dict[str, Any]]:
        """`expression` (which sets #state = :state) plus the expiry a terminal state brings."""
        values: dict[str, Any] = {":state": state}
        if state in _GONE:
            expression += ", #ttl = :ttl"
            values[":ttl"] = self._expiry()
        return expression, values

    def put(self, records: Iterable[InstanceRecord]) -> None:
        """Record launched instances (the one bounded BatchWriteItem loop)."""
        batch_write(self._db, self._table, [{"PutRequest": {"Item": _item(r)}} for r in records])

    def get(self, instance_id: str) -> InstanceRecord | None:
        """One eventually consistent GetItem: the cheap test of whether an instance is ours."""
        item = self.stored_item(instance_id, consistent=False)
        return from_attributes(item) if item else None

    def stored_item(self, instance_id: str, *, consistent: bool = True) -> dict[str, Any] | None:
        """The item as stored, every attribute (for operators and tests of the stored format)."""
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                ConsistentRead=consistent,
            ).get("Item")
        return from_item(item) if item else None

    def many(self, instance_ids: Sequence[str]) -> dict[str, InstanceRecord]:
        """Instance records by id, for the ids that have one (BatchGetItem, 100 keys at a time)."""
        ids = sorted(set(instance_ids))
        items = batch_get(self._db, self._table, [key(instance_pk(i), INSTANCE) for i in ids])
        return {str(item["instanceId"]): from_attributes(item) for item in items}

    def release(self, instance_id: str, state: str, at: str) -> InstanceRecord | None:
        """Record a stop or termination; the item if this call released it, None if released before.

        The condition makes it exactly once, whatever order or number of events arrive.
        """
        try:
            expression, values = self._state_update(state, "SET #state = :state, releasedAt = :at")
            with aws_call("UpdateItem"):
                response = self._db.update_item(
                    TableName=self._table,
                    Key=key(instance_pk(instance_id), INSTANCE),
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(releasedAt)",
                    ExpressionAttributeNames=_names(values),
                    ExpressionAttributeValues=to_item({**values, ":at": at}),
                    ReturnValues="ALL_NEW",
                )
        except ConditionFailed:
            self._set_state(instance_id, state)
            return None
        return from_attributes(from_item(response["Attributes"]))

    def rearm(self, instance_id: str) -> None:
        """A released instance is running again (started after a stop): release it next time."""
        with suppress(ConditionFailed), aws_call("UpdateItem"):
            self._db.update_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                UpdateExpression="SET #state = :running REMOVE releasedAt, #ttl",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#state": "state", "#ttl": "ttl"},
                ExpressionAttributeValues={":running": {"S": "running"}},
            )

    def adopt(self, records: Iterable[InstanceRecord]) -> list[str]:
        """Write records of instances that have none; the ids actually adopted."""
        adopted = []
        for record in records:
            try:
                with aws_call("PutItem"):
                    self._db.put_item(
                        TableName=self._table,
                        Item=_item(record),
                        ConditionExpression="attribute_not_exists(pk)",
                    )
            except ConditionFailed:
                continue
            adopted.append(record.instance_id)
        return adopted

    def note_on_request(self, request_id: str, instance_id: str, state: str) -> None:
        """The request record remembers which of its instances have stopped or terminated."""
        with suppress(ConditionFailed), aws_call("UpdateItem"):
            self._db.update_item(
                TableName=self._table,
                Key=key(request_pk(request_id), RECORD),
                UpdateExpression="ADD releasedInstanceIds :ids SET lastInstanceState = :state",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={
                    ":ids": {"SS": [instance_id]},
                    ":state": {"S": f"{instance_id}:{state}"},
                },
            )

    def _set_state(self, instance_id: str, state: str) -> None:
        expression, values = self._state_update(state, "SET #state = :state")
        with suppress(ConditionFailed), aws_call("UpdateItem"):
            self._db.update_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=_names(values),
                ExpressionAttributeValues=to_item(values),
            )


def _names(values: Mapping[str, Any]) -> dict[str, str]:
    names = {"#state": "state"}
    if ":ttl" in values:
        names["#ttl"] = "ttl"
    return names
