"""A NodePool's write: the pool, its copy in the weight-ordered index (adapters/pool_index.py) and
the NodePools' generation bump in one transaction, conditioned on the pool being stored as read,
read again when another writer came between (at most `_RACES` times). The config store's apply
and delete of a NodePool go through here; its caches are the store's to drop."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.config_items import as_read, pool_generation_bump, read_item
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.adapters.pool_index import index_moves, keep_index
from capacity_launcher.domain.apis.config import mode_switch
from capacity_launcher.domain.errors import ConditionFailed, ConfigConflict, NotFound

# A pool's apply or delete reads the stored item, then writes conditioned on it being as read;
# another writer in between makes it read again, this many times at most.
_RACES = 5


def put_pool(db: Any, table: str, item: dict[str, Any]) -> None:
    """Put the pool, bumping the NodePools' generation unless it is stored at this revision
    already: the same document applied again leaves every request's choice of pool as it
    was. Its NodeClass need not be stored (docs/karpenter.md, "Applied in any order"); a
    delete of the class is conditioned on the generation, so it cannot race a pool applied
    naming it. The index's copy moves with it (its sort key follows the weight), in the
    same transaction, conditioned on the pool being stored as read."""
    put: dict[str, Any] = {"TableName": table, "Item": to_item(item)}
    same = {
        **put,
        "ConditionExpression": "revision = :revision",
        "ExpressionAttributeValues": {":revision": {"S": item["revision"]}},
    }
    try:
        with aws_call("PutItem"):
            db.put_item(**same)
        return
    except ConditionFailed:
        pass  # new, or another document: the listing changes
    name = str(item["sk"])
    for _ in range(_RACES):
        stored = read_item(db, table, "NodePool", name)
        # A pool stored before `staticPool` was kept is a dynamic one.
        if stored is not None and bool(stored.get("staticPool", False)) != item["staticPool"]:
            raise ConfigConflict(f"NodePool {name}: {mode_switch(item['staticPool'])}")
        writes = [{"Put": {**put, **as_read(stored)}}]
        writes += index_moves(table, stored, item)
        writes.append(pool_generation_bump(table))
        try:
            with aws_call("TransactWriteItems"):
                db.transact_write_items(TransactItems=writes)
        except ConditionFailed:
            continue  # another writer's apply or delete came between: read it again
        keep_index(db, table)
        return
    raise ConfigConflict(f"NodePool {name}: applied or deleted by another writer meanwhile")


def delete_pool(db: Any, table: str, name: str) -> None:
    """Delete the pool and its index copy and bump the NodePools' generation in one
    transaction, conditioned on the pool being stored as read (NotFound if it is not)."""
    for _ in range(_RACES):
        stored = read_item(db, table, "NodePool", name)
        if stored is None:
            raise NotFound("NodePool", name)
        delete = {"TableName": table, "Key": key("NodePool", name), **as_read(stored)}
        writes = [{"Delete": delete}, *index_moves(table, stored, None)]
        writes.append(pool_generation_bump(table))
        try:
            with aws_call("TransactWriteItems"):
                db.transact_write_items(TransactItems=writes)
        except ConditionFailed:
            continue  # applied or deleted meanwhile: read it again
        keep_index(db, table)
        return
    raise ConfigConflict(f"NodePool {name}: applied or deleted by another writer meanwhile")
