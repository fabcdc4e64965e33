"""Pools in the order they are tried, pulled only as far as asked (issue 38)."""

from __future__ import annotations

from collections.abc import Iterator

from capacity_launcher.domain.apis.config import NodePool, PoolSet
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.pool_order import Later, Memo, order_key, weight_order


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
    assert [p.name for p in whole.by_weight()] == ["high", "low"]
    pages = [[_pool("c")], []]
    asked: list[int] = []

    def more() -> list[NodePool] | None:
        asked.append(1)
        return pages.pop(0) if pages else None

    paged = PoolSet(2, (_pool("a", 3), _pool("b")), more)
    assert next(paged.by_weight()).name == "a" and asked == []
    assert [p.name for p in paged.pools] == ["a", "b", "c"] and len(asked) == 3
