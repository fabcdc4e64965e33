"""A pool's usage as the sync and operators read it, its limits as last applied, and the
recompute that repairs the usage (conditioned on the usage item's version: adapters/pool_items.py
says why every change bumps it)."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.dynamodb import to_item
from capacity_launcher.adapters.pool_items import (
    CONTENDED_TRIES,
    USAGE,
    PoolItems,
    attributes_of,
    counted_in,
    limits_pk,
)
from capacity_launcher.domain.accounting.pool_usage import Member, Recount, usage_of
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import PoolLimits, Resources


class PoolUsageStore:
    """A pool's usage as stored, its limits as last applied, and the recompute that repairs it."""

    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._items = PoolItems(table_name, dynamodb)

    def usage(self, pool: str) -> Resources:
        return self._items.usage_item(pool)[0]

    def stored_limits(self, pool: str) -> PoolLimits | None:
        """The limits of the pool as last applied (strongly consistent); None also when the
        pool is no longer stored (a lease then says NodePoolDeleted)."""
        return self._items.stored(pool)[1]

    def recompute(self, pool: str) -> Recount | None:
        """Set usage to its unsettled leases plus its members, if no writer moved it meanwhile.

        Every usage change bumps `version`; the read of leases and members is bracketed by two
        reads of it and the write is conditional on it, so a concurrent transaction makes this
        try again (None after a few tries: the next sync repairs) instead of being overwritten.
        The members it read come back with it: as of that read, they are the pool's.
        """
        for _ in range(CONTENDED_TRIES):
            stored, version = self._items.usage_item(pool)
            counted = counted_in(self._items.live(pool))
            recomputed = usage_of(counted)
            if self._items.usage_item(pool)[1] != version:
                continue
            members = tuple(c for c in counted if isinstance(c, Member))
            if recomputed == stored:
                return Recount(stored, recomputed, repaired=False, members=members)
            if self._replace(pool, recomputed, version):
                return Recount(stored, recomputed, repaired=True, members=members)
        return None

    def _replace(self, pool: str, usage: Resources, version: int | None) -> bool:
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
