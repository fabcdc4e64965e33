"""Quota usage as the quota sync and reclaim read it, and the recount that repairs it.

The items themselves (one per cohort and flavor, a version bumped by every change) are
`quota_usage`'s; admission and release write them inside the lease and member transactions
(`pool_leases`, `pool_members`). A recount sets an item to what the pool's unsettled leases and
members that hold it say, conditioned on the version it read, like the pool usage's recompute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.pool_items import CONTENDED_TRIES, PoolItems, counted_in
from capacity_launcher.adapters.quota_usage import Reading, read, replacement
from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    Member,
    QuotaRecount,
    quota_use,
    same_use,
)
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import Resources


class QuotaUsageStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._items = PoolItems(table_name, dynamodb)

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]:
        """Use by (requester, pool) in one cohort-and-flavor quota usage item (strongly
        consistent)."""
        return self._read(pk, pool)[1]

    def recount_quotas(self, pool: str, pks: Sequence[str]) -> dict[str, QuotaRecount | None]:
        """Set each quota usage item of `pks` to the unsettled leases plus the members of `pool`
        that hold it, per requester, if no writer moved it meanwhile (its version, as the pool
        usage's recompute); one read of the pool's live range serves every item (None:
        contended)."""
        found: dict[str, QuotaRecount | None] = dict.fromkeys(pks)
        pending = list(pks)
        for _ in range(CONTENDED_TRIES):
            if not pending:
                break
            before = {pk: self._read(pk, pool) for pk in pending}
            counted = counted_in(self._items.live(pool))
            again = []
            for pk in pending:
                recount = self._recount(pk, pool, before[pk], counted)
                if recount is None:
                    again.append(pk)
                found[pk] = recount
            pending = again
        return found

    def _recount(
        self,
        pk: str,
        pool: str,
        before: Reading,
        counted: Sequence[Lease | Member],
    ) -> QuotaRecount | None:
        """One item's recount from `counted` (read after `before`); None if a writer moved it."""
        version, stored = before
        if self._read(pk, pool)[0] != version:
            return None
        recounted = quota_use(counted, pk, pool)
        if same_use(stored, recounted):
            return QuotaRecount(pk, stored, recounted, repaired=False)
        try:
            with aws_call("PutItem"):
                self._items.db.put_item(**replacement(self._items.table, pk, recounted, version))
        except ConditionFailed:
            return None
        return QuotaRecount(pk, stored, recounted, repaired=True)

    def _read(self, pk: str, pool: str) -> Reading:
        with aws_call("GetItem"):
            return read(self._items.db, self._items.table, pk, pool)
