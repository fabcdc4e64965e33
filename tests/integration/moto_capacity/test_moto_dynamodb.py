"""DynamoDB where moto alone is kinder than the service.

- DynamoDB API Reference, "TransactWriteItems" and "TransactionCanceledException"
  (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html):
  reasons in request order, `None` for items without error, `TransactionConflict` with
  "Transaction is ongoing for the item".
- DynamoDB Developer Guide, "Supported data types and naming rules in Amazon DynamoDB"
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html):
  names are at least one character long, key attributes cannot be empty strings, and an item is
  at most 400 KB.
"""

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

TABLE = "limits"


def _table(dynamodb: Any) -> Any:
    dynamodb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return dynamodb


@pytest.fixture
def dynamodb(aws_client: Callable[[str], Any]) -> Any:
    return _table(aws_client("dynamodb"))


def _update(pk: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": pk}},
            "UpdateExpression": "ADD used :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def _error(caught: pytest.ExceptionInfo[ClientError]) -> dict[str, Any]:
    return caught.value.response  # type: ignore[return-value]


def test_injected_cancellation_has_dynamodbs_wire_shape(dynamodb: Any) -> None:
    """ "TransactionCanceledException": reasons in request order, `None` for untouched items."""
    moto_capacity.inject_fault(
        "dynamodb:TransactWriteItems",
        "TransactionCanceledException",
        times=1,
        cancellation_reasons=["None", "TransactionConflict"],
    )

    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(TransactItems=[_update("a"), _update("b")])
    dynamodb.transact_write_items(TransactItems=[_update("a"), _update("b")])

    response = _error(caught)
    assert response["Error"] == {
        "Code": "TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific "
        "reasons [None, TransactionConflict]",
    }
    assert response["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
    ]
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]["used"] == {"N": "1"}


def test_cancellation_reasons_are_refused_where_dynamodb_never_sends_them() -> None:
    with pytest.raises(ValueError, match="only to dynamodb:TransactWriteItems"):
        moto_capacity.inject_fault(
            "dynamodb:UpdateItem", "TransactionCanceledException", cancellation_reasons=["None"]
        )
    with pytest.raises(ValueError, match="unknown codes"):
        moto_capacity.inject_fault(
            "dynamodb:TransactWriteItems",
            "TransactionCanceledException",
            cancellation_reasons=["Conflict"],
        )


def test_conflict_mode_cancels_transactions_on_an_item_already_in_use(dynamodb: Any) -> None:
    """ "TransactWriteItems": a transaction on an item another one holds is cancelled with
    TransactionConflict at that item's position."""
    moto_capacity.set_transaction_conflicts(1.0, seed=7)

    dynamodb.transact_write_items(TransactItems=[_update("shared")])
    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(TransactItems=[_update("fresh"), _update("shared")])
    dynamodb.transact_write_items(TransactItems=[_update("alone")])

    assert _error(caught)["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
    ]
    assert moto_capacity.state()["transactionConflicts"] == {"rate": 1.0, "seed": 7, "raised": 1}


def test_conflict_mode_at_rate_zero_is_off(dynamodb: Any) -> None:
    moto_capacity.set_transaction_conflicts(1.0)
    moto_capacity.set_transaction_conflicts(0)

    for _ in range(3):
        dynamodb.transact_write_items(TransactItems=[_update("shared")])

    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "shared"}})["Item"]
    assert item["used"] == {"N": "3"}


@pytest.mark.parametrize(
    "write",
    [
        lambda d: d.put_item(
            TableName=TABLE, Item={"pk": {"S": "a"}, "leases": {"M": {"": {"N": "1"}}}}
        ),
        lambda d: d.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "a"}},
            UpdateExpression="SET leases = :l",
            ExpressionAttributeValues={":l": {"M": {"r": {"M": {"": {"N": "1"}}}}}},
        ),
        lambda d: d.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "a"}},
            UpdateExpression="SET leases.#r = :one",
            ExpressionAttributeNames={"#r": ""},
            ExpressionAttributeValues={":one": {"N": "1"}},
        ),
        lambda d: d.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {"pk": {"S": "a"}, "m": {"M": {"": {"S": "x"}}}},
                    }
                }
            ]
        ),
        lambda d: d.batch_write_item(
            RequestItems={
                TABLE: [{"PutRequest": {"Item": {"pk": {"S": "a"}, "m": {"M": {"": {"S": "x"}}}}}}]
            }
        ),
    ],
    ids=["put", "update-value", "update-path", "transaction", "batch"],
)
def test_empty_map_keys_are_refused(dynamodb: Any, write: Callable[[Any], Any]) -> None:
    """ "Naming rules": an attribute name, a map key included, is at least one character."""
    with pytest.raises(ClientError) as caught:
        write(dynamodb)

    assert _error(caught)["Error"]["Code"] == "ValidationException"
    assert "empty" in _error(caught)["Error"]["Message"].lower()


