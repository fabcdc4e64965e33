"""DynamoDB item (de)serialisation shared by the stores; each store owns its own keys."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import aws_call, cancellation_reasons, error_code
from capacity_launcher.domain import aws_errors, errors
from capacity_launcher.domain.aws_errors import classify, retryable_error
from capacity_launcher.domain.backoff import in_process_delay
from capacity_launcher.domain.errors import Throttled

_BATCH_GET_LIMIT = 100
BATCH_WRITE_LIMIT = 25
# BatchGetItem / BatchWriteItem calls per chunk while DynamoDB leaves keys or items unprocessed (it
# is asking us to slow down): after these, the work goes back to the queue instead of spinning here.
BATCH_ATTEMPTS = 5
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(_numbers(v)) for k, v in values.items() if v is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def put_if_absent(db: Any, table: str, item: Mapping[str, Any]) -> bool:
    """PutItem unless an item has the key already; False if one had."""
    try:
        with aws_call("PutItem"):
            db.put_item(
                TableName=table, Item=to_item(item), ConditionExpression="attribute_not_exists(pk)"
            )
    except errors.ConditionFailed:
        return False
    return True


def put_at_version(db: Any, table: str, item: Mapping[str, Any], version: int | None) -> bool:
    """PutItem if the stored item is still at `version` (None: if there is none); False if it
    moved (`item` carries its own next version)."""
    if version is None:
        return put_if_absent(db, table, item)
    try:
        with aws_call("PutItem"):
            db.put_item(
                TableName=table,
                Item=to_item(item),
                ConditionExpression="version = :seen",
                ExpressionAttributeValues={":seen": {"N": str(version)}},
            )
    except errors.ConditionFailed:
        return False
    return True


def batch_get(
    db: Any,
    table: str,
    keys: Sequence[Mapping[str, Any]],
    *,
    attempts: int = BATCH_ATTEMPTS,
    pause: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """Every item of `keys` that exists, read consistently, 100 keys a call.

    Unprocessed keys are asked again after a jittered backoff, as `batch_write` does."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH_GET_LIMIT):
        chunk = {
            table: {"Keys": list(keys[start : start + _BATCH_GET_LIMIT]), "ConsistentRead": True}
        }

        def call(request: dict[str, Any]) -> dict[str, Any]:
            with aws_call("BatchGetItem"):
                response = db.batch_get_item(RequestItems=request)
            found.extend(from_item(i) for i in response["Responses"].get(table, []))
            return response.get("UnprocessedKeys") or {}

        _until_processed("BatchGetItem", "UnprocessedKeys", chunk, call, attempts, pause)
    return found


def batch_write(
    db: Any,
    table: str,
    requests: Sequence[Mapping[str, Any]],
    *,
    attempts: int = BATCH_ATTEMPTS,
    pause: Callable[[float], None] = time.sleep,
) -> int:
    """BatchWriteItem `requests` (PutRequest/DeleteRequest) 25 at a time; the calls made.

    Unprocessed items are sent again after a jittered backoff, at most `attempts` calls per chunk;
    then Throttled (the message goes back to the queue). Errors go through `aws_call`.
    """
    calls = 0
    for start in range(0, len(requests), BATCH_WRITE_LIMIT):

        def call(request: dict[str, Any]) -> dict[str, Any]:
            with aws_call("BatchWriteItem"):
                response = db.batch_write_item(RequestItems=request)
            return response.get("UnprocessedItems") or {}

        chunk = {table: list(requests[start : start + BATCH_WRITE_LIMIT])}
        calls += _until_processed(
            "BatchWriteItem", "UnprocessedItems", chunk, call, attempts, pause
        )
    return calls


def _until_processed(
    operation: str,
    unprocessed: str,
    request: dict[str, Any],
    call: Callable[[dict[str, Any]], dict[str, Any]],
    attempts: int,
    pause: Callable[[float], None],
) -> int:
    """Call with what DynamoDB left unprocessed (it is asking us to slow down) after a jittered
    backoff, at most `attempts` calls; then Throttled. The calls made."""
    for attempt in range(1, attempts + 1):
        request = call(request)
        if not request:
            return attempt
        if attempt < attempts:
            pause(in_process_delay(attempt))
    raise Throttled(operation, unprocessed)


def is_condition_failure(error: ClientError) -> bool:
    """For adapters not yet on `aws_call` (which raises ConditionFailed instead)."""
    return aws_errors.is_condition_failure(error_code(error), cancellation_reasons(error))


def raise_for(operation: str, error: ClientError) -> None:
    """For adapters not yet on `aws_call`: throttling and transient faults that outlasted the
    client's retries become Throttled / Transient (the message goes back to the queue); the rest
    propagates."""
    code = error_code(error)
    kind = classify(code, cancellation_reasons(error))
    if kind.retryable:
        raise retryable_error(operation, code, kind) from error
    raise error


def _numbers(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers(v) for v in value]
    return value
