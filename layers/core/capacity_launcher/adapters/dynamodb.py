"""DynamoDB item (de)serialisation shared by the stores; each store owns its own keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import cancellation_reasons, error_code
from capacity_launcher.domain.errors import classify, retryable_error

_BATCH_GET_LIMIT = 100
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(_numbers(v)) for k, v in values.items() if v is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def batch_get(db: Any, table: str, keys: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every item of `keys` that exists, read consistently, 100 keys a call."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH_GET_LIMIT):
        request: dict[str, Any] = {
            table: {"Keys": list(keys[start : start + _BATCH_GET_LIMIT]), "ConsistentRead": True}
        }
        while request:
            try:
                response = db.batch_get_item(RequestItems=request)
            except ClientError as error:
                raise_for("BatchGetItem", error)
                raise
            found += [from_item(i) for i in response["Responses"].get(table, [])]
            request = response.get("UnprocessedKeys") or {}
    return found


def is_condition_failure(error: ClientError) -> bool:
    code = error_code(error)
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        reasons = error.response.get("CancellationReasons", [])
        return any(r.get("Code") == "ConditionalCheckFailed" for r in reasons)
    return False


def raise_for(operation: str, error: ClientError) -> None:
    """Throttling and transient faults (conflicts too) that outlasted the client's retries become
    Throttled / Transient (the message goes back to the queue); the rest propagates."""
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
