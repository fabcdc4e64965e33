"""The lifecycle of instance items (`Instance#<id>` / `Instance`): release once, adopt, read many.

The launcher writes instance items (adapters/launch_records.py); this module is what happens to
them afterwards: instance events release them exactly once, the sync reads them in batches and
adopts instances a crashed worker launched but never recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.dynamodb import (
    batch_get,
    from_item,
    is_condition_failure,
    key,
    raise_for,
    to_item,
)
from capacity_launcher.adapters.launch_records import (
    DEFAULT_RETENTION_SECONDS,
    RECORD,
    instance_pk,
    request_pk,
)
from capacity_launcher.domain.quantities import Resources

INSTANCE = "Instance"
_BATCH_GET_LIMIT = 100
# A terminated instance's item is history: it expires (the table's `ttl`) after the retention.
_GONE = frozenset({"shutting-down", "terminated"})


def item_resources(item: Mapping[str, Any]) -> Resources:
    """What one recorded instance counts against its pool's limits."""
    return Resources(
        cpu=Decimal(str(item.get("cpu", 0))),
        memory_mib=int(item.get("memoryMiB", 0)),
        gpu=int(item.get("gpu", 0)),
        instances=1,
    )


class InstanceRecords:
    def __init__(
        self,
        table_name: str,
        dynamodb: Any | None = None,
        *,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")
        self._retention = retention_seconds
        self._clock = clock

    def _state_update(self, state: str, expression: str) -> tuple[str, dict[str, Any]]:
        """`expression` (which sets #state = :state) plus the expiry a terminal state brings."""
        values: dict[str, Any] = {":state": state}
        if state in _GONE:
            expression += ", #ttl = :ttl"
            values[":ttl"] = int(self._clock()) + self._retention
        return expression, values

    def get(self, instance_id: str) -> dict[str, Any] | None:
        """One eventually consistent GetItem: the cheap test of whether an instance is ours."""
        try:
            item = self._db.get_item(
                TableName=self._table, Key=key(instance_pk(instance_id), INSTANCE)
            ).get("Item")
        except ClientError as error:
            raise_for("GetItem", error)
            raise
        return from_item(item) if item else None

    def many(self, instance_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Instance items by id, for the ids that have one (BatchGetItem, 100 keys at a time)."""
        ids = sorted(set(instance_ids))
        items = batch_get(self._db, self._table, [key(instance_pk(i), INSTANCE) for i in ids])
        return {str(item["instanceId"]): item for item in items}

    def release(self, instance_id: str, state: str, at: str) -> dict[str, Any] | None:
        """Record a stop or termination; the item if this call released it, None if released before.

        The condition makes it exactly once, whatever order or number of events arrive.
        """
        try:
            expression, values = self._state_update(state, "SET #state = :state, releasedAt = :at")
            response = self._db.update_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(releasedAt)",
                ExpressionAttributeNames=_names(values),
                ExpressionAttributeValues=to_item({**values, ":at": at}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("UpdateItem", error)
            self._set_state(instance_id, state)
            return None
        return from_item(response["Attributes"])

    def rearm(self, instance_id: str) -> None:
        """A released instance is running again (started after a stop): release it next time."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                UpdateExpression="SET #state = :running REMOVE releasedAt, #ttl",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#state": "state", "#ttl": "ttl"},
                ExpressionAttributeValues={":running": {"S": "running"}},
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("UpdateItem", error)

    def adopt(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Write items for instances that have none; the ids actually adopted."""
        adopted = []
        for values in items:
            item = {"pk": instance_pk(str(values["instanceId"])), "sk": INSTANCE, **values}
            try:
                self._db.put_item(
                    TableName=self._table,
                    Item=to_item(item),
                    ConditionExpression="attribute_not_exists(pk)",
                )
            except ClientError as error:
                if is_condition_failure(error):
                    continue
                raise_for("PutItem", error)
            adopted.append(str(values["instanceId"]))
        return adopted

    def note_on_request(self, request_id: str, instance_id: str, state: str) -> None:
        """The request record remembers which of its instances have stopped or terminated."""
        try:
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
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("UpdateItem", error)

    def _set_state(self, instance_id: str, state: str) -> None:
        try:
            expression, values = self._state_update(state, "SET #state = :state")
            self._db.update_item(
                TableName=self._table,
                Key=key(instance_pk(instance_id), INSTANCE),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=_names(values),
                ExpressionAttributeValues=to_item(values),
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("UpdateItem", error)


def _names(values: Mapping[str, Any]) -> dict[str, str]:
    names = {"#state": "state"}
    if ":ttl" in values:
        names["#ttl"] = "ttl"
    return names
