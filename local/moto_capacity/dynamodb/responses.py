"""DynamoDB requests refused where moto is kinder than the service: empty map keys and empty key
attributes; a transaction may also meet a conflict.

DynamoDB Developer Guide, "Supported data types and naming rules": names, map keys included, are
at least one character long; a key attribute cannot be an empty string. Conflicts are in
`models.conflicts`, the cancellation DynamoDB answers in `exceptions`.
"""

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from moto.dynamodb.exceptions import KeyIsEmptyStringException, MockValidationException

from .models.conflicts import TRANSACTION_CONFLICTS, transaction_items


def _empty_map_keys(value: Any, path: str) -> Iterator[str]:
    if not isinstance(value, Mapping):
        return
    for kind, inner in value.items():
        if kind == "M" and isinstance(inner, Mapping):
            for key, nested in inner.items():
                if key == "":
                    yield path
                yield from _empty_map_keys(nested, f"{path}.{key}")
        elif kind == "L" and isinstance(inner, list):
            for index, nested in enumerate(inner):
                yield from _empty_map_keys(nested, f"{path}[{index}]")


def _refuse_empty_names(attributes: Mapping[str, Any] | None, what: str) -> None:
    for name, value in (attributes or {}).items():
        for path in _empty_map_keys(value, name):
            raise MockValidationException(
                f"One or more parameter values were invalid: {what} {path} has a map with an "
                "empty key; attribute names must be at least 1 character long"
            )


def _refuse_empty_key(key: Mapping[str, Any] | None) -> None:
    for name, value in (key or {}).items():
        if isinstance(value, Mapping) and any(v == "" for k, v in value.items() if k in ("S", "B")):
            raise KeyIsEmptyStringException(name)


def check_write(action: Mapping[str, Any]) -> None:
    """One PutItem/UpdateItem/DeleteItem/ConditionCheck body (or transaction action)."""
    _refuse_empty_key(action.get("Key"))
    _refuse_empty_names(action.get("Item"), "the item's attribute")
    _refuse_empty_names(action.get("ExpressionAttributeValues"), "the value")
    for placeholder, name in (action.get("ExpressionAttributeNames") or {}).items():
        if name == "":
            raise MockValidationException(
                "ExpressionAttributeNames contains invalid value: Empty attribute name "
                f"for key {placeholder}"
            )


def strict(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a DynamoHandler write method with the checks above (and conflicts for transactions)."""

    @functools.wraps(original)
    def checked(self: Any) -> Any:
        body = self.body
        if "TransactItems" in body:
            for entry in body["TransactItems"]:
                for action in entry.values():
                    check_write(action)
            # An action naming other than one operation is moto's to refuse (ValidationException,
            # as DynamoDB does) before anything could conflict.
            if all(len(entry) == 1 for entry in body["TransactItems"]):
                TRANSACTION_CONFLICTS.check(
                    transaction_items(self.dynamodb_backend, body["TransactItems"])
                )
        elif "RequestItems" in body:
            for requests in body["RequestItems"].values():
                for request in requests:
                    for action in request.values():
                        check_write(action)
        else:
            check_write(body)
        return original(self)

    return checked
