"""The config store's items, one level below it: a stored document's kept fields, and the pieces
of items other adapters condition on (the quotas' generation). What a stored document is (valid
or not, with its kept fields) is the domain's (`domain/apis/documents.py`), re-exported here."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.apis.documents import InvalidDocument as InvalidDocument
from capacity_launcher.domain.apis.documents import StoredDocument as StoredDocument
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.pool_order import MAX_WEIGHT, order_key
from capacity_launcher.domain.errors import (
    CapacityLauncherError,
    ConditionFailed,
    StoredDocumentInvalid,
)
from capacity_launcher.observability import logger

if TYPE_CHECKING:  # the served versions are imported by the apply and read paths that use them:
    # a launcher's cold start, which reads the hub alone, does not make their classes
    from capacity_launcher.domain.apis.config import NodeClass, NodePool
    from capacity_launcher.domain.apis.kept_fields import Kept
    from capacity_launcher.domain.apis.quotas import CapacityQuota

# The version every quota apply checks and bumps (outside the quotas' partition: never listed).
QUOTA_SET_KEY = ("CapacityQuotas", "Version")
# Beside it, one generation per NodePool that a quota names or named: an apply or delete that
# changes a quota bumps those of the pools its stored and its new document name, and a lease in
# a pool conditions on that pool's alone (what decides it: the quotas naming its pool).
QUOTA_POOL_PREFIX = "Pool#"
# A pool's quota generation item's note of the generation its members were last all made to
# hold the quota usage governing them at (`members_held`): written only as the item's `version`.
MEMBERS_HELD = "membersHeldAt"
# The NodePools' generation: every apply (of another document) and delete of a NodePool bumps it.
POOL_SET_KEY = ("NodePools", "Version")
# The NodePools' weight-ordered index: a copy of each pool's document under the sort key of the
# order pools are tried in (`pool_order.order_key`), written in the transaction of the pool's
# apply or delete, so a request naming no pool reads pages of it in that order and stops at its
# pool. The generation item's `indexed` counts the bumps that kept the index (POOL_INDEX_BUMP):
# the index is complete while it equals `version` (a writer that did not keep it, a release
# before it, bumps `version` alone; a reader then lists the partition and writes the index).
POOL_INDEX_PK = "NodePoolIndex"
POOL_INDEXED = "indexed"
# A quota apply or delete whose pool generation bumps do not all fit its first transaction (it
# names more pools than one holds) puts, in that transaction, the pools it bumps after it
# (`QuotaBumps`/<quota name>), and deletes that item once the last is bumped. An apply or a
# delete of the quota that finds the item bumps them (the document stored as applied, or gone):
# a failure between the transactions is finished by the operator's next apply or delete.
OUTSTANDING_BUMPS_PK = "QuotaBumps"
# The version every PriorityClass apply and delete bumps, and a quota naming a class is written
# conditioned on (outside the classes' partition: never listed).
PRIORITY_CLASSES_KEY = ("PriorityClasses", "Version")
# A quota item's mark: the PriorityClass it names, not stored when it was written.
UNRESOLVED = "unresolvedPriorityClass"


class ConditionedWrites:
    """A store of configuration items whose writes are one transaction conditioned on what was
    read (`_transact` returns False when it moved): the PriorityClasses' and the Cohorts'."""

    def __init__(
        self, table_name: str, dynamodb: Any | None = None, *, clock: Callable[[], datetime]
    ) -> None:
        """`clock`: the composition root's, that each document's `updatedAt` is stamped with."""
        self._table = table_name
        self._clock = clock
        self._db = dynamodb or client("dynamodb")

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        try:
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=items)
        except ConditionFailed:
            return False
        return True


def quota_generation_check(table: str, generation: int) -> dict[str, Any]:
    """A ConditionCheck that the quotas' generation is still `generation`: no quota was applied
    or deleted since the quotas a decision used were read."""
    return generation_check(table, QUOTA_SET_KEY, generation)


def quota_pool_key(pool: str) -> tuple[str, str]:
    """The key of a NodePool's quota generation (beside `QUOTA_SET_KEY`, in its partition)."""
    return QUOTA_SET_KEY[0], QUOTA_POOL_PREFIX + pool


def members_held(table: str, pool: str, generation: int) -> dict[str, Any]:
    """The Update noting that `pool`'s members all hold, at quota generation `generation`, the
    quota usage governing them; only while the pool's generation is still that one."""
    return {
        "TableName": table,
        "Key": key(*quota_pool_key(pool)),
        "UpdateExpression": "SET #held = :seen",
        "ConditionExpression": "version = :seen",
        "ExpressionAttributeNames": {"#held": MEMBERS_HELD},
        "ExpressionAttributeValues": {":seen": {"N": str(generation)}},
    }


def pool_quota_generation_check(table: str, pool: str, generation: int) -> dict[str, Any]:
    """A ConditionCheck that `pool`'s quota generation is still `generation`: no quota naming
    the pool (before or after) was applied or deleted since a decision in it read the quotas."""
    return generation_check(table, quota_pool_key(pool), generation)


def pool_generation_check(table: str, generation: int) -> dict[str, Any]:
    """A ConditionCheck that the NodePools' generation is still `generation`: no pool was
    applied or deleted since the listing a request's choice of pool used was read."""
    return generation_check(table, POOL_SET_KEY, generation)


def outstanding_bumps_put(table: str, quota: str, pools: list[str], token: str) -> dict[str, Any]:
    """The Put of the pools a quota's apply or delete bumps after its first transaction (in
    that transaction); `token` says whose they are (their last bump deletes them if so)."""
    item = {"pk": OUTSTANDING_BUMPS_PK, "sk": quota, "pools": pools, "token": token}
    return {"Put": {"TableName": table, "Item": to_item(item)}}


