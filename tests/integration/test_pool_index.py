"""The NodePools' weight-ordered index (issue 38): a request naming no pool reads it a page at a
time in the order pools are tried, so what it reads does not grow with the pools. The index must
say what the `NodePool` partition says after every apply, delete and weight change; a warm
container sees a pool applied after its read; and it is trusted only while the generation says
every write since it was complete kept it."""

from __future__ import annotations

import json
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_items import (
    POOL_INDEX_PK,
    POOL_INDEXED,
    POOL_SET_KEY,
    generation_bump,
    pool_index_key,
)
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.dynamodb import from_item, key
from capacity_launcher.adapters.pool_index import INDEX_PAGE, index_all
from capacity_launcher.domain.apis.pool_order import weight_order
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.pool_listing import by_weight, every
from capacity_launcher.startup import system_clock
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, capacity_type, instance_type, launch_request, node_pool


def _pool(name: str, weight: int = 0, *types: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requirements": [capacity_type("on-demand"), instance_type(*(types or ("m5.large",)))]
    }
    if weight:
        spec["weight"] = weight
    return node_pool(name, "standard", **spec)


def _items(cloud: Cloud, pk: str) -> list[dict[str, Any]]:
    answer = aws.client("dynamodb").query(
        TableName=cloud.names.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ConsistentRead=True,
    )
    return [from_item(i) for i in answer["Items"]]


def _generation(cloud: Cloud) -> dict[str, Any]:
    item = aws.client("dynamodb").get_item(
        TableName=cloud.names.state_table, Key=key(*POOL_SET_KEY), ConsistentRead=True
    )["Item"]
    return from_item(item)


def assert_index_matches_pools(cloud: Cloud) -> None:
    """Each stored pool has one copy in the index, under its weight's sort key, of its stored
    document; no copy of anything else; and the generation says the index is complete."""
    pools = {str(i["sk"]): i for i in _items(cloud, "NodePool")}
    copies = _items(cloud, POOL_INDEX_PK)
    assert sorted(str(c["name"]) for c in copies) == sorted(pools)
    for copy in copies:
        pool = pools[str(copy["name"])]
        assert copy["sk"] == pool_index_key(pool)
        assert copy["document"] == pool["document"]
        assert copy["revision"] == pool.get("revision", "")
    generation = _generation(cloud)
    assert generation[POOL_INDEXED] == generation["version"]


def _store(cloud: Cloud) -> ConfigStore:
    """A container's store whose every read is past its TTL (cache_seconds=0)."""
    return ConfigStore(cloud.names.state_table, aws.client("dynamodb"), 0, clock=system_clock)


