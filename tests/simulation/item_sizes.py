"""Every stored item's size as DynamoDB counts it (moto's `Item.size`: names plus values), read
from moto's tables with no call, each item sized again only when it may have changed.

An item's size changes only when its attributes do. A write that replaces an item (PutItem, a
transaction's Put, a rollback putting back its copy, PartiQL) stores a new `Item` object; one
that removes it leaves it out of the table. Only UpdateItem (alone, or a transaction's Update)
changes a stored `Item` in place: its attributes, nested maps and lists, sets. So a size is kept
by the item object it was measured on (held here, so no other object can take its id), and
forgotten when UpdateItem runs on that item's key, whether it succeeds or fails part way. Each
look counts every item the tables hold and sizes each that has no size kept."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType

PRUNE_BEYOND = 1000  # sizes kept for items gone, before they are let go


class ItemSizes:
    def __init__(self) -> None:
        self._sized: dict[int, tuple[Any, int]] = {}  # id(item) → (the item, its size then)

    @contextmanager
    def watching_updates(self) -> Iterator[None]:
        """While open, every UpdateItem through moto's backend forgets its item's size."""
        original = DynamoDBBackend.update_item

        def update_item(backend: Any, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                updated = original(backend, table_name, key, *args, **kwargs)
            finally:
                self._forget(backend, table_name, key)
            self._sized.pop(id(updated), None)
            return updated

        DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]
        try:
            yield
        finally:
            DynamoDBBackend.update_item = original  # type: ignore[method-assign]

    def _forget(self, backend: Any, table_name: str, key: Any) -> None:
        """The item UpdateItem found by `key`, as moto's update_item looks it up; anything it
        cannot name this way (a missing table, a key not its table's) forgets every size."""
        try:
            table = backend.tables[table_name]
            hash_key = DynamoType(key[table.hash_key_attr])
            range_name = table.range_key_attr
            range_key = DynamoType(key[range_name]) if range_name in key else None
            item = table.get_item(hash_key, range_key)
        except Exception:
            self._sized.clear()
            return
        if item is not None:
            self._sized.pop(id(item), None)

    def over(self, tables: Iterable[Any], limit: int) -> tuple[int, list[tuple[Any, Any, int]]]:
        """(how many items the tables hold, (table, item, size) of each larger than `limit`, in
        the tables' order then each table's key order, as `Table.all_items` gives them)."""
        tables = list(tables)
        held = 0
        found: list[tuple[Any, Any, int]] = []
        for table in tables:
            items = _items(table)
            held += len(items)
            larger = [(item, size) for item in items if (size := self._size(item)) > limit]
            larger.sort(key=lambda found: _key_order(found[0]))
            found += [(table, item, size) for item, size in larger]
        if len(self._sized) > 2 * held + PRUNE_BEYOND:
            self._let_go(tables)
        return held, found

    def _size(self, item: Any) -> int:
        known = self._sized.get(id(item))
        if known is None:
            known = self._sized[id(item)] = (item, item.size())
        return known[1]

    def _let_go(self, tables: list[Any]) -> None:
        """Sizes kept for items no table holds any more (replaced or deleted) are let go."""
        held = {id(item) for table in tables for item in _items(table)}
        self._sized = {key: known for key, known in self._sized.items() if key in held}


def _items(table: Any) -> list[Any]:
    if table.range_key_attr:
        return [item for partition in list(table.items.values()) for item in partition.values()]
    return list(table.items.values())


def _key_order(item: Any) -> tuple[Any, ...]:
    """Sorted on the keys' values, as moto's `Table.all_items` orders a table's items."""
    if item.range_key is None:
        return (item.hash_key.cast_value,)
    return (item.hash_key.cast_value, item.range_key.cast_value)
