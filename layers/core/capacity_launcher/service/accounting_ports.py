"""The ports of accounting: a pool's limits (leases, members, usage, readiness) and quotas (usage,
open reclaims, the status the sync keeps). Several concepts, one protocol each; each use case
takes those it uses: the launcher `PoolLeases`; reconciliation `ExpiringLeases`, `PoolMembers`
and `PoolUsage`; instance events `PoolMembers` and `PoolUsage`; quota reclaim `PoolMembers` and
`QuotaUsage`; the quota sync `QuotaUsage`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseReads,
    QuotaReading,
    UnreadyReading,
)
from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    LeaseFit,
    Member,
    Readiness,
)
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion
from capacity_launcher.domain.records.reclaims import ReclaimRequested

# -- pool limits: leases, members, usage, quota usage ----------------------------------------------


class LeaseSnapshot(Protocol):
    """What the lease's admission (service/admission.py) reads before it decides, each read
    strongly consistent: a write conditioned on it fails only when it moved since."""

    # The stored limits; NodePoolDeleted, or NodePoolChanged when stored at another revision.
    def limits_in_force(self, pool: str, seen: Revisions | None = None) -> PoolLimits | None: ...
    # `seen` as the stored items spell it (None: the pool or class is another document now).
    def as_stored(self, pool: str, seen: Revisions) -> Revisions | None: ...
    def usage(self, pool: str) -> Resources: ...
    def pools_generation(self) -> int: ...
    def quota_set(self, *, fresh: bool = False) -> QuotaSet: ...
    def quota_generation(self, pool: str) -> int: ...
    # Each (quota usage item, NodePool) of `items`, by item key.
    def quota_usage(self, items: Sequence[UsageKey]) -> dict[str, QuotaReading]: ...
    # The pool's count for `limits.unready` (None: this store does not gate it).
    def readiness(self, pool: str) -> UnreadyReading | None: ...
    # Every member of the pool made to hold the quota usage governing it under `quotas`, the
    # pool noted as held at their generation; False when that generation moved meanwhile.
    def hold_members(self, pool: str, quotas: QuotaSet) -> bool: ...


class SettlingLeases(Protocol):
    """What a settle reads and writes (adapters/pool_leases.py, tests/fakes/leases.py)."""

    # The lease as this container took it, once (None: not taken here, or asked before).
    def taken(self, pool: str, lease_id: str) -> Lease | None: ...
    def lease(self, pool: str, lease_id: str) -> Lease | None: ...
    # The instance ids counted as the pool's members.
    def counted(self, pool: str) -> set[str]: ...
    # Members and settlement in one write conditioned on `lease` as read; False if it moved.
    # `records`: the instances' records, each written with its member; `completions`: the
    # intents whose instances these are, done in the settling transaction (ValueError: a store
    # that cannot).
    def write_settlement(
        self,
        pool: str,
        lease_id: str,
        lease: Lease | None,
        pending: Mapping[str, Resources],
        launched: int,
        records: Mapping[str, InstanceRecord] | None = None,
        completions: Sequence[IntentCompletion] = (),
    ) -> bool: ...


class PoolLeases(LeaseSnapshot, SettlingLeases, Protocol):
    """The launcher's room in a pool's limits (and its requester's quota): leased before EC2 is
    asked, settled into members after, or cancelled (adapters/pool_leases.py). `write` and
    `extend` raise LeaseConflict naming the items that moved since `reads`."""

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease: ...
    def extend(self, lease: Lease, reads: ConfigReads) -> Lease: ...
    def cancel(self, pool: str, lease_id: str) -> bool: ...
    def reclaim(self, lease: Lease) -> bool: ...
    def stored_limits(self, pool: str) -> PoolLimits | None: ...


class ExpiringLeases(Protocol):
    """Reconciliation's view of leases: the open ones, and the expired ones given back."""

    @property
    def lease_seconds(self) -> int: ...
    def leases(self) -> list[Lease]: ...
    def reclaim(self, lease: Lease) -> bool: ...


class PoolMembers(Protocol):
    """Instances counted in their pool's usage, one member each (adapters/pool_members.py):
    instance events, reconciliation and quota reclaim count and release them."""

    def members(self, pool: str) -> list[Member]: ...
    def member(self, pool: str, instance_id: str) -> Member | None: ...
    def count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        *,
        unless_released: bool = False,
        requester: str | None = None,
    ) -> bool: ...
    def hold(self, member: Member, requester: str) -> bool: ...
    def uncount(self, member: Member) -> bool: ...
    def uncount_instance(self, pool: str, instance_id: str) -> bool: ...


class PoolUsage(Protocol):
    """A pool's usage as stored, what it is made of, and its conditioned replacement: the reads
    and the write of a recount (service/usage_recount.py; adapters/pool_usage_store.py)."""

    def usage(self, pool: str) -> Resources: ...
    def usage_version(self, pool: str) -> tuple[Resources, int | None]: ...
    def counted(self, pool: str) -> list[Lease | Member]: ...
    def replace_usage(self, pool: str, usage: Resources, version: int | None) -> bool: ...


class PoolReadinessCount(Protocol):
    """A pool's instances for `limits.unready`, counted as the lease's gate counts them
    (adapters/pool_readiness.py)."""

    def count(self, pool: str) -> Readiness: ...


class PoolRoomReads(Protocol):
    """What a preemption judges its pool's limits on, as the lease's admission reads them
    (adapters/pool_leases.py): the stored limits, the pool's usage, its count for
    `limits.unready` (None: this store does not gate it)."""

    def stored_limits(self, pool: str) -> PoolLimits | None: ...
    def usage(self, pool: str) -> Resources: ...
    def readiness(self, pool: str) -> UnreadyReading | None: ...


class QuotaUsage(Protocol):
    """Quota usage, one item per cohort and flavor (its key: CapacityQuota.usage_item), as the
    quota sync and reclaim read and recount it (adapters/quota_usage_store.py)."""

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]: ...
    def quota_reading(
        self, pk: str, pool: str
    ) -> tuple[int | None, dict[tuple[str, str], Resources]]: ...
    def counted(self, pool: str) -> list[Lease | Member]: ...
    def replace_quota_usage(
        self, pk: str, usage: dict[tuple[str, str], Resources], version: int | None
    ) -> bool: ...


# -- quotas: open reclaims and the status the sync keeps -------------------------------------------


class ReclaimStore(Protocol):
    def open(self, reclaim: ReclaimRequested) -> bool: ...
    def get(self, quota: str, pool: str) -> ReclaimRequested | None: ...
    def many(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]: ...
    def every_open(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]: ...
    def close(self, reclaim: ReclaimRequested) -> bool: ...


class QuotaStatusStore(Protocol):
    def save(self, statuses: Mapping[str, Mapping[str, Any]], observed_at: str) -> None: ...
    def forget(self, names: Iterable[str]) -> None: ...
    def read(self) -> dict[str, dict[str, Any]]: ...


class Reclaims(Protocol):
    """What the launcher asks when a request is refused because its nominal quota is lent out."""

    def request(self, refused: QuotaExceeded, request_id: str, requester: str | None) -> str: ...

    def preempt(
        self,
        refused: QuotaExceeded,
        request_id: str,
        requester: str | None,
        priority: int,
        arrived_at: datetime,
    ) -> str: ...
