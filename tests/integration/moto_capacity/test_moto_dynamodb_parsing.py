"""DynamoDB's expressions through moto at less cost, with moto's answers (moto_capacity README,
"What moto's answers cost"): a condition parsed once for its text, the update validator's walks
asking each processor once for the node classes it processes."""

import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

TABLE = "parsing"


@pytest.fixture
def dynamodb(aws_client: Callable[[str], Any]) -> Any:
    client = aws_client("dynamodb")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def _code(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def test_a_condition_is_parsed_once_for_its_text_and_evaluated_with_each_calls_values(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    lexed: list[str] = []
    lex = ConditionExpressionParser._lex_condition_expression

    def counted(self: Any) -> Any:
        lexed.append(self.condition_expression)
        return lex(self)

    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", counted)
    # A text no other test writes: the first call parses it
    attribute = f"v{uuid.uuid4().hex[:8]}"
    condition = f"attribute_not_exists(#v) OR (#v < :{attribute} AND begins_with(#k, :prefix))"
    key = {"pk": {"S": "item"}}

    def put(value: str, limit: str, prefix: str = "it", **names: str) -> None:
        dynamodb.put_item(
            TableName=TABLE,
            Item={**key, attribute: {"N": value}},
            ConditionExpression=condition,
            ExpressionAttributeNames={"#v": attribute, "#k": "pk", **names},
            ExpressionAttributeValues={f":{attribute}": {"N": limit}, ":prefix": {"S": prefix}},
        )

    # When it is written with values that pass, then with values that fail each side
    put("1", "5")
    put("2", "5")
    with pytest.raises(ClientError) as below:
        put("3", "2")
    with pytest.raises(ClientError) as prefix:
        put("3", "9", prefix="zz")
    put("3", "9")
    # Then each call's values decided, as moto's parse of the text does
    assert _code(below)[0] == _code(prefix)[0] == "ConditionalCheckFailedException"
    item = dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert item[attribute] == {"N": "3"}
    # and the text was lexed once, for its first call (moto: twice for each)
    assert lexed == [condition]
    # and a call missing a value fails where moto's lookup fails (moto: a KeyError, in process),
    # one naming a name it does not use is refused as moto refuses it
    with pytest.raises(KeyError, match=":prefix"):
        dynamodb.put_item(
            TableName=TABLE,
            Item=key,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#v": attribute, "#k": "pk"},
            ExpressionAttributeValues={f":{attribute}": {"N": "1"}},
        )
    with pytest.raises(ClientError) as unused:
        put("4", "9", **{"#u": "u"})
    assert _code(unused) == (
        "ValidationException",
        "1 validation error detected: "
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#u}",
    )


def test_a_refused_condition_is_refused_at_every_call(dynamodb: Any) -> None:
    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            dynamodb.put_item(
                TableName=TABLE,
                Item={"pk": {"S": "x"}},
                ConditionExpression="attribute_exists(name)",
            )
        assert _code(caught) == (
            "ValidationException",
            "Invalid ConditionExpression: Attribute name is a reserved keyword; "
            "reserved keyword: name",
        )


def test_the_update_validator_asks_each_processor_once_for_the_nodes_it_processes(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    asked: list[str] = []
    nodes_to_be_processed = DepthFirstTraverser.nodes_to_be_processed

    def counted(self: Any) -> Any:
        asked.append(type(self).__name__)
        return nodes_to_be_processed(self)

    monkeypatch.setattr(DepthFirstTraverser, "nodes_to_be_processed", counted)
    key = {"pk": {"S": "u"}}
    dynamodb.put_item(TableName=TABLE, Item={**key, "tags": {"L": []}, "gone": {"S": "x"}})
    # When an update with every kind of clause runs
    dynamodb.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET v = if_not_exists(v, :zero) + :one, tags = list_append(tags, :t) "
        "REMOVE gone ADD n :one",
        ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"}, ":t": {"L": []}},
    )
    # Then it did what it says
    item = dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert item == {**key, "v": {"N": "1"}, "tags": {"L": []}, "n": {"N": "1"}}
    # and each of the validator's processors was asked once (moto: at every node of its walk)
    validator = UpdateExpressionValidator.__new__(UpdateExpressionValidator)
    validator.expression_attribute_names = validator.expression_attribute_values = {}
    validator.item = None  # type: ignore[assignment]
    validator.table = SimpleNamespace(table_key_attrs=[], attr=[], attribute_keys=[])  # type: ignore[assignment]
    processors = validator.get_ast_processors()
    assert asked == [type(processor).__name__ for processor in processors]


def test_the_update_validator_tells_node_classes_apart_without_abcs_instance_checks(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    from abc import ABCMeta

    from moto.dynamodb.parsing.ast_nodes import Node

    walks = {"traverse_node_recursively", "find_clauses", "walk"}  # moto's, and ours
    checked: list[str] = []
    instancecheck = ABCMeta.__instancecheck__

    def counted(cls: ABCMeta, instance: Any) -> bool:
        caller = sys._getframe(1).f_code.co_name
        if issubclass(cls, Node) and caller in walks:
            checked.append(f"{caller}: {cls.__name__}")
        return instancecheck(cls, instance)

    key = {"pk": {"S": "c"}}
    update = {
        "TableName": TABLE,
        "Key": key,
        "UpdateExpression": "SET a = :a, b = if_not_exists(b, :a) REMOVE gone ADD n :one",
        "ExpressionAttributeValues": {":a": {"S": "a"}, ":one": {"N": "1"}},
    }
    dynamodb.update_item(**update)  # the classes met once
    monkeypatch.setattr(ABCMeta, "__instancecheck__", counted)
    # When the same update runs again
    dynamodb.update_item(**update)
    monkeypatch.undo()
    # Then it did what it says
    item = dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert item == {**key, "a": {"S": "a"}, "b": {"S": "a"}, "n": {"N": "2"}}
    # and the walks and searches for clauses held no node against an abstract node class by
    # `isinstance` (moto: at every node of every walk, and of each search)
    assert checked == []


def test_an_update_texts_clause_and_path_checks_run_until_it_passes_them(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.parsing.validators import ActionCountValidator, OverlappingPathsValidator

    checks: list[str] = []
    counts = ActionCountValidator.verify_action_counts
    paths = OverlappingPathsValidator.check_for_overlapping_paths

    def counted(self: Any, node: Any) -> Any:
        checks.append("counts")
        return counts(self, node)

    def overlaps(self: Any, node: Any) -> Any:
        checks.append("paths")
        return paths(self, node)

    monkeypatch.setattr(ActionCountValidator, "verify_action_counts", counted)
    monkeypatch.setattr(OverlappingPathsValidator, "check_for_overlapping_paths", overlaps)
    key = {"pk": {"S": "d"}}
    tag = uuid.uuid4().hex[:8]  # a text no other test writes
    text = f"SET #a = :a, #b = :b, x{tag} = :a"

    def update(a: str, b: str) -> None:
        dynamodb.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression=text,
            ExpressionAttributeNames={"#a": a, "#b": b},
            ExpressionAttributeValues={":a": {"S": "1"}, ":b": {"S": "2"}},
        )

    # When the text is written three times with the same names
    for _ in range(3):
        update("a", "b")
    # Then its checks ran for the first (moto: at every one)
    assert checks.count("counts") >= 1 and checks.count("paths") >= 1
    first = len(checks)
    update("a", "b")
    assert len(checks) == first
    # and names making two of its paths one are refused, at every call, as moto refuses them
    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            update("a", "a")
        assert _code(caught) == (
            "ValidationException",
            "1 validation error detected: "
            "Invalid UpdateExpression: Two document paths overlap with each other; must remove "
            "or rewrite one of these paths; path one: [a], path two: [a]",
        )
    # and with the first names again it passes, unchecked
    before = len(checks)
    update("a", "b")
    assert len(checks) == before
    item = dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert item == {**key, "a": {"S": "1"}, "b": {"S": "2"}, f"x{tag}": {"S": "1"}}
