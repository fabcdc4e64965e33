"""DynamoDB Scan at the cost of what it answers.

moto's Scan of a table (no index) sorts every item comparing the keys attribute by attribute
(each comparison builds both keys' Python values again), counts each item's size twice (the
page's 1 MB), and deep-copies every item before it applies the `FilterExpression`, so a Scan
that keeps three items of a table of ten thousand copies ten thousand. Here moto's scan runs
over a view of the table (partitions.py) sorted once on the keys' values, whose items count
their size once and are copied only when the filter keeps them: the one that does not is
handed back uncopied, and moto's own filter, run on moto's copies just after, drops it. The
answer, its pages, `Count` and `ScannedCount` are moto's.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

from .partitions import _view


class _Scanned(Item):
    """A stored item as one Scan reads it (its attributes the stored item's own)."""

    _stored: Item
    _kept: Callable[[Item], bool] | None
    _size: int | None

    def size(self) -> int:
        if self._size is None:
            self._size = self._stored.size()
        return self._size

    def __deepcopy__(self, memo: dict[int, Any]) -> Item:
        if self._kept is not None and not self._kept(self._stored):
            return self  # moto's filter, after its copy, drops it
        return copy.deepcopy(self._stored, memo)


def _scanned(item: Item, kept: Callable[[Item], bool] | None) -> _Scanned:
    scanned: _Scanned = object.__new__(_Scanned)
    scanned.__dict__.update(item.__dict__)
    scanned._stored, scanned._kept, scanned._size = item, kept, None
    return scanned


def scanning_in_key_order(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def scan(self: Table, *args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(self, *args, **kwargs).arguments
        if asked.get("index_name"):
            return original(self, *args, **kwargs)  # an index's order and items: moto's own
        expression = asked.get("filter_expression")
        kept = None if expression is None else expression.expr
        stored: dict[Any, Any] = self.items
        items: dict[Any, Any]
        if self.has_range_key:
            items = {
                h: {r: _scanned(item, kept) for r, item in partition.items()}
                for h, partition in stored.items()
            }
        else:
            items = {h: _scanned(item, kept) for h, item in stored.items()}
        return original(_view(self, items), *args, **kwargs)

    return scan
