"""TransactWriteItems all or nothing, at the cost of the items it touches.

DynamoDB API Reference, "TransactWriteItems"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html):
up to 100 actions (Put, Update, Delete, ConditionCheck) that succeed or fail together; no two
actions may target the same item (ValidationException); a condition that fails cancels the
whole transaction with TransactionCanceledException, whose CancellationReasons lists one reason
per action in request order (`None` where an action had no error), and nothing is written.
"""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.table import Table

TABLE = "state"


@pytest.fixture
def dynamodb(state_table: Callable[..., Any]) -> Any:
    client = state_table(TABLE)
    for sk, used in (("a", "1"), ("b", "2"), ("c", "3")):
        client.put_item(TableName=TABLE, Item={**_key(sk), "used": {"N": used}})
    return client


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "Limits#pool"}, "sk": {"S": sk}}


def _items(dynamodb: Any) -> list[dict[str, Any]]:
    return sorted(dynamodb.scan(TableName=TABLE)["Items"], key=lambda i: i["sk"]["S"])


def _add(sk: str, condition: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": TABLE,
        "Key": _key(sk),
        "UpdateExpression": "ADD used :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    if condition:
        update["ConditionExpression"] = condition
    return {"Update": update}


def _reasons(caught: pytest.ExceptionInfo[ClientError]) -> list[dict[str, Any]]:
    return caught.value.response["CancellationReasons"]  # type: ignore[typeddict-item]


@pytest.fixture
def tables_never_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto deep-copies every table a transaction names; a copy here fails the test."""

    def refuse(self: Table, memo: dict[int, Any]) -> Table:
        raise AssertionError(f"table {self.name} was copied")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)


@pytest.mark.usefixtures("tables_never_copied")
def test_a_failed_condition_cancels_every_action_and_lists_reasons_in_order(dynamodb: Any) -> None:
    before = _items(dynamodb)

    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("new"), "used": {"N": "9"}}}},
                _add("a"),
                {"Delete": {"TableName": TABLE, "Key": _key("b")}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("c"),
                        "ConditionExpression": "used < :zero",
                        "ExpressionAttributeValues": {":zero": {"N": "0"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                _add("d", condition="attribute_exists(pk)"),
            ]
        )

    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _reasons(caught) == [
        {"Code": "None"},
        {"Code": "None"},
        {"Code": "None"},
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {**_key("c"), "used": {"N": "3"}},
        },
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"},
    ]
    assert _items(dynamodb) == before


@pytest.mark.usefixtures("tables_never_copied")
def test_a_transaction_that_holds_writes_every_action(dynamodb: Any) -> None:
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**_key("new"), "used": {"N": "9"}}}},
            _add("a", condition="used = :one"),
            {"Delete": {"TableName": TABLE, "Key": _key("b")}},
        ]
    )

    assert [(i["sk"]["S"], i["used"]["N"]) for i in _items(dynamodb)] == [
        ("a", "2"),
        ("c", "3"),
        ("new", "9"),
    ]


def test_two_actions_on_one_item_are_refused_before_any_write(dynamodb: Any) -> None:
    before = _items(dynamodb)

    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(
            TransactItems=[
                _add("b"),
                {"Put": {"TableName": TABLE, "Item": {**_key("a"), "used": {"N": "7"}}}},
                {"Delete": {"TableName": TABLE, "Key": _key("a")}},
            ]
        )

    assert caught.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "Transaction request cannot include multiple operations on one item",
    }
    assert _items(dynamodb) == before


def test_an_action_naming_two_operations_is_refused_as_a_validation_error(dynamodb: Any) -> None:
    # "TransactWriteItems": each TransactWriteItem holds one of ConditionCheck, Put, Update or
    # Delete (moto's own test_transact_write_items_multiple_operations_fail). The extension's
    # conflict check read each action as one operation and answered a 500 instead.
    before = _items(dynamodb)

    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Put": {"TableName": TABLE, "Item": {**_key("a"), "used": {"N": "7"}}},
                    "Delete": {"TableName": TABLE, "Key": _key("a")},
                }
            ]
        )

    assert caught.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "TransactItems can only contain one of Check, Put, Update or Delete",
    }
    assert _items(dynamodb) == before


@pytest.mark.beyond_aws_limits
def test_more_than_100_actions_are_refused(dynamodb: Any) -> None:
    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(TransactItems=[_add(f"n{n:03d}") for n in range(101)])

    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "less than or equal to 100" in caught.value.response["Error"]["Message"]
    assert len(_items(dynamodb)) == 3


def test_a_write_that_fails_midway_puts_back_the_items_already_written(dynamodb: Any) -> None:
    """An update moto can only refuse while applying it (ADD to a string) comes after a put and
    an update that were applied: both are undone."""
    dynamodb.put_item(TableName=TABLE, Item={**_key("text"), "used": {"S": "many"}})
    before = _items(dynamodb)

    with pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("new"), "used": {"N": "9"}}}},
                _add("a"),
                _add("text"),
            ]
        )

    assert _items(dynamodb) == before
