"""DynamoDB where moto is kinder than the service: transaction cancellations and conflicts,
empty map keys and empty key attributes.

DynamoDB API Reference, "TransactWriteItems" and "TransactionCanceledException": a cancelled
transaction lists one reason per requested item, in request order, `None` for an item without
error, and `TransactionConflict` ("Transaction is ongoing for the item") when a concurrent
transaction holds the item. DynamoDB Developer Guide, "Supported data types and naming rules":
names, map keys included, are at least one character long; a key attribute cannot be an empty
string.
"""

import functools
import json
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from moto.dynamodb.exceptions import (
    KeyIsEmptyStringException,
    MockValidationException,
    TransactionCanceledException,
)

TRANSACT_WRITE = "dynamodb:TransactWriteItems"
CANCELLED = "TransactionCanceledException"
# The reason codes and messages DynamoDB documents for TransactionCanceledException.
CANCELLATION_MESSAGES: dict[str, str | None] = {
    "None": None,
    "ConditionalCheckFailed": "The conditional request failed",
    "ItemCollectionSizeLimitExceeded": "Collection size exceeded",
    "TransactionConflict": "Transaction is ongoing for the item",
    "ProvisionedThroughputExceeded": (
        "The level of configured provisioned throughput for the table was exceeded. "
        "Consider increasing your provisioning level with the UpdateTable API."
    ),
    "ThrottlingError": (
        "Throughput exceeds the current capacity of your table or index. DynamoDB is "
        "automatically scaling your table or index so please try again shortly."
    ),
    "ValidationError": "One or more parameter values were invalid",
}


def parse_cancellation_reasons(reasons: object) -> tuple[str, ...]:
    """Validated reason codes, one per item of the transaction, in request order."""
    if not isinstance(reasons, list | tuple) or not reasons:
        raise ValueError("cancellationReasons must be a non-empty list of reason codes")
    unknown = [r for r in reasons if r not in CANCELLATION_MESSAGES]
    if unknown:
        raise ValueError(
            f"cancellationReasons has unknown codes {unknown}; "
            f"known: {sorted(CANCELLATION_MESSAGES)}"
        )
    return tuple(reasons)


def cancelled(reasons: tuple[str, ...]) -> TransactionCanceledException:
    """The error DynamoDB answers: the reasons in the message and in CancellationReasons."""
    return TransactionCanceledException(
        [(None if r == "None" else r, CANCELLATION_MESSAGES[r], None) for r in reasons]
    )


class TransactionConflicts:
    """Cancels a TransactWriteItems with `TransactionConflict` at a seeded rate, when it touches
    an item an earlier transaction touched.

    Real conflicts need two transactions in flight on one item at once. moto runs one request
    per service at a time (see registration), so they can never overlap here: the rate stands in
    for how often they would.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rate = 0.0
        self.seed: int | None = None
        self._rng = random.Random()
        self._touched: set[tuple[str, str]] = set()
        self.raised = 0

    def configure(self, rate: object, seed: object = None) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise ValueError("rate must be a number within [0, 1] (0 turns conflicts off)")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError("seed must be an integer")
        with self._lock:
            self.rate, self.seed = float(rate), seed
            self._rng = random.Random(seed)
            self._touched.clear()
            self.raised = 0

    def check(self, items: list[tuple[str, str]]) -> None:
        """Raise the cancellation, or remember the items as touched."""
        with self._lock:
            if not self.rate:
                return
            contended = [item in self._touched for item in items]
            if any(contended) and self._rng.random() < self.rate:
                self.raised += 1
                raise cancelled(
                    tuple("TransactionConflict" if hit else "None" for hit in contended)
                )
            self._touched.update(items)

    def reset(self) -> None:
        self.configure(0.0)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"rate": self.rate, "seed": self.seed, "raised": self.raised}


TRANSACTION_CONFLICTS = TransactionConflicts()


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


def transaction_items(
    backend: Any, transact_items: list[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """(table, key) of each action, for conflict detection."""
    found = []
    for entry in transact_items:
        ((_, action),) = entry.items()
        key = action.get("Key")
        if key is None:
            table = backend.get_table(action["TableName"])
            names = [table.hash_key_attr, table.range_key_attr]
            key = {n: action["Item"].get(n) for n in names if n}
        found.append((action["TableName"], json.dumps(key, sort_keys=True)))
    return found


def strict(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a DynamoHandler write method with the checks above (and conflicts for transactions)."""

    @functools.wraps(original)
    def checked(self: Any) -> Any:
        body = self.body
        if "TransactItems" in body:
            for entry in body["TransactItems"]:
                for action in entry.values():
                    check_write(action)
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
