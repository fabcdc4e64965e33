"""The NodePools' weight-ordered index (issue 38): a copy of each pool's document in the
`NodePoolIndex` partition under the sort key of the order pools are tried in, kept by the config
store's applies and deletes in the transaction of the pool's write (`index_moves`), read a page
at a time (`index_pages`), and written whole (`index_all`) when the generation item says a
writer did not keep it (docs/architecture.md, "Configuration reads")."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.config_items import (
    POOL_INDEX_PK,
    POOL_INDEXED,
    POOL_SET_KEY,
    generation_check,
    parse_item,
    pool_index_item,
    pool_index_key,
    query_items,
    read_item,
)
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.apis.config import NodePool, PoolSet
from capacity_launcher.domain.errors import ConditionFailed, StoredDocumentInvalid

# The first page of the NodePools' index a request reads (then twice as many a page): the
# pool it goes to and those it would fall back to next are on it when the top pools fit it. A
# Query bills the summed size of the items it reads, 4 KB a read unit: a page of eight pools of
# a few hundred bytes costs what one item of a few KB does.
INDEX_PAGE = 8


# What one of the index's transactions carries besides its generation check: DynamoDB's 100
# items and 4 MB (each copy is a document of at most 256 KB: api_versions.MAX_DOCUMENT_BYTES).
_INDEX_WRITES = 12


def _chunks(writes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`writes` in transactions' worth (at least one, maybe empty: the mark goes in the last)."""
    return [writes[n : n + _INDEX_WRITES] for n in range(0, len(writes), _INDEX_WRITES)] or [[]]


def index_moves(
    table: str, stored: dict[str, Any] | None, item: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The index writes that take the index from `stored`'s copy to `item`'s (None: no
    pool): its copy put under its sort key, the old one deleted when the weight moved."""
    old = pool_index_key(stored) if stored is not None else None
    new = pool_index_key(item) if item is not None else None
    writes: list[dict[str, Any]] = []
    if old is not None and old != new:
        writes.append({"Delete": {"TableName": table, "Key": key(POOL_INDEX_PK, old)}})
    if item is not None and new is not None:
        copy = to_item(pool_index_item(item, new))
        writes.append({"Put": {"TableName": table, "Item": copy}})
    return writes


def index_pages(db: Any, table: str, generation: int) -> PoolSet:
    """The pools of the index, the first page read now and each next one when asked:
    INDEX_PAGE items, then twice as many a page."""
    size = INDEX_PAGE
    after: dict[str, Any] | None = None
    done = False

    def page() -> list[NodePool]:
        nonlocal size, after, done
        query: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "pk = :kind",
            "ExpressionAttributeValues": {":kind": {"S": POOL_INDEX_PK}},
            "ConsistentRead": True,
            "Limit": size,
        }
        if after is not None:
            query["ExclusiveStartKey"] = after
        with aws_call("Query"):
            answer = db.query(**query)
        after = answer.get("LastEvaluatedKey")
        done = after is None
        size *= 2
        found = []
        for copy in map(from_item, answer.get("Items", [])):
            item = {"sk": copy.get("name", ""), "document": copy.get("document")}
            try:
                pool = parse_item("NodePool", item)
            except StoredDocumentInvalid:
                continue  # listed by invalid()
            assert isinstance(pool, NodePool)
            found.append(pool)
        return found

    def more() -> list[NodePool] | None:
        return None if done else page()

    return PoolSet(generation, page(), more)


def index_all(db: Any, table: str, generation: int, items: list[dict[str, Any]]) -> None:
    """Write the index from the pools listed at `generation` (a writer that did not keep it
    bumped the generation since it was complete, or it was never built): each pool's copy
    put, each copy of no pool deleted, and the index marked complete at `generation`. Every
    write is conditioned on the generation still being `generation`, in transactions of
    the writes that fit one: a pool applied or deleted meanwhile stops it, and leaves the
    index unmarked for the next listing to write again (its writes were right at
    `generation`, and the apply kept its own pool's copy since)."""
    wanted = {}
    for item in items:
        sort_key = pool_index_key(item)
        if sort_key is not None:
            wanted[sort_key] = pool_index_item(item, sort_key)
    copies = {str(c["sk"]): c for c in query_items(db, table, POOL_INDEX_PK)}
    writes: list[dict[str, Any]] = [
        {"Delete": {"TableName": table, "Key": key(POOL_INDEX_PK, sort_key)}}
        for sort_key in sorted(copies.keys() - wanted.keys())
    ]
    writes += [
        {"Put": {"TableName": table, "Item": to_item(copy)}}
        for sort_key, copy in sorted(wanted.items())
        if copies.get(sort_key) != copy
    ]
    condition: dict[str, Any] = generation_check(table, POOL_SET_KEY, generation)["ConditionCheck"]
    mark = {
        **condition,
        "UpdateExpression": "SET version = :seen, #indexed = :seen",
        "ExpressionAttributeNames": {"#indexed": POOL_INDEXED},
    }
    chunks = _chunks(writes)
    try:
        for chunk in chunks[:-1]:
            with aws_call("TransactWriteItems"):
                db.transact_write_items(TransactItems=[{"ConditionCheck": condition}, *chunk])
        with aws_call("TransactWriteItems"):
            db.transact_write_items(TransactItems=[{"Update": mark}, *chunks[-1]])
    except ConditionFailed:
        pass  # a pool was applied or deleted meanwhile: the next listing writes it again


def keep_index(db: Any, table: str) -> None:
    """After a pool's write: the index written whole when it is not complete (never built,
    or a writer that does not keep it wrote since), so readers find it complete."""
    stored = read_item(db, table, *POOL_SET_KEY) or {}
    generation = int(stored.get("version", 0))
    if POOL_INDEXED not in stored or int(stored[POOL_INDEXED]) != generation:
        index_all(db, table, generation, query_items(db, table, "NodePool"))