def generation_bump(table: str, generation_key: tuple[str, str]) -> dict[str, Any]:
    """The Update that bumps a generation, in the transaction of the write that changes it."""
    return {
        "Update": {
            "TableName": table,
            "Key": key(*generation_key),
            "UpdateExpression": "ADD version :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def pool_generation_bump(table: str) -> dict[str, Any]:
    """The Update that bumps the NodePools' generation in the transaction of a pool's write that
    keeps the index too: `indexed` follows `version` (-1 first when it never did, so an index
    never built stays behind)."""
    return {
        "Update": {
            "TableName": table,
            "Key": key(*POOL_SET_KEY),
            "UpdateExpression": "SET #indexed = if_not_exists(#indexed, :never) + :one "
            "ADD version :one",
            "ExpressionAttributeNames": {"#indexed": POOL_INDEXED},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":never": {"N": "-1"}},
        }
    }


def pool_index_key(item: dict[str, Any]) -> str | None:
    """The index sort key of a stored NodePool item, from its stored body as written (None when
    the body has no name and weight to order it by: it does not parse, and no reader chooses
    it)."""
    try:
        document = json.loads(item["document"])
        weight = document["spec"].get("weight", 0)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if type(weight) is not int or not 0 <= weight <= MAX_WEIGHT:
        return None
    return order_key(weight, str(item["sk"]))


def pool_index_item(item: dict[str, Any], sort_key: str) -> dict[str, Any]:
    """The index's copy of a stored NodePool item (what a reader parses it from)."""
    return {
        "pk": POOL_INDEX_PK,
        "sk": sort_key,
        "name": item["sk"],
        "document": item["document"],
        "revision": item.get("revision", ""),
    }


def as_read(stored: dict[str, Any] | None) -> dict[str, Any]:
    """A write's condition: the item is still stored as `stored` was read (its revision; or
    not stored, for None)."""
    if stored is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    if "revision" not in stored:  # stored before revisions were kept
        return {"ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(revision)"}
    return {
        "ConditionExpression": "revision = :read",
        "ExpressionAttributeValues": {":read": {"S": str(stored["revision"])}},
    }


def seen_version_bump(table: str, version_key: tuple[str, str], seen: int) -> dict[str, Any]:
    """The Update that bumps a version, conditioned on its being `seen` still (0: never
    bumped): a write checked against what was read cannot land after another changed it."""
    return {
        "TableName": table,
        "Key": key(*version_key),
        "UpdateExpression": "ADD version :one",
        "ConditionExpression": (
            "attribute_not_exists(version) OR version = :seen" if seen == 0 else "version = :seen"
        ),
        "ExpressionAttributeValues": {":one": {"N": "1"}, ":seen": {"N": str(seen)}},
    }


def generation_check(
    table: str, generation_key: tuple[str, str], generation: int
) -> dict[str, Any]:
    """A ConditionCheck that a generation is still `generation` (0: never bumped)."""
    check: dict[str, Any] = {
        "TableName": table,
        "Key": key(*generation_key),
        "ConditionExpression": "version = :seen",
        "ExpressionAttributeValues": {":seen": {"N": str(generation)}},
    }
    if generation == 0:
        check["ConditionExpression"] = "attribute_not_exists(version) OR version = :seen"
    return {"ConditionCheck": check}


def kept_of(item: dict[str, Any]) -> Kept | None:
    """An item's kept fields; unreadable ones are logged and left out (the document still is)."""
    body = item.get("kept")
    if body is None:
        return None
    from capacity_launcher.domain.apis.kept_fields import Kept

    try:
        return Kept.from_json(json.loads(str(body)))
    except (CapacityLauncherError, KeyError, TypeError, ValueError) as error:
        logger.warning(
            "stored kept fields do not parse: left out",
            extra={"documentName": str(item.get("sk", "")), "reason": str(error)},
        )
        return None


def node_class_ref(pool_item: dict[str, Any]) -> str | None:
    """The class a stored pool names, read from the raw document so a pool that no longer
    parses still protects its class."""
    try:
        ref = json.loads(pool_item["document"]).get("spec", {}).get("nodeClassRef")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return ref if isinstance(ref, str) else None


def read_item(db: Any, table: str, kind: str, name: str) -> dict[str, Any] | None:
    """One item of the state table, read consistently (None: not stored)."""
    with aws_call("GetItem"):
        item = db.get_item(TableName=table, Key=key(kind, name), ConsistentRead=True).get("Item")
    return from_item(item) if item else None


def query_items(db: Any, table: str, kind: str) -> list[dict[str, Any]]:
    """Every item of a kind's partition, read consistently."""
    with aws_call("Query"):
        pages = all_pages(
            db.query,
            TableName=table,
            KeyConditionExpression="pk = :kind",
            ExpressionAttributeValues={":kind": {"S": kind}},
            ConsistentRead=True,
        )
        return [from_item(i) for page in pages for i in page["Items"]]


def parse_item(kind: str, item: dict[str, Any]) -> NodeClass | NodePool | CapacityQuota:
    """The document a stored item holds (StoredDocumentInvalid, logged, when it no longer
    parses or is not the kind and name it is stored as)."""
    name = str(item.get("sk", ""))
    try:
        document = parse_document(json.loads(item["document"]))
        if document.kind != kind or document.metadata.name != name:
            raise ValueError(f"stored as {kind} {name} but is {document.kind} {document.name}")
    except (CapacityLauncherError, KeyError, TypeError, ValueError) as error:
        reason = str(error) or type(error).__name__
        logger.warning(
            "stored document does not parse: skipped",
            extra={"kind": kind, "documentName": name, "reason": reason},
        )
        raise StoredDocumentInvalid(kind, name, reason) from error
    return document
