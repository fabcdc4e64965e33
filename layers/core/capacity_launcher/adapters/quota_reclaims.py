"""Open reclaims: at most one per lender quota and NodePool, until the sync closes it.

One item per (quota, NodePool), `Reclaim#<quota>#<pool>`: the Capacity Reclaim Requested detail
it published and its `releaseBy` (epoch seconds). The put is
conditioned on no open reclaim, so two refused requests of one lender never reclaim twice for the
same shortfall; the delete is conditioned on the reclaim id, so a closed reclaim is closed once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, put_if_absent
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.status import ReclaimRequested

PREFIX = "Reclaim#"
SK = "Open"


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
