"""DynamoDB TransactWriteItems at the cost of the items it touches, all or nothing.

moto keeps a deep copy of every table a transaction names, to roll back to: a transaction on a
table of 100,000 items copies 100,000 items. This one checks the request whole, then evaluates
every condition, then writes, keeping a copy of only the items it writes.

DynamoDB API Reference, "TransactWriteItems": up to 100 actions, each of Put, Update, Delete or
ConditionCheck, and no two on the same item (a ValidationException, before anything happens);
the actions succeed or fail together; a failed condition cancels the whole transaction with
TransactionCanceledException, whose CancellationReasons has one entry per action in request
order (`None` where that action had no error), and nothing is written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

MAX_ACTIONS = 100
OPERATIONS = ("ConditionCheck", "Put", "Delete", "Update")
CONDITION_FAILED = "The conditional request failed"
# (code, message, item) per action, as moto's TransactionCanceledException takes them.
Reason = tuple[str | None, str | None, dict[str, Any] | None]
NO_ERROR: Reason = (None, None, None)


@dataclass(frozen=True)
class Action:
    operation: str
    body: Mapping[str, Any]
    table: Table
    key: dict[str, Any]
    hash_key: DynamoType
    range_key: DynamoType | None

    def current(self) -> Item | None:
        return self.table.get_item(self.hash_key, self.range_key)


def _action(backend: DynamoDBBackend, entry: Mapping[str, Any]) -> Action:
    if len(entry) != 1:
        raise TransactWriteSingleOpException()
    ((operation, body),) = entry.items()
    if operation not in OPERATIONS:
        raise MockValidationException(f"Unsupported transaction operation {operation}")
    table = backend.get_table(body["TableName"])
    named = body["Item"] if operation == "Put" else body["Key"]
    names = [n for n in (table.hash_key_attr, table.range_key_attr) if n is not None]
    for name in names:
        if name not in named:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {name} in the item"
            )
    key = {name: named[name] for name in names}
    range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return Action(operation, body, table, key, DynamoType(key[table.hash_key_attr]), range_key)


def _actions(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[Action]:
    """The request checked whole: its size, each action's shape, each item named once."""
    if len(transact_items) > MAX_ACTIONS:
        raise TooManyTransactionsException()
    actions = [_action(backend, entry) for entry in transact_items]
    seen = set()
    for action in actions:
        item = (action.table.name, action.hash_key, action.range_key)
        if item in seen:
            raise MultipleTransactionsException()
        seen.add(item)
    return actions


def _condition(action: Action) -> Reason:
    expression = action.body.get("ConditionExpression")
    if expression is None:
        return NO_ERROR
    current = action.current()
    condition = get_filter_expression(
        expression,
        action.body.get("ExpressionAttributeNames"),
        action.body.get("ExpressionAttributeValues"),
    )
    if condition.expr(current):
        return NO_ERROR
    wants_item = action.body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
    item = current.to_json()["Attributes"] if wants_item and current is not None else None
    return ("ConditionalCheckFailed", CONDITION_FAILED, item)


def _write(backend: DynamoDBBackend, action: Action) -> None:
    body, table_name = action.body, action.table.name
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    if action.operation == "Put":
        backend.put_item(table_name, body["Item"])
    elif action.operation == "Delete":
        backend.delete_item(table_name, action.key)
    elif action.operation == "Update":
        backend.update_item(
            table_name,
            action.key,
            update_expression=body["UpdateExpression"],
            expression_attribute_names=names,
            expression_attribute_values=values,
        )


class _Writes:
    """The items a transaction writes, as they were, so they can be put back; stream records
    are held back until the transaction commits (a cancelled one leaves none)."""

    def __init__(self, actions: list[Action]) -> None:
        self._before = [
            (action, copy.deepcopy(action.current()))
            for action in actions
            if action.operation != "ConditionCheck"
        ]
        self._streams = {id(a.table): (a.table, a.table.stream_shard) for a, _ in self._before}
        for table, _ in self._streams.values():
            table.stream_shard = None

    def commit(self) -> None:
        self._resume_streams()
        for action, before in self._before:
            after = action.current()
            shard = action.table.stream_shard
            if shard is not None and (before is not None or after is not None):
                shard.add(before, after)

    def roll_back(self) -> None:
        for action, before in reversed(self._before):
            partition: Any = action.table.items
            slot: Any = action.hash_key
            if action.range_key is not None:
                partition, slot = partition[action.hash_key], action.range_key
            if before is not None:
                partition[slot] = before
            else:
                partition.pop(slot, None)
                if action.range_key is not None and not partition:
                    action.table.items.pop(action.hash_key, None)
        self._resume_streams()

    def _resume_streams(self) -> None:
        for table, shard in self._streams.values():
            table.stream_shard = shard


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    actions = _actions(self, transact_items)
    reasons = [_condition(action) for action in actions]
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)
    writes = _Writes(actions)
    reasons = []
    try:
        for action in actions:
            try:
                _write(self, action)
                reasons.append(NO_ERROR)
            except MockValidationException:
                raise
            except Exception as error:  # moto's own failures become that action's reason
                reasons.append((type(error).__name__, str(error), None))
    except BaseException:
        writes.roll_back()
        raise
    if any(code is not None for code, _, _ in reasons):
        writes.roll_back()
        raise TransactionCanceledException(reasons)
    writes.commit()


def touching_only_its_items(_original: Callable[..., Any]) -> Callable[..., Any]:
    """The backend's transact_write_items, replaced (moto's own deep-copies whole tables)."""
    return transact_write_items