def test_update_item_refuses_an_empty_string_key(dynamodb: Any) -> None:
    """ "Naming rules": a key attribute value cannot be an empty string."""
    with pytest.raises(ClientError) as caught:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": ""}},
            UpdateExpression="SET used = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    assert _error(caught)["Error"] == {
        "Code": "ValidationException",
        "Message": "One or more parameter values are not valid. The AttributeValue for a key "
        "attribute cannot contain an empty string value. Key: pk",
    }


def test_items_over_400_kb_are_refused(dynamodb: Any) -> None:
    """ "Service, account, and table quotas in Amazon DynamoDB": an item is at most 400 KB."""
    with pytest.raises(ClientError) as caught:
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "big": {"S": "x" * 410_000}})

    assert _error(caught)["Error"]["Code"] == "ValidationException"


def test_cancellation_fault_over_http(server_url: str, server_client: Callable[[str], Any]) -> None:
    dynamodb = _table(server_client("dynamodb"))
    body = {
        "operation": "dynamodb:TransactWriteItems",
        "code": "TransactionCanceledException",
        "cancellationReasons": ["TransactionConflict"],
        "times": 1,
    }
    request = urllib.request.Request(
        server_url + "/moto-capacity/faults", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request) as answer:
        state = json.loads(answer.read())

    with pytest.raises(ClientError) as caught:
        dynamodb.transact_write_items(TransactItems=[_update("a")])

    assert state["faults"][0]["cancellationReasons"] == ["TransactionConflict"]
    assert _error(caught)["Error"]["Message"] == (
        "Transaction cancelled, please refer cancellation reasons for specific reasons "
        "[TransactionConflict]"
    )
    assert _error(caught)["CancellationReasons"] == [
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
    ]


def test_an_update_expression_is_parsed_once_for_its_text_and_its_tree_kept_as_parsed(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.dynamodb.parsing.tokens import ExpressionTokenizer

    def shape(node: Any) -> Any:
        if isinstance(node, Node):
            return (type(node).__name__, tuple(shape(child) for child in node.children or ()))
        return repr(node)

    expression = "SET v = if_not_exists(v, :zero) + :one, tags = list_append(tags, :t) REMOVE gone"
    tree = UpdateExpressionParser.make(expression)
    parsed = shape(tree)
    tokenized: list[str] = []
    tokenize = ExpressionTokenizer.make_list

    def counted(text: str) -> Any:
        tokenized.append(text)
        return tokenize(text)

    monkeypatch.setattr(ExpressionTokenizer, "make_list", counted)
    copied: list[Any] = []
    deepcopy = validators.deepcopy

    def copy_counted(value: Any, *args: Any) -> Any:
        copied.append(value)
        return deepcopy(value, *args)

    monkeypatch.setattr(validators, "deepcopy", copy_counted)
    update = {
        "TableName": TABLE,
        "Key": {"pk": {"S": "p"}},
        "UpdateExpression": expression,
        "ExpressionAttributeValues": {
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":t": {"L": [{"S": "t"}]},
        },
    }
    item = {"pk": {"S": "p"}, "tags": {"L": []}, "gone": {"S": "x"}}
    dynamodb.put_item(TableName=TABLE, Item=item)
    # When it is written three times, and once more in a transaction
    for _ in range(3):
        dynamodb.update_item(**update)
    dynamodb.transact_write_items(TransactItems=[{"Update": update}])
    # Then each write did what it says
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "p"}})["Item"]
    assert item == {"pk": {"S": "p"}, "v": {"N": "4"}, "tags": {"L": [{"S": "t"}] * 4}}
    # and the text was parsed once, its tree left as parsed (moto validates and runs a copy)
    assert tokenized == []
    assert UpdateExpressionParser.make(expression) is tree
    assert shape(tree) == parsed
    # and each copy the validator made was unpickled, not deep-copied from the tree
    trees = [value for value in copied if type(value).__name__ != "DynamoType"]  # and values
    assert len(trees) == 4
    assert not any(isinstance(value, Node) for value in trees)
    fresh = trees[0].__deepcopy__({})
    assert fresh is not tree and shape(fresh) == parsed
    assert all(child.parent is fresh for child in fresh.children)
    # and a text moto refuses is refused every time
    for _ in range(2):
        with pytest.raises(ClientError, match="ValidationException"):
            dynamodb.update_item(**{**update, "UpdateExpression": "SET v = = :one"})
