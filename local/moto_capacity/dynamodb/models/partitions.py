"""DynamoDB Query at the cost of what it reads, not of the table.

moto answers every Query by sorting every item of the table, then keeping the partition asked
for (or the items an index holds): a Query of one small partition in a table of 500,000 items
sorts 500,000 items, once per page. Here moto's query runs over a view of the table that holds
only that partition (or only the items the index holds: DynamoDB indexes an item only when it
has every key attribute of the index, DynamoDB Developer Guide, "Improving data access with
secondary indexes"), sorted on the keys' values rather than compared attribute by attribute,
so its answers are the same and its cost follows the partition.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.table import Table


def _in_key_order(view: Table) -> list[Any]:
    """Table.all_items's order (hash key, then range key), sorted on the keys' Python values."""
    items: list[Any] = [
        item
        for held in view.items.values()
        for item in (held.values() if view.has_range_key else [held])
    ]
    if view.has_range_key:
        items.sort(key=lambda i: (i.hash_key.cast_value, i.range_key.cast_value))
    else:
        items.sort(key=lambda i: i.hash_key.cast_value)
    return items


def _view(table: Table, items: dict[Any, Any]) -> Table:
    """The table with only `items` (object.__new__: moto would track a new Table instance)."""
    view: Table = object.__new__(Table)  # type: ignore[type-abstract]
    view.__dict__.update(table.__dict__)
    view.items = items  # type: ignore[assignment]
    view.__dict__["all_items"] = functools.partial(_in_key_order, view)
    return view


def _indexed(table: Table, index_name: str) -> dict[Any, Any]:
    needed = {key["AttributeName"] for key in table.get_index(index_name).schema}
    stored: dict[Any, Any] = table.items
    if not table.has_range_key:
        return {h: item for h, item in stored.items() if needed <= item.attrs.keys()}
    held = {}
    for hash_key, partition in stored.items():
        kept = {r: item for r, item in partition.items() if needed <= item.attrs.keys()}
        if kept:
            held[hash_key] = kept
    return held


def reading_only_its_partition(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def query(self: Table, *args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(self, *args, **kwargs).arguments
        index_name, hash_key = asked.get("index_name"), asked.get("hash_key")
        if index_name:
            if index_name not in {index.name for index in self.all_indexes()}:
                return original(self, *args, **kwargs)  # moto's own error names the indexes
            return original(_view(self, _indexed(self, index_name)), *args, **kwargs)
        if hash_key is None:
            return original(self, *args, **kwargs)
        partition = {hash_key: self.items[hash_key]} if hash_key in self.items else {}
        return original(_view(self, partition), *args, **kwargs)

    return query
