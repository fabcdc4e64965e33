"""Each CapacityQuota's status, as the sync last computed it: one item per quota beside the
documents (`CapacityQuotaStatus` / name), read by `capacity-launcher get quotas`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import batch_write, from_item, key, to_item

PK = "CapacityQuotaStatus"


class QuotaStatuses:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def save(self, statuses: Mapping[str, Mapping[str, Any]], observed_at: str) -> None:
        """Store each quota's status (name -> status document) as observed at ``observed_at``."""
        puts = [
            {
                "PutRequest": {
                    "Item": to_item(
                        {
                            "pk": PK,
                            "sk": name,
                            "status": json.dumps(status, sort_keys=True),
                            "observedAt": observed_at,
                        }
                    )
                }
            }
            for name, status in sorted(statuses.items())
        ]
        if puts:
            batch_write(self._db, self._table, puts)

    def forget(self, names: Iterable[str]) -> None:
        """Drop the statuses of quotas that no longer exist."""
        deletes = [{"DeleteRequest": {"Key": key(PK, name)}} for name in sorted(set(names))]
        if deletes:
            batch_write(self._db, self._table, deletes)

    def read(self) -> dict[str, dict[str, Any]]:
        """name -> the stored status, with the time it was observed (``observedAt``)."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": PK}},
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        return {
            str(i["sk"]): {**json.loads(str(i["status"])), "observedAt": i.get("observedAt")}
            for i in items
        }
