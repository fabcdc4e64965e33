"""A lease's writes as DynamoDB transactions of named items: the service decides
(service/admission.py), this module writes what it decided, conditioned on what it read.

Each item of a lease's transaction is a small dataclass with the name a conflict reports it by
(domain/accounting/lease_reads.py): the pool's usage (an ADD conditioned on each limited dimension's
headroom: the lease never takes the usage over the limits, whatever was read; and on the
usage version `limits.unready` was counted at), the lease's put (only if absent, with the types
it covers when narrowed), the pool's stored limits and revision, its NodeClass's revision, the
NodePools' generation (a request that named no pool: its choice of pool), the pool's quota
generation (only a change to a quota naming the pool bumps it), then the quota usage items the
admission read (the one it holds updated, every other one checked), each conditioned on the
version read. A take-up's transaction is the lease's extension (open and unexpired) beside the
same configuration checks.

A cancelled transaction raises LeaseConflict naming the items DynamoDB's CancellationReasons
say failed (their codes classified in domain/errors.py and domain/aws_errors.py), mapped back to
the items by name, so the service never counts positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.config_items import (
    pool_generation_check,
    pool_quota_generation_check,
)
from capacity_launcher.adapters.dynamodb import to_item
from capacity_launcher.adapters.pool_items import (
    LEASE_PREFIX,
    OPEN_LEASE,
    PoolItems,
    QuotaHold,
    attributes_of,
    hold_attributes,
    hold_of,
    lease_of,
    lease_types_attributes,
    limits_pk,
    within,
)
from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseConflict,
    LeaseItem,
    LeaseReads,
)
from capacity_launcher.domain.accounting.pool_usage import Lease, LeaseFit
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.index_shards import shard_value


class NamedItem(Protocol):
    """One action of a lease's transaction, and the name its conflict is reported by."""

    name: ClassVar[LeaseItem]

    def action(self, table: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PoolUsageAdd:
    """The pool's usage, added to under its limits' headroom; when `limits.unready` gated the
    lease, only at the usage version its count was read at."""

    name: ClassVar[LeaseItem] = LeaseItem.POOL_USAGE
    items: PoolItems
    pool: str
    amount: Resources
    limits: PoolLimits | None
    gated: bool = False
    version: int | None = None

    def action(self, table: str) -> dict[str, Any]:
        update = self.items.add_update(self.pool, self.amount)
        within(update, self.limits, self.amount)
        if self.gated:
            held = (
                "#version = :readVersion"
                if self.version is not None
                else "attribute_not_exists(#version)"
            )
            existing = update.get("ConditionExpression")
            update["ConditionExpression"] = f"{existing} AND {held}" if existing else held
            if self.version is not None:
                update["ExpressionAttributeValues"][":readVersion"] = {"N": str(self.version)}
        return {"Update": update}


@dataclass(frozen=True)
class LeasePut:
    """The lease, put only if absent."""

    name: ClassVar[LeaseItem] = LeaseItem.LEASE
    lease: Lease

    def item(self) -> dict[str, Any]:
        lease, pk, sk = self.lease, limits_pk(self.lease.pool), LEASE_PREFIX + self.lease.lease_id
        return {
            "pk": pk,
            "sk": sk,
            "count": lease.count,
            "expiresAt": lease.expires_at,
            "openLease": shard_value(OPEN_LEASE, pk + sk),
            **attributes_of(lease.amount),
            **({"requester": lease.requester} if lease.requester else {}),
            **hold_attributes(hold_of(lease)),
            **lease_types_attributes(lease.instance_types),
        }

    def action(self, table: str) -> dict[str, Any]:
        put = {
            "TableName": table,
            "Item": to_item(self.item()),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        return {"Put": put}


@dataclass(frozen=True)
class LeaseExtension:
    """An open lease's expiry moved on, only while it is open and unexpired at `now`."""

    name: ClassVar[LeaseItem] = LeaseItem.OPEN_LEASE
    items: PoolItems
    lease: Lease
    now: int
    until: int

    def action(self, table: str) -> dict[str, Any]:
        return self.items.lease_extension(
            self.lease.pool, self.lease.lease_id, self.now, self.until
        )


@dataclass(frozen=True)
class LimitsCheck:
    """The pool stored with the limits (and revision) the lease was sized by."""

    name: ClassVar[LeaseItem] = LeaseItem.LIMITS
    items: PoolItems
    pool: str
    config: ConfigReads

    def action(self, table: str) -> dict[str, Any]:
        return self.items.limits_check(self.pool, self.config.limits, self.config.seen)


@dataclass(frozen=True)
class NodeClassCheck:
    """The pool's NodeClass stored at the revision the request was resolved with."""

    name: ClassVar[LeaseItem] = LeaseItem.NODE_CLASS
    items: PoolItems
    seen: Revisions

    def action(self, table: str) -> dict[str, Any]:
        return self.items.node_class_check(self.seen)


@dataclass(frozen=True)
class PoolsGenerationCheck:
    """The NodePools' generation the request chose its pool from."""

    name: ClassVar[LeaseItem] = LeaseItem.POOLS_GENERATION
    generation: int

    def action(self, table: str) -> dict[str, Any]:
        return pool_generation_check(table, self.generation)


@dataclass(frozen=True)
class QuotaGenerationCheck:
    """The pool's quota generation the quotas were read at."""

    name: ClassVar[LeaseItem] = LeaseItem.QUOTA_GENERATION
    pool: str
    generation: int

    def action(self, table: str) -> dict[str, Any]:
        return pool_quota_generation_check(table, self.pool, self.generation)


@dataclass(frozen=True)
class QuotaUsageAdd:
    """The quota usage item the lease holds, added to at the version read."""

    name: ClassVar[LeaseItem] = LeaseItem.QUOTA_USAGE
    key: str
    requester: str
    amount: Resources
    version: int | None

    def action(self, table: str) -> dict[str, Any]:
        update = quota_usage.update(
            table,
            self.key,
            self.requester,
            self.amount,
            read_version=self.version,
            conditioned=True,
        )
        return {"Update": update}


@dataclass(frozen=True)
class QuotaUsageCheck:
    """Another quota usage item the admission read, unchanged since."""

    name: ClassVar[LeaseItem] = LeaseItem.QUOTA_USAGE
    key: str
    version: int | None

    def action(self, table: str) -> dict[str, Any]:
        return quota_usage.unchanged(table, self.key, self.version)


class LeaseWrites:
    """The lease port's writes: a new lease, and a take-up's extension."""

    def __init__(self, items: PoolItems, lease_seconds: int, clock: Callable[[], float]) -> None:
        self._items = items
        self._lease_seconds = lease_seconds
        self._clock = clock

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease:
        """Put the lease `fit` decided, in one transaction conditioned on `reads`; LeaseConflict
        naming what moved."""
        amount = fit.per_instance * fit.count
        hold = reads.quota_hold(ask.requester)
        lease = Lease(
            pool=ask.pool,
            lease_id=lease_id,
            count=fit.count,
            amount=amount,
            expires_at=int(self._clock()) + self._lease_seconds,
            quota_usage=None if hold is None else hold[0],
            # named even when no quota governs it: one applied before it settles holds it
            requester=ask.requester,
            instance_types=fit.instance_types,
        )
        usage = PoolUsageAdd(
            self._items,
            ask.pool,
            amount,
            reads.config.limits,
            reads.unready_gated,
            reads.usage_version,
        )
        named: list[NamedItem] = [usage, LeasePut(lease)]
        named += self._configuration_checks(ask.pool, reads.config)
        if reads.quota_generation is not None:
            named.append(QuotaGenerationCheck(ask.pool, reads.quota_generation))
        named += _quota_items(reads, hold, amount)
        self._transact(named)
        return lease_of(LeasePut(lease).item())

    def extend(self, lease: Lease, reads: ConfigReads) -> Lease:
        """`lease`, extended by a whole lease period from now, in one transaction with the
        configuration checks of a new lease on `reads`; LeaseConflict naming what moved
        (`OPEN_LEASE`: it is no longer open, or expired)."""
        now = int(self._clock())
        until = now + self._lease_seconds
        extension = LeaseExtension(self._items, lease, now, until)
        self._transact([extension, *self._configuration_checks(lease.pool, reads)])
        return replace(lease, expires_at=until)

    def _configuration_checks(self, pool: str, config: ConfigReads) -> list[NamedItem]:
        """What the request was resolved and the lease decided with: the pool's stored limits
        and revision, its NodeClass's revision, and the NodePools' generation."""
        checks: list[NamedItem] = [LimitsCheck(self._items, pool, config)]
        seen = config.seen
        if seen is not None:
            checks.append(NodeClassCheck(self._items, seen))
            if seen.pools_generation is not None:
                checks.append(PoolsGenerationCheck(seen.pools_generation))
        return checks

    def _transact(self, named: Sequence[NamedItem]) -> None:
        table = self._items.table
        try:
            self._items.transact([item.action(table) for item in named])
        except ConditionFailed as failed:
            moved = [item.name for at, item in enumerate(named) if failed.failed_at(at)]
            raise LeaseConflict(moved, failed.reasons) from failed


def _quota_items(reads: LeaseReads, hold: QuotaHold, amount: Resources) -> list[NamedItem]:
    """The quota usage item the lease holds, added to, and every other one read, checked."""
    if hold is None:
        return []
    (key, version), *others = reads.quota_usage
    added: list[NamedItem] = [QuotaUsageAdd(key, hold[1], amount, version)]
    return added + [QuotaUsageCheck(other, read) for other, read in others]
