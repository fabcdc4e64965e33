"""Pool usage, limit leases, members and quota usage behind the one `Limits` port, for now.

Each concept has its own adapter (`pool_items`, `pool_leases`, `pool_members`,
`quota_usage_store`); this composite hands each call to the one it belongs to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.pool_items import PoolUsageStore, QuotaSource
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.quota_usage_store import QuotaUsageStore
from capacity_launcher.domain.pool_usage import Lease, Member, QuotaRecount, Recount
from capacity_launcher.domain.quantities import PoolLimits, Resources


class PoolLimitsStore:
    def __init__(
        self,
        table_name: str,
        lease_seconds: int,
        dynamodb: Any | None = None,
        clock: Callable[[], float] = time.time,
        quotas: QuotaSource | None = None,
    ) -> None:
        db = dynamodb or client("dynamodb")
        self.leases_store = PoolLeaseStore(table_name, lease_seconds, db, clock, quotas)
        self.members_store = PoolMemberStore(table_name, db, clock, quotas)
        self.usage_store = PoolUsageStore(table_name, db)
        self.quota_store = QuotaUsageStore(table_name, db)

    @property
    def lease_seconds(self) -> int:
        return self.leases_store.lease_seconds

    def reserve(
        self,
        pool: str,
        lease_id: str,
        per_instance: Resources,
        count: int,
        min_count: int,
        limits: PoolLimits | None,
        requester: str | None = None,
        *,
        unleased: bool = False,
    ) -> int:
        return self.leases_store.reserve(
            pool, lease_id, per_instance, count, min_count, limits, requester, unleased=unleased
        )

    def settle(self, pool: str, lease_id: str, members: Mapping[str, Resources]) -> None:
        self.leases_store.settle(pool, lease_id, members)

    def is_settled(self, pool: str, lease_id: str) -> bool:
        return self.leases_store.is_settled(pool, lease_id)

    def lease(self, pool: str, lease_id: str) -> Lease | None:
        return self.leases_store.lease(pool, lease_id)

    def cancel(self, pool: str, lease_id: str) -> bool:
        return self.leases_store.cancel(pool, lease_id)

    def stored_limits(self, pool: str) -> PoolLimits | None:
        return self.leases_store.stored_limits(pool)

    def leases(self) -> list[Lease]:
        return self.leases_store.leases()

    def reclaim(self, lease: Lease) -> bool:
        return self.leases_store.reclaim(lease)

    def members(self, pool: str) -> list[Member]:
        return self.members_store.members(pool)

    def member(self, pool: str, instance_id: str) -> Member | None:
        return self.members_store.member(pool, instance_id)

    def count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        *,
        unless_released: bool = False,
        requester: str | None = None,
    ) -> bool:
        return self.members_store.count(
            pool, instance_id, amount, unless_released=unless_released, requester=requester
        )

    def hold(self, member: Member, requester: str) -> bool:
        return self.members_store.hold(member, requester)

    def uncount(self, member: Member) -> bool:
        return self.members_store.uncount(member)

    def uncount_instance(self, pool: str, instance_id: str) -> bool:
        return self.members_store.uncount_instance(pool, instance_id)

    def usage(self, pool: str) -> Resources:
        return self.usage_store.usage(pool)

    def recompute(self, pool: str) -> Recount | None:
        return self.usage_store.recompute(pool)

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]:
        return self.quota_store.quota_usage(pk, pool)

    def recount_quotas(self, pool: str, pks: Sequence[str]) -> dict[str, QuotaRecount | None]:
        return self.quota_store.recount_quotas(pool, pks)
