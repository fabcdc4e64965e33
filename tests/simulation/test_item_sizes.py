"""The stored items' sizes the 400 KB invariant judges (item_sizes.py): every item at every look,
sized as moto sizes it now, after whatever write changed it (a put, an update in place, a
transaction committed or cancelled), and an item no write touched is not measured again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item

from tests.simulation.item_sizes import ItemSizes

TABLE = "state"
MOTO_SIZE = Item.size  # moto's own, to check against


@pytest.fixture
def db() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _tables() -> list[Any]:
    return list(dynamodb_backends["123456789012"]["us-east-1"].tables.values())


def _stored() -> list[Any]:
    return [item for held in _tables()[0].items.values() for item in held.values()]


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "P"}, "sk": {"S": sk}}


def _look(sizes: ItemSizes) -> dict[str, int]:
    """sk → size of every item stored now, as `sizes` measures them (all larger than 0 bytes);
    each checked against moto's own."""
    held, found = sizes.over(_tables(), 0)
    assert held == len(found) == len(_stored())
    assert [size for _, _, size in found] == [MOTO_SIZE(item) for _, item, _ in found]
    return {item.range_key.value: size for _, item, size in found}


def _sized(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sk of every item moto is asked to size from now on."""
    asked: list[str] = []
    original = Item.size

    def size(item: Item) -> int:
        asked.append(item.range_key.value if item.range_key else "")
        return original(item)

    monkeypatch.setattr(Item, "size", size)
    return asked


def test_an_item_changed_in_place_by_update_item_is_sized_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = ItemSizes()
    with sizes.watching_updates():
        # Given three items looked at once
        for sk in ("a", "b", "c"):
            db.put_item(TableName=TABLE, Item={**_key(sk), "m": {"M": {"x": {"S": "1"}}}})
        before = _look(sizes)
        asked = _sized(monkeypatch)
        # When UpdateItem grows one in place (a nested map), another in a transaction, and a
        # cancelled transaction's update of the third leaves it as it was
        db.update_item(
            TableName=TABLE,
            Key=_key("a"),
            UpdateExpression="SET m.y = :big",
            ExpressionAttributeValues={":big": {"S": "y" * 5000}},
        )
        grown = _look(sizes)
        db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("b"),
                        "UpdateExpression": "ADD tags :t",
                        "ExpressionAttributeValues": {":t": {"SS": ["t" * 300]}},
                    }
                }
            ]
        )
        added = _look(sizes)
        with pytest.raises(db.exceptions.TransactionCanceledException):
            db.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": _key("c"),
                            "UpdateExpression": "SET big = :big",
                            "ExpressionAttributeValues": {":big": {"S": "z" * 5000}},
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": _key("missing"),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                ]
            )
        after = _look(sizes)
    # Then the two changed items are measured again and have their new sizes (each look checks
    # every size against moto's), the third its old one
    assert grown["a"] == after["a"] == before["a"] + len("y") + 5000
    assert added["b"] == after["b"] == before["b"] + len("tags") + 300
    assert after["c"] == before["c"]
    assert {"a", "b"} <= set(asked)


def test_only_a_new_item_a_replaced_one_and_an_updated_one_are_measured_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = ItemSizes()
    with sizes.watching_updates():
        db.put_item(TableName=TABLE, Item={**_key("old"), "v": {"S": "1"}})
        db.put_item(TableName=TABLE, Item={**_key("kept"), "v": {"S": "1"}})
        db.put_item(TableName=TABLE, Item={**_key("grown"), "v": {"S": "1"}})
        _look(sizes)
        asked = _sized(monkeypatch)
        db.put_item(TableName=TABLE, Item={**_key("old"), "v": {"S": "2" * 1000}})
        db.put_item(TableName=TABLE, Item={**_key("new"), "v": {"S": "3" * 2000}})
        db.update_item(
            TableName=TABLE,
            Key=_key("grown"),
            UpdateExpression="SET w = :w",
            ExpressionAttributeValues={":w": {"N": "12345"}},
        )
        found = _look(sizes)
        assert _look(sizes) == found  # nothing measured again: nothing changed
    assert found["old"] == len("pk") + 1 + len("sk") + 3 + 1 + 1000
    assert found["new"] == len("pk") + 1 + len("sk") + 3 + 1 + 2000
    assert found["grown"] == len("pk") + 1 + len("sk") + 5 + 1 + 1 + 1 + 5
    assert sorted(asked) == ["grown", "new", "old"]


def test_the_items_larger_than_the_limit_in_key_order_and_every_item_counted(db: Any) -> None:
    sizes = ItemSizes()
    with sizes.watching_updates():
        # Given two items over the limit, and one under it
        for sk, length in (("z", 3000), ("a", 10), ("m", 2000)):
            db.put_item(TableName=TABLE, Item={**_key(sk), "v": {"S": "x" * length}})
        held, over = sizes.over(_tables(), 1000)
        assert held == 3
        assert [(item.range_key.value, size) for _, item, size in over] == [
            ("m", 2007),
            ("z", 3007),
        ]
        # When one of them shrinks in place, and the small one grows past it
        for sk, length in (("z", 10), ("a", 1500)):
            db.update_item(
                TableName=TABLE,
                Key=_key(sk),
                UpdateExpression="SET v = :v",
                ExpressionAttributeValues={":v": {"S": "y" * length}},
            )
        held, over = sizes.over(_tables(), 1000)
    # Then the ones over the limit now are those found
    assert held == 3
    assert [(item.range_key.value, size) for _, item, size in over] == [("a", 1507), ("m", 2007)]


def test_sizes_let_go_of_items_gone_stay_right(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.simulation.item_sizes.PRUNE_BEYOND", 0)
    sizes = ItemSizes()
    with sizes.watching_updates():
        for sk in ("a", "b", "c"):
            db.put_item(TableName=TABLE, Item={**_key(sk), "v": {"S": "1"}})
        _look(sizes)
        db.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "2" * 10}})
        db.delete_item(TableName=TABLE, Key=_key("b"))
        assert _look(sizes) == {"a": 17, "c": 8}
        db.put_item(TableName=TABLE, Item={**_key("b"), "v": {"S": "3" * 20}})
        assert _look(sizes) == {"a": 17, "b": 27, "c": 8}
