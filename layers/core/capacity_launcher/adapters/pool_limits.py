"""Pool usage and limit leases, kept exact with conditional DynamoDB transactions.

A worker leases `count x largest candidate` before launching (a conditional update that fails
rather than overrun), and settles the lease to what really launched. A lease that outlives its
worker expires; the reservation sync reclaims it. Terminations release usage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.dynamodb import (
    from_item,
    is_condition_failure,
    key,
    raise_for,
    to_item,
)
from capacity_launcher.domain.quantities import (
    CPU,
    DIMENSIONS,
    GPU,
    INSTANCES,
    MEMORY,
    PoolLimits,
    Resources,
)

USAGE = "Usage"
LEASE_PREFIX = "Lease#"
# How long a settled lease is kept as proof of settlement (longer than any redelivery).
SETTLED_MARKER_SECONDS = 7 * 24 * 3600
_ATTRIBUTES = {CPU: "cpu", MEMORY: "memoryMiB", GPU: "gpu", INSTANCES: "instances"}
_RESERVE_TRIES = 3


def limits_pk(pool: str) -> str:
    return f"Limits#{pool}"


@dataclass(frozen=True)
class Lease:
    pool: str
    lease_id: str
    count: int
    amount: Resources
    expires_at: int
    settled: bool = False


class PoolLimitsStore:
    def __init__(
        self,
        table_name: str,
        lease_seconds: int,
        dynamodb: Any | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._table = table_name
        self._lease_seconds = lease_seconds
        self._db = dynamodb or client("dynamodb")
        self._clock = clock

    def reserve(
        self,
        pool: str,
        lease_id: str,
        per_instance: Resources,
        count: int,
        min_count: int,
        limits: PoolLimits | None,
    ) -> int:
        """Lease room for up to `count` instances, at least `min_count`; 0 if that does not fit now.

        Idempotent per lease id: a retry finds its lease and gets the same answer.
        """
        existing = self.lease(pool, lease_id)
        if existing is not None:
            return existing.count
        wanted = count
        for _ in range(_RESERVE_TRIES):
            amount = per_instance * wanted
            if limits is None or not amount.fits_within(limits):
                try:
                    self._db.transact_write_items(
                        TransactItems=self._reserve_items(pool, lease_id, wanted, amount, limits)
                    )
                    return wanted
                except ClientError as error:
                    if not is_condition_failure(error):
                        raise_for("TransactWriteItems", error)
                    existing = self.lease(pool, lease_id)
                    if existing is not None:
                        return existing.count
            assert limits is not None
            headroom = limits.headroom(self.usage(pool), per_instance)
            wanted = count if headroom is None else min(count, headroom)
            if wanted < min_count or wanted == 0:
                return 0
        return 0

    def settle(self, pool: str, lease_id: str, actual: Resources) -> None:
        """Turn the lease into usage of exactly `actual`, once (a retry after a crash is a no-op).

        The settled lease stays behind as a marker until the table's TTL removes it, so a
        redelivered request can never lease, or count, the same instances twice.
        """
        lease = self.lease(pool, lease_id)
        if lease is not None and lease.settled:
            return
        delta = actual if lease is None else actual - lease.amount
        marker: dict[str, Any] = {
            "TableName": self._table,
            "Key": key(limits_pk(pool), LEASE_PREFIX + lease_id),
            "UpdateExpression": "SET settled = :true, #ttl = :ttl",
            "ConditionExpression": "attribute_not_exists(settled)",
            "ExpressionAttributeNames": {"#ttl": "ttl"},
            "ExpressionAttributeValues": {
                ":true": {"BOOL": True},
                ":ttl": {"N": str(int(self._clock()) + SETTLED_MARKER_SECONDS)},
            },
        }
        if lease is None:
            # Reclaimed while we launched: its amount already left usage; record ours afresh.
            marker["UpdateExpression"] += ", #count = :count"
            marker["ExpressionAttributeNames"]["#count"] = "count"
            marker["ExpressionAttributeValues"][":count"] = {"N": str(actual.instances)}
        try:
            self._db.transact_write_items(
                TransactItems=[{"Update": self._add_update(pool, delta)}, {"Update": marker}]
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise_for("TransactWriteItems", error)

    def release(self, pool: str, amount: Resources) -> None:
        """Usage freed by instances that stopped or terminated."""
        self._add(pool, Resources.ZERO - amount)

    def usage(self, pool: str) -> Resources:
        try:
            item = self._db.get_item(
                TableName=self._table, Key=key(limits_pk(pool), USAGE), ConsistentRead=True
            ).get("Item")
        except ClientError as error:
            raise_for("GetItem", error)
            raise
        return _resources(from_item(item)) if item else Resources.ZERO

    def set_usage(self, pool: str, usage: Resources) -> None:
        """Reconciliation: usage recomputed from the instances that exist, plus live leases."""
        values = {"pk": limits_pk(pool), "sk": USAGE, **_attributes(usage)}
        try:
            self._db.put_item(TableName=self._table, Item=to_item(values))
        except ClientError as error:
            raise_for("PutItem", error)

    def lease(self, pool: str, lease_id: str) -> Lease | None:
        try:
            item = self._db.get_item(
                TableName=self._table,
                Key=key(limits_pk(pool), LEASE_PREFIX + lease_id),
                ConsistentRead=True,
            ).get("Item")
        except ClientError as error:
            raise_for("GetItem", error)
            raise
        return _lease(from_item(item)) if item else None

    def leases(self) -> list[Lease]:
        """Every unsettled lease (the sync reclaims the expired ones)."""
        try:
            pages = self._db.get_paginator("scan").paginate(
                TableName=self._table,
                FilterExpression=(
                    "begins_with(pk, :limits) AND begins_with(sk, :lease)"
                    " AND attribute_not_exists(settled)"
                ),
                ExpressionAttributeValues={
                    ":limits": {"S": "Limits#"},
                    ":lease": {"S": LEASE_PREFIX},
                },
            )
            return [_lease(from_item(i)) for page in pages for i in page["Items"]]
        except ClientError as error:
            raise_for("Scan", error)
            raise

    def reclaim(self, lease: Lease) -> bool:
        """Give an expired lease's amount back; False if it was settled or reclaimed meanwhile."""
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {"Update": self._add_update(lease.pool, Resources.ZERO - lease.amount)},
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": key(limits_pk(lease.pool), LEASE_PREFIX + lease.lease_id),
                            "ConditionExpression": (
                                "attribute_exists(pk) AND attribute_not_exists(settled)"
                                " AND expiresAt < :now"
                            ),
                            "ExpressionAttributeValues": {":now": {"N": str(int(self._clock()))}},
                        }
                    },
                ]
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise_for("TransactWriteItems", error)
        return True

    def _reserve_items(
        self, pool: str, lease_id: str, count: int, amount: Resources, limits: PoolLimits | None
    ) -> list[dict[str, Any]]:
        update = self._add_update(pool, amount)
        conditions = []
        for dimension in DIMENSIONS:
            bound = limits.limit_for(dimension) if limits else None
            if bound is None:
                continue
            name = _ATTRIBUTES[dimension]
            conditions.append(f"(attribute_not_exists(#{name}) OR #{name} <= :max_{name})")
            update["ExpressionAttributeValues"][f":max_{name}"] = {
                "N": str(bound - amount.amount(dimension))
            }
        if conditions:
            update["ConditionExpression"] = " AND ".join(conditions)
        lease = {
            "pk": limits_pk(pool),
            "sk": LEASE_PREFIX + lease_id,
            "count": count,
            "expiresAt": int(self._clock()) + self._lease_seconds,
            **_attributes(amount),
        }
        return [
            {"Update": update},
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(lease),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]

    def _add_update(self, pool: str, amount: Resources) -> dict[str, Any]:
        names = {f"#{a}": a for a in _ATTRIBUTES.values()}
        values = {f":{_ATTRIBUTES[d]}": {"N": str(v)} for d, v in amount.amounts().items()}
        return {
            "TableName": self._table,
            "Key": key(limits_pk(pool), USAGE),
            "UpdateExpression": "ADD " + ", ".join(f"#{a} :{a}" for a in _ATTRIBUTES.values()),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _add(self, pool: str, amount: Resources) -> None:
        try:
            self._db.update_item(**self._add_update(pool, amount))
        except ClientError as error:
            raise_for("UpdateItem", error)


def _attributes(amount: Resources) -> dict[str, Decimal]:
    return {_ATTRIBUTES[d]: v for d, v in amount.amounts().items()}


def _resources(item: dict[str, Any]) -> Resources:
    return Resources.from_amounts({d: item.get(a, 0) for d, a in _ATTRIBUTES.items()})


def _lease(item: dict[str, Any]) -> Lease:
    return Lease(
        pool=str(item["pk"]).removeprefix("Limits#"),
        lease_id=str(item["sk"]).removeprefix(LEASE_PREFIX),
        count=int(item.get("count", 0)),
        amount=_resources(item),
        expires_at=int(item.get("expiresAt", 0)),
        settled=bool(item.get("settled", False)),
    )
