"""Every stored item's size as DynamoDB counts it (moto's `Item.size`: names plus values), read
from moto's tables with no call, each item sized again only when it may have changed.

An item's size changes only when its attributes do. A write that replaces an item (PutItem, a
transaction's Put, a rollback putting back its copy, PartiQL) stores a new `Item` object; one
that removes it leaves it out of the table. Only UpdateItem (alone, or a transaction's Update)
changes a stored `Item` in place: its attributes, nested maps and lists, sets. So a size is kept
by the item object it was measured on (held here, so no other object can take its id), and
forgotten when UpdateItem runs on that item's key, whether it succeeds or fails part way. An
item is read from the tables at each look, and any object not seen at the last one is sized."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType


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

    def sizes(self, items: Iterable[Any]) -> list[int]:
        """Each item's size, in the order given. `items` are every item of the tables now: a
        size kept for an item not among them is let go."""
        sized: dict[int, tuple[Any, int]] = {}
        found = []
        for item in items:
            known = self._sized.get(id(item))
            size = known[1] if known is not None and known[0] is item else item.size()
            sized[id(item)] = (item, size)
            found.append(size)
        self._sized = sized
        return found