def _reads(cloud: Cloud) -> list[tuple[str, int]]:
    """Each read of the state table from here on: (operation, items it read)."""
    seen: list[tuple[str, int]] = []

    def after(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("Query", "Scan"):
            seen.append((model.name, int(parsed.get("ScannedCount", 0))))
        elif model.name == "GetItem":
            seen.append((model.name, int("Item" in parsed)))

    aws.client("dynamodb").meta.events.register("after-call.dynamodb", after)
    return seen


def test_applies_deletes_and_weight_changes_keep_the_index_what_the_pools_are(
    cloud: Cloud,
) -> None:
    # Given pools of several weights, applied
    cloud.apply(_pool("low"), _pool("mid", 50), _pool("high", 90), _pool("also-mid", 50))
    assert_index_matches_pools(cloud)
    store = _store(cloud)
    assert [p.name for p in by_weight(store.pool_set())] == ["high", "also-mid", "mid", "low"]
    # When one's weight changes, one is applied again as it was, and one is deleted
    cloud.apply(_pool("low", 100))
    cloud.apply(_pool("mid", 50))
    cloud.delete("NodePool", "high")
    # Then the index follows: one copy each, under the new weight, none of the deleted pool
    assert_index_matches_pools(cloud)
    assert [p.name for p in by_weight(store.pool_set())] == ["low", "also-mid", "mid"]
    # And a change of the document alone (not its weight) is copied too
    cloud.apply(_pool("mid", 50, "c5.large"))
    assert_index_matches_pools(cloud)
    (mid,) = [p for p in by_weight(store.pool_set()) if p.name == "mid"]
    assert list(mid.spec.requirements[1].values) == ["c5.large"]


def test_the_pools_are_read_a_page_at_a_time_only_as_far_as_asked(cloud: Cloud) -> None:
    # Given more pools than a page holds
    count = 3 * INDEX_PAGE
    cloud.apply(*(_pool(f"pool-{n:02d}", n % 7) for n in range(count)))
    reads = _reads(cloud)
    # When a fresh container reads the pool set and looks at its first pool
    pools = _store(cloud).pool_set()
    first = next(by_weight(pools))
    # Then it read the generation and one page of the index, not the partition
    assert reads == [("GetItem", 1), ("Query", INDEX_PAGE)]
    assert first.name == "pool-06"
    # And every pool, in the order they are tried, only when all are asked for
    everything = every(pools)
    queries = [n for op, n in reads if op == "Query"]
    assert len(queries) > 1 and sum(queries) == count
    assert list(everything) == sorted(everything, key=weight_order)


def test_a_request_naming_no_pool_reads_one_page_whatever_the_number_of_pools(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the request's pool first by weight among forty compatible ones
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(_pool("general", 10))
    cloud.apply(*(_pool(f"other-{n:02d}") for n in range(40)))
    queried: list[tuple[str, int]] = []
    last: dict[str, Any] = {}

    def after(parsed: dict[str, Any], **_: Any) -> None:
        partition = last["params"]["ExpressionAttributeValues"].get(":kind", {}).get("S")
        if partition in (POOL_INDEX_PK, "NodePool"):
            queried.append((partition, int(parsed["ScannedCount"])))

    events = aws.client("dynamodb").meta.events
    events.register(
        "provide-client-params.dynamodb.Query", lambda params, **_: last.update(params=params)
    )
    events.register("after-call.dynamodb.Query", after)
    # When a fresh container serves a request naming no pool
    cloud.send(launch_request("any-pool"), batch=cloud.fresh_batch())
    # Then it went to the heaviest pool, having read one page of the index
    record = cloud.record("any-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "general"
    assert queried == [(POOL_INDEX_PK, INDEX_PAGE)]


def test_a_pool_applied_while_a_container_is_warm_is_tried_first(cloud: Cloud) -> None:
    # Given a warm container that has read the pools
    cloud.apply(*(_pool(f"pool-{n:02d}", 10) for n in range(2 * INDEX_PAGE)))
    store = _store(cloud)
    assert next(by_weight(store.pool_set())).name == "pool-00"
    # When another writer applies a heavier pool, then deletes it
    cloud.apply(_pool("heavier", 20))
    # Then the warm container's next read tries it first, and after the delete no more
    assert next(by_weight(store.pool_set())).name == "heavier"
    cloud.delete("NodePool", "heavier")
    assert "heavier" not in {p.name for p in every(store.pool_set())}
    assert_index_matches_pools(cloud)


def test_a_request_naming_no_pool_in_a_warm_launcher_goes_to_a_pool_applied_since(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a warm launcher that served a request naming no pool from `general`
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.send(launch_request("before"))
    assert cloud.record("before").node_pool == "general"  # type: ignore[union-attr]
    # When a heavier pool is applied and another request naming no pool comes
    cloud.apply(_pool("heavier", 60))
    cloud.send(launch_request("after"))
    # Then it goes to the heavier pool
    record = cloud.record("after")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "heavier"


def test_a_writer_that_does_not_keep_the_index_makes_readers_list_the_pools_and_write_it(
    cloud: Cloud,
) -> None:
    # Given an index kept by every write so far
    cloud.apply(_pool("kept", 10))
    assert_index_matches_pools(cloud)
    # When a writer of a release before the index puts a pool and bumps the generation alone
    db, table = aws.client("dynamodb"), cloud.names.state_table
    stored = next(i for i in _items(cloud, "NodePool") if i["sk"] == "kept")
    body = json.loads(stored["document"])
    body["metadata"]["name"] = "older"
    body["spec"]["weight"] = 30
    older = {"pk": "NodePool", "sk": "older", "document": json.dumps(body, sort_keys=True)}
    older_item = {k: {"S": v} for k, v in older.items()}
    bump = generation_bump(table, POOL_SET_KEY)
    db.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": older_item}}, bump])
    # Then a reader does not trust the index: it lists the partition, and sees the pool
    reads = _reads(cloud)
    pools = _store(cloud).pool_set()
    assert [p.name for p in by_weight(pools)] == ["older", "kept"]
    assert ("Query", 2) in reads
    # And it wrote the index whole, so the next reader reads the index
    assert_index_matches_pools(cloud)
    reads.clear()
    assert [p.name for p in by_weight(_store(cloud).pool_set())] == ["older", "kept"]
    assert reads == [("GetItem", 1), ("Query", 2)]
    assert _items(cloud, POOL_INDEX_PK)[0]["name"] == "older"


def test_an_index_written_from_a_listing_older_than_the_generation_is_not_kept(
    cloud: Cloud,
) -> None:
    # Given a listing read at a generation, and a pool applied since (its weight changed)
    cloud.apply(_pool("a", 10), _pool("b", 20))
    store = _store(cloud)
    generation = int(_generation(cloud)["version"])
    listed = _items(cloud, "NodePool")
    cloud.apply(_pool("a", 90))
    # When that listing is written as the index (a reader that was slow to write it)
    index_all(aws.client("dynamodb"), cloud.names.state_table, generation, listed)
    # Then nothing of it was written: the index is the applies' own, and complete
    assert_index_matches_pools(cloud)
    assert [p.name for p in by_weight(store.pool_set())] == ["a", "b"]


def test_an_index_never_built_is_written_by_the_next_apply(cloud: Cloud) -> None:
    # Given pools stored by a release before the index (no copies, the generation bumped alone)
    cloud.apply(_pool("first", 10), _pool("second", 20))
    db, table = aws.client("dynamodb"), cloud.names.state_table
    for copy in _items(cloud, POOL_INDEX_PK):
        db.delete_item(TableName=table, Key=key(POOL_INDEX_PK, str(copy["sk"])))
    db.update_item(
        TableName=table,
        Key=key(*POOL_SET_KEY),
        UpdateExpression="REMOVE #indexed",
        ExpressionAttributeNames={"#indexed": POOL_INDEXED},
    )
    # When this release applies a pool
    cloud.apply(_pool("third", 30))
    # Then the index holds every pool, complete
    assert_index_matches_pools(cloud)
    assert [p.name for p in by_weight(_store(cloud).pool_set())] == ["third", "second", "first"]
