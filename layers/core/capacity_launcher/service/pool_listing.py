"""NodePools read in the order they are tried only as far as a request looks, each page once.

A store may hand the pools over a page at a time in the order they are tried (a `PoolSet`'s
first page and `more`: the NodePools' weight-ordered index, adapters/pool_index.py): a request
that names no pool reads pages until its pool is found, and the pools it would fall back to
after that are read only when it falls back (issue 38: items read flat in the pools). The pages
of one `PoolSet` are read once for every request and thread of a warm container that is handed
it (the store keeps it while its generation holds): its memo lives as long as it does. The
order itself is the domain's (domain/apis/pool_order.py).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from capacity_launcher.domain.apis.config import NodePool, PoolSet


class Memo[T]:
    """The items of an iterator, pulled only as far as asked and each once (shared between the
    threads of a warm container: a page is read by one of them)."""

    def __init__(self, items: Iterator[T]) -> None:
        self._items: Iterator[T] | None = items
        self._seen: list[T] = []
        self._lock = threading.RLock()

    def at(self, n: int) -> T | None:
        """Item `n` (from 0), or None when there are not that many."""
        if n < len(self._seen):
            return self._seen[n]
        with self._lock:
            while n >= len(self._seen) and self._items is not None:
                try:
                    self._seen.append(next(self._items))
                except StopIteration:
                    self._items = None
            return self._seen[n] if n < len(self._seen) else None

    def every(self) -> tuple[T, ...]:
        """Every item (all pulled)."""
        n = len(self._seen)
        while self.at(n) is not None:
            n += 1
        return tuple(self._seen)

    def pulled(self) -> int:
        """How many items were pulled so far (tests; the benchmark's reads follow it)."""
        return len(self._seen)


class Later[T](Sequence[T]):
    """The pools (items) from `start` on of those pulled in order as far as asked: `[0]`,
    `[1:]` and a truth test pull no further than they need; `len`, a negative index or a
    stepped slice pull every one."""

    def __init__(self, memo: Memo[T], start: int = 0) -> None:
        self._memo = memo
        self._start = start

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            start = index.start or 0
            if index.stop is None and index.step in (None, 1) and start >= 0:
                return Later(self._memo, self._start + start)
            return tuple(self)[index]
        if index < 0:
            return tuple(self)[index]
        found = self._memo.at(self._start + index)
        if found is None:
            raise IndexError(index)
        return found

    def __len__(self) -> int:
        return max(0, len(self._memo.every()) - self._start)

    def __bool__(self) -> bool:
        return self._memo.at(self._start) is not None

    def __iter__(self) -> Iterator[T]:
        n = self._start
        while (pool := self._memo.at(n)) is not None:
            yield pool
            n += 1

    def __repr__(self) -> str:
        return f"Later(from {self._start}, {self._memo.pulled()} pulled)"


def in_order[T](first: Iterable[T], more: Callable[[], Sequence[T] | None] | None) -> Iterator[T]:
    """`first`, then each page `more` returns until it returns None (pages already in order)."""
    yield from first
    while more is not None and (page := more()) is not None:
        yield from page


# One memo a pool set, for as long as the pool set lives (a store's `more` reads its next page:
# two memos over one would each miss the pages the other read).
_memos: weakref.WeakKeyDictionary[PoolSet, Memo[NodePool]] = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


def _memo(listing: PoolSet) -> Memo[NodePool]:
    with _memos_lock:
        memo = _memos.get(listing)
        if memo is None:
            memo = _memos[listing] = Memo(in_order(listing.first, listing.more))
        return memo


def by_weight(listing: PoolSet) -> Iterator[NodePool]:
    """The pools of `listing` in the order they are tried, read only as far as iterated."""
    return iter(Later(_memo(listing)))


def every(listing: PoolSet) -> tuple[NodePool, ...]:
    """Every pool of `listing`, in the order they are tried (reads every page left)."""
    return _memo(listing).every()
