"""Quota usage as the quota sync and reclaim read it, and the reads and write of its recount
(service/usage_recount.py).

The items themselves (one per cohort and flavor, a version bumped by every change) are
`quota_usage`'s; admission and release write them inside the lease and member transactions
(`pool_leases`, `pool_members`). A recount's write is conditioned on the version it read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.pool_items import PoolItems, counted_in
from capacity_launcher.adapters.quota_usage import Reading, read, read_many, replacement
from capacity_launcher.domain.accounting.pool_usage import Lease, Member
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import Resources


class QuotaUsageStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._items = PoolItems(table_name, dynamodb)

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]:
        """Use by (requester, pool) in one cohort-and-flavor quota usage item (strongly
        consistent)."""
        return self._read(pk, pool)[1]

    def quota_reading(self, pk: str, pool: str) -> Reading:
        """One quota usage item's version (None: never written) and use by (requester, pool)."""
        return self._read(pk, pool)

    def usage_in(self, items: Sequence[str], pool: str) -> dict[tuple[str, str], Resources]:
        """Use by (requester, pool) in each of the cohorts' usage items `items` of one pool
        (strongly consistent, one BatchGetItem): what a wake orders its window by."""
        with aws_call("BatchGetItem"):
            readings = read_many(self._items.db, self._items.table, [(pk, pool) for pk in items])
        usage: dict[tuple[str, str], Resources] = {}
        for _, used in readings.values():
            usage.update(used)
        return usage

    def counted(self, pool: str) -> list[Lease | Member]:
        """What the pool's usage is made of: its unsettled leases and members."""
        return counted_in(self._items.live(pool))

    def replace_quota_usage(
        self, pk: str, usage: dict[tuple[str, str], Resources], version: int | None
    ) -> bool:
        """Write `usage` as the item's, if its version is still `version`; False if it moved."""
        try:
            with aws_call("PutItem"):
                self._items.db.put_item(**replacement(self._items.table, pk, usage, version))
        except ConditionFailed:
            return False
        return True

    def _read(self, pk: str, pool: str) -> Reading:
        with aws_call("GetItem"):
            return read(self._items.db, self._items.table, pk, pool)
