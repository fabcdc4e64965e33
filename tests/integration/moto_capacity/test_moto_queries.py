"""Query reads the partition it names (or the items its index holds), never the whole table.

DynamoDB API Reference, "Query"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Query.html): a Query finds
items by partition key, in sort key order (ScanIndexForward false reverses it), a page at a
time (Limit, LastEvaluatedKey/ExclusiveStartKey), and ScannedCount counts the items it
evaluated. DynamoDB Developer Guide, "Improving data access with secondary indexes"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/SecondaryIndexes.html): an
index holds only the items that have its key attributes (a sparse index).
"""

from collections.abc import Callable
from typing import Any

import pytest
from moto.dynamodb.models.table import Table

TABLE = "state"


@pytest.fixture
def dynamodb(state_table: Callable[..., Any]) -> Any:
    client = state_table(
        TABLE,
        attributes=("open",),
        GlobalSecondaryIndexes=[
            {
                "IndexName": "OpenLeases",
                "KeySchema": [{"AttributeName": "open", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    for pk in ("Limits#a", "Limits#b", "Request#x"):
        for sk in ("Lease#2", "Lease#1", "Member#1", "Settled#1"):
            item = {"pk": {"S": pk}, "sk": {"S": sk}}
            if pk == "Limits#b" and sk.startswith("Lease#"):
                item["open"] = {"S": "open"}
            client.put_item(TableName=TABLE, Item=item)
    return client


@pytest.fixture(autouse=True)
def tables_never_sorted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto sorts every item of the table for each Query; doing so here fails the test."""

    def refuse(self: Table) -> list[Any]:
        raise AssertionError(f"every item of {self.name} was read")

    monkeypatch.setattr(Table, "all_items", refuse)


def _keys(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(i["pk"]["S"], i["sk"]["S"]) for i in answer["Items"]]


def _query(dynamodb: Any, pk: str, **extra: Any) -> dict[str, Any]:
    return dynamodb.query(  # type: ignore[no-any-return]
        TableName=TABLE,
        KeyConditionExpression="pk = :pk" + extra.pop("and_sk", ""),
        ExpressionAttributeValues={":pk": {"S": pk}, **extra.pop("values", {})},
        **extra,
    )


def test_a_query_reads_its_partition_in_sort_key_order(dynamodb: Any) -> None:
    answer = _query(dynamodb, "Limits#a")

    assert _keys(answer) == [
        ("Limits#a", "Lease#1"),
        ("Limits#a", "Lease#2"),
        ("Limits#a", "Member#1"),
        ("Limits#a", "Settled#1"),
    ]
    assert answer["ScannedCount"] == 4


def _live_range(dynamodb: Any, **page: Any) -> dict[str, Any]:
    return _query(
        dynamodb,
        "Limits#a",
        and_sk=" AND sk BETWEEN :low AND :high",
        values={":low": {"S": "Lease#"}, ":high": {"S": "Member$"}},
        ScanIndexForward=False,
        **page,
    )


def test_a_key_range_backwards_and_in_pages(dynamodb: Any) -> None:
    first = _live_range(dynamodb, Limit=2)
    rest = _live_range(dynamodb, ExclusiveStartKey=first["LastEvaluatedKey"])

    assert _keys(first) + _keys(rest) == [
        ("Limits#a", "Member#1"),
        ("Limits#a", "Lease#2"),
        ("Limits#a", "Lease#1"),
    ]
    assert "LastEvaluatedKey" not in rest


def test_an_unknown_partition_is_empty(dynamodb: Any) -> None:
    answer = _query(dynamodb, "Limits#none")

    assert (answer["Items"], answer["Count"], answer["ScannedCount"]) == ([], 0, 0)


def test_a_sparse_index_holds_only_items_with_its_key(dynamodb: Any) -> None:
    answer = dynamodb.query(
        TableName=TABLE,
        IndexName="OpenLeases",
        KeyConditionExpression="#open = :open",
        ExpressionAttributeNames={"#open": "open"},
        ExpressionAttributeValues={":open": {"S": "open"}},
    )

    assert sorted(_keys(answer)) == [("Limits#b", "Lease#1"), ("Limits#b", "Lease#2")]
    assert answer["ScannedCount"] == 2
