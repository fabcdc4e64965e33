"""A pool's usage as the sync and operators read it, its limits as last applied, and the reads
and write of the recount that repairs the usage (service/usage_recount.py; the write is
conditioned on the usage item's version: adapters/pool_items.py says why every change bumps it)."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.dynamodb import to_item
from capacity_launcher.adapters.pool_items import (
    USAGE,
    PoolItems,
    attributes_of,
    counted_in,
    limits_pk,
)
from capacity_launcher.domain.accounting.pool_usage import Lease, Member
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import PoolLimits, Resources


class PoolUsageStore:
    """A pool's usage as stored, its limits as last applied, and its recount's reads and write."""

    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._items = PoolItems(table_name, dynamodb)

    def usage(self, pool: str) -> Resources:
        return self._items.usage_item(pool)[0]

    def stored_limits(self, pool: str) -> PoolLimits | None:
        """The limits of the pool as last applied (strongly consistent); None also when the
        pool is no longer stored (a lease then says NodePoolDeleted)."""
        return self._items.stored(pool)[1]

    def usage_version(self, pool: str) -> tuple[Resources, int | None]:
        """The pool's usage item and its version (None: never written), strongly consistent."""
        return self._items.usage_item(pool)

    def counted(self, pool: str) -> list[Lease | Member]:
        """What the pool's usage is made of: its unsettled leases and members (one Query of its
        live range)."""
        return counted_in(self._items.live(pool))

    def replace_usage(self, pool: str, usage: Resources, version: int | None) -> bool:
        """Write `usage` as the pool's, if its version is still `version`; False if it moved."""
        values = {
            "pk": limits_pk(pool),
            "sk": USAGE,
            "version": (version or 0) + 1,
            **attributes_of(usage),
        }
        condition: dict[str, Any] = {"ExpressionAttributeNames": {"#version": "version"}}
        if version is None:
            condition["ConditionExpression"] = "attribute_not_exists(#version)"
        else:
            condition["ConditionExpression"] = "#version = :version"
            condition["ExpressionAttributeValues"] = {":version": {"N": str(version)}}
        try:
            with aws_call("PutItem"):
                self._items.db.put_item(
                    TableName=self._items.table, Item=to_item(values), **condition
                )
        except ConditionFailed:
            return False
        return True
