"""Open reclaims: at most one per lender quota and NodePool, until the sync closes it.

One item per (quota, NodePool), `Reclaim#<quota>#<pool>`: the Capacity Reclaim Requested detail
it published and its `releaseBy` (epoch seconds). The put is
conditioned on no open reclaim, so two refused requests of one lender never reclaim twice for the
same shortfall; the delete is conditioned on the reclaim id, so a closed reclaim is closed once.

The sync must find every open reclaim, also one whose lender was deleted or no longer names its
pool since: those are no (quota, pool) pair of the quotas it reads. So an index item,
`ReclaimIndex`, holds the pair of every reclaim opened (added before the reclaim is put), and
`every_open` reads the pairs it is given and the indexed ones; an indexed pair with no open
reclaim left is dropped from the index then.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, put_if_absent
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.reclaims import ReclaimRequested

PREFIX = "Reclaim#"
SK = "Open"
INDEX_PK = "ReclaimIndex"
# A string set of "<quota>#<pool>" (both DNS labels: never a '#' in either).
INDEX_ATTRIBUTE = "lenders"


def reclaim_pk(quota: str, pool: str) -> str:
    return f"{PREFIX}{quota}#{pool}"


class QuotaReclaims:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def open(self, reclaim: ReclaimRequested) -> bool:
        """Record ``reclaim`` as its lender's open reclaim in its pool; False if one is open."""
        item: dict[str, Any] = {
            "pk": reclaim_pk(reclaim.quota, reclaim.node_pool),
            "sk": SK,
            "reclaimId": reclaim.reclaim_id,
            "detail": json.dumps(reclaim.to_dict(), sort_keys=True),
            "releaseBy": int(reclaim.release_by.timestamp()),
        }
        # Indexed first: an open reclaim is always found, even once its lender is deleted.
        self._index("ADD", [(reclaim.quota, reclaim.node_pool)])
        return put_if_absent(self._db, self._table, item)

    def get(self, quota: str, pool: str) -> ReclaimRequested | None:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(reclaim_pk(quota, pool), SK), ConsistentRead=True
            ).get("Item")
        return _reclaim(from_item(item)) if item else None

    def many(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]:
        """The open reclaims of these (quota, pool) pairs (BatchGetItem)."""
        keys = [key(reclaim_pk(q, p), SK) for q, p in sorted(set(lenders))]
        return [_reclaim(item) for item in batch_get(self._db, self._table, keys)]

    def every_open(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]:
        """The open reclaims of these (quota, pool) pairs and of every indexed pair: also those
        of lenders deleted, or no longer naming their pool, since they were opened."""
        indexed = self._indexed()
        found = self.many({*lenders, *indexed})
        gone = indexed - {(r.quota, r.node_pool) for r in found}
        if gone:
            self._index("DELETE", gone)
        return found

    def _indexed(self) -> set[tuple[str, str]]:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(INDEX_PK, SK), ConsistentRead=True
            ).get("Item")
        pairs = item.get(INDEX_ATTRIBUTE, {}).get("SS", []) if item else []
        return {(q, p) for q, _, p in (pair.partition("#") for pair in pairs)}

    def _index(self, action: str, lenders: Iterable[tuple[str, str]]) -> None:
        """ADD pairs to the index, or DELETE them from it."""
        with aws_call("UpdateItem"):
            self._db.update_item(
                TableName=self._table,
                Key=key(INDEX_PK, SK),
                UpdateExpression=f"{action} #lenders :pairs",
                ExpressionAttributeNames={"#lenders": INDEX_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":pairs": {"SS": sorted(f"{q}#{p}" for q, p in lenders)}
                },
            )

    def close(self, reclaim: ReclaimRequested) -> bool:
        """Forget ``reclaim``; False if it was closed before (by another sync)."""
        try:
            with aws_call("DeleteItem"):
                self._db.delete_item(
                    TableName=self._table,
                    Key=key(reclaim_pk(reclaim.quota, reclaim.node_pool), SK),
                    ConditionExpression="reclaimId = :id",
                    ExpressionAttributeValues={":id": {"S": reclaim.reclaim_id}},
                )
        except ConditionFailed:
            return False
        return True


def _reclaim(item: dict[str, Any]) -> ReclaimRequested:
    return ReclaimRequested.model_validate(json.loads(str(item["detail"])))
