"""Pools in the order they are tried, pulled only as far as asked (issue 38)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

from capacity_launcher.domain.apis.config import NodePool, PoolSet
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.pool_order import order_key, weight_order
from capacity_launcher.service import pool_listing
from capacity_launcher.service.pool_listing import Later, Memo, by_weight, every


def _pool(name: str, weight: int = 0) -> NodePool:
    spec = {"nodeClassRef": "c", "weight": weight} if weight else {"nodeClassRef": "c"}
    pool = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        }
    )
    assert isinstance(pool, NodePool)
    return pool


def _counted(pools: list[NodePool], pulled: list[str]) -> Iterator[NodePool]:
    for pool in pools:
        pulled.append(pool.name)
        yield pool


def test_the_sort_key_orders_as_pools_are_tried() -> None:
    pools = [_pool("b", 5), _pool("a", 5), _pool("z", 100), _pool("c"), _pool("a-b", 5)]
    by_key = sorted(pools, key=lambda p: order_key(p.spec.weight, p.name))
    assert by_key == sorted(pools, key=weight_order)
    assert [p.name for p in by_key] == ["z", "a", "a-b", "b", "c"]


def test_the_first_the_rest_and_a_truth_test_pull_no_further_than_they_need() -> None:
    pulled: list[str] = []
    later = Later(Memo(_counted([_pool(n) for n in "abcdef"], pulled)))
    assert later[0].name == "a" and pulled == ["a"]
    rest = later[1:]
    assert bool(rest) and pulled == ["a", "b"]
    assert rest[0].name == "b" and rest[1:][0].name == "c" and pulled == ["a", "b", "c"]
    # Iterating twice reads each once
    assert [p.name for p in later] == list("abcdef")
    assert [p.name for p in rest] == list("bcdef")
    assert pulled == list("abcdef")
    assert len(rest) == 5 and not later[6:] and later[-1].name == "f"


def test_a_pool_set_given_whole_is_in_weight_order_and_one_given_in_pages_reads_on_demand() -> None:
    whole = PoolSet(1, (_pool("low"), _pool("high", 9)))
    assert [p.name for p in by_weight(whole)] == ["high", "low"]
    pages = [[_pool("c")], []]
    asked: list[int] = []

    def more() -> list[NodePool] | None:
        asked.append(1)
        return pages.pop(0) if pages else None

    paged = PoolSet(2, (_pool("a", 3), _pool("b")), more)
    assert next(by_weight(paged)).name == "a" and asked == []
    assert [p.name for p in every(paged)] == ["a", "b", "c"] and len(asked) == 3


def test_a_pool_set_in_pages_is_read_once_whoever_looks_and_its_memo_goes_with_it() -> None:
    # Given a store's pool set whose pages are read as asked (its `more` reads the next page)
    pages = [[_pool("b")], [_pool("c")]]
    asked: list[int] = []

    def more() -> list[NodePool] | None:
        asked.append(1)
        return pages.pop(0) if pages else None

    paged = PoolSet(4, (_pool("a"),), more)
    known = len(pool_listing._memos)
    # When several requests of a warm container look at it, one after another
    assert [p.name for p in by_weight(paged)] == ["a", "b", "c"]
    assert [p.name for p in every(paged)] == ["a", "b", "c"]
    assert next(by_weight(paged)).name == "a"
    # Then each page was read once between them (a second reader misses none)
    assert len(asked) == 3
    # And the memo lives no longer than the pool set the store handed over
    gone = weakref.ref(paged)
    del paged
    gc.collect()
    assert gone() is None and len(pool_listing._memos) == known
