"""`FakeLeases`: the lease port (`PoolLeases`) in memory, as adapters/pool_leases.py answers it.

It holds what the table holds for a lease's decision and its conditions: each pool's stored
limits and revision, the NodeClasses' revisions, the NodePools' generation, the quotas with
their generations, each quota usage item (its version and use by requester), the pools' usage
versions and the instances marked ready. The decision is not here: service/admission.py reads
this snapshot, decides, and writes; `write` and `extend` check every named item as the
adapter's transaction conditions it, and raise LeaseConflict naming those that moved.
tests/integration/test_lease_port_conformance.py runs the same cases against both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseConflict,
    LeaseItem,
    LeaseReads,
    QuotaReading,
    UnreadyReading,
)
from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    LeaseFit,
    Readiness,
    total,
    usage_of,
)
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import NodePoolChanged, NodePoolDeleted
from capacity_launcher.domain.quantities import DIMENSIONS, PoolLimits, Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion
from tests.fakes.stores import Clock


@dataclass
class QuotaItem:
    """One cohort-and-flavor quota usage item: its version (None: never written) and use by
    requester."""

    version: int | None = None
    used: dict[str, Resources] = field(default_factory=dict)

    def add(self, requester: str, amount: Resources) -> None:
        self.used[requester] = self.used.get(requester, Resources.ZERO) + amount
        self.version = (self.version or 0) + 1


class RecordSink(Protocol):
    def put(self, records: Iterable[InstanceRecord]) -> None: ...


class CompletionSink(Protocol):
    def complete_intent(self, done: IntentCompletion) -> None: ...


class FakeLeases:
    """`PoolLeases` over dicts. A pool missing from `limits` is deleted; a pool or class with no
    revision in `revisions` / `node_classes` is one stored before revisions were kept (never
    checked, as the adapter's conditions pass on it). `gates_unready`: `readiness` answers (the
    composition root always gives the store its gate)."""

    def __init__(
        self,
        limits: Mapping[str, PoolLimits | None],
        clock: Clock,
        lease_seconds: int = 900,
        *,
        revisions: Mapping[str, str] | None = None,
        node_classes: Mapping[str, str] | None = None,
        pools_generation: int = 0,
        quotas: QuotaSet | None = None,
        gates_unready: bool = True,
    ) -> None:
        self.limits: dict[str, PoolLimits | None] = dict(limits)
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.revisions = dict(revisions or {})
        self.node_classes = dict(node_classes or {})
        self.generation = pools_generation
        self.quotas = quotas or QuotaSet(None)
        self.gates_unready = gates_unready
        self.quota_items: dict[str, QuotaItem] = {}
        # Where a settle writes the instances' records (FakeWorld: its FakeInstances).
        self.record_sink: RecordSink | None = None
        # Where a settle marks its intents done (FakeWorld: its FakeRecords).
        self.completion_sink: CompletionSink | None = None
        self.versions: dict[str, int] = {}  # each pool's usage version (absent: never written)
        self.ready: set[tuple[str, str]] = set()
        self.leases: dict[tuple[str, str], Lease] = {}
        self.members: dict[tuple[str, str], Resources] = {}
        self.writes = 0  # transactions tried by `write`
        self.holds_made: list[str] = []  # the pools `hold_members` held

    # -- the snapshot ------------------------------------------------------------------------

    def limits_in_force(self, pool: str, seen: Revisions | None = None) -> PoolLimits | None:
        if pool not in self.limits:
            raise NodePoolDeleted(pool)
        revision = self.revisions.get(pool)
        if seen is not None and revision is not None and revision != seen.pool:
            raise NodePoolChanged(pool)
        return self.limits[pool]

    def as_stored(self, pool: str, seen: Revisions) -> Revisions | None:
        """`seen` while the pool and class are stored at it (or without revisions): the fake
        stores one spelling of each document."""
        pool_ok = self.revisions.get(pool, seen.pool) == seen.pool
        class_ok = self.node_classes.get(seen.node_class_name, seen.node_class) == seen.node_class
        return seen if pool_ok and class_ok else None

    def usage(self, pool: str) -> Resources:
        open_leases = [x for (p, _), x in self.leases.items() if p == pool and not x.settled]
        counted = [amount for (p, _), amount in self.members.items() if p == pool]
        return usage_of(open_leases) + total(counted)

    def pools_generation(self) -> int:
        return self.generation

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        return self.quotas

    def quota_generation(self, pool: str) -> int:
        return self.quotas.pool_generations.get(pool, 0)

    def quota_usage(self, items: Sequence[UsageKey]) -> dict[str, QuotaReading]:
        found: dict[str, QuotaReading] = {}
        for key, flavor in items:
            item = self.quota_items.get(key, QuotaItem())
            found[key] = (item.version, {(r, flavor): a for r, a in item.used.items()})
        return found

    def readiness(self, pool: str) -> UnreadyReading | None:
        if not self.gates_unready:
            return None
        leased = sum(x.count for (p, _), x in self.leases.items() if p == pool and not x.settled)
        members = [i for (p, i) in self.members if p == pool]
        ready = [i for (p, i) in self.ready if p == pool]
        return Readiness.of(leased, members, ready), self.versions.get(pool)

    def hold_members(self, pool: str, quotas: QuotaSet) -> bool:
        """The fake keeps no member's hold: the pool is noted held at the quotas' generation."""
        self.holds_made.append(pool)
        self.quotas = self.quotas.members_held(pool, quotas.generation_in(pool) or 0)
        return True

    # -- the writes --------------------------------------------------------------------------

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease:
        self.writes += 1
        pool, amount = ask.pool, fit.per_instance * fit.count
        hold = reads.quota_hold(ask.requester)
        moved = set(self._config_moved(pool, reads.config))
        if not self._headroom(pool, reads.config.limits, amount) or (
            reads.unready_gated and self.versions.get(pool) != reads.usage_version
        ):
            moved.add(LeaseItem.POOL_USAGE)
        found = self.leases.get((pool, lease_id))
        if found is not None and not found.settled:
            moved.add(LeaseItem.LEASE)
        if reads.quota_generation is not None and reads.quota_generation != self.quota_generation(
            pool
        ):
            moved.add(LeaseItem.QUOTA_GENERATION)
        if hold is not None and any(
            self.quota_items.get(key, QuotaItem()).version != version
            for key, version in reads.quota_usage
        ):
            moved.add(LeaseItem.QUOTA_USAGE)
        if moved:
            raise LeaseConflict(moved)
        lease = Lease(
            pool=pool,
            lease_id=lease_id,
            count=fit.count,
            amount=amount,
            expires_at=int(self._clock()) + self.lease_seconds,
            quota_usage=None if hold is None else hold[0],
            requester=ask.requester,
            instance_types=fit.instance_types,
        )
        self.leases[(pool, lease_id)] = lease
        self._moved(lease, amount)
        return lease

    def extend(self, lease: Lease, reads: ConfigReads) -> Lease:
        moved = set(self._config_moved(lease.pool, reads))
        found = self.leases.get((lease.pool, lease.lease_id))
        if found is None or found.settled or found.expires_at < int(self._clock()):
            moved.add(LeaseItem.OPEN_LEASE)
        if moved or found is None:
            raise LeaseConflict(moved)
        until = int(self._clock()) + self.lease_seconds
        self.leases[(lease.pool, lease.lease_id)] = replace(found, expires_at=until)
        return replace(lease, expires_at=until)

    def _config_moved(self, pool: str, config: ConfigReads) -> Iterable[LeaseItem]:
        """The configuration checks of a lease's transaction that do not hold now."""
        seen = config.seen
        revision = self.revisions.get(pool)
        if (
            pool not in self.limits
            or self.limits[pool] != config.limits
            or (seen is not None and revision is not None and revision != seen.pool)
        ):
            yield LeaseItem.LIMITS
        if seen is None:
            return
        if self.node_classes.get(seen.node_class_name, seen.node_class) != seen.node_class:
            yield LeaseItem.NODE_CLASS
        if seen.pools_generation is not None and seen.pools_generation != self.generation:
            yield LeaseItem.POOLS_GENERATION

    def _headroom(self, pool: str, limits: PoolLimits | None, amount: Resources) -> bool:
        """The usage ADD's condition: within each limited dimension's headroom."""
        used = self.usage(pool)
        return all(
            used.amount(d) <= bound - amount.amount(d)
            for d in DIMENSIONS
            if limits is not None and (bound := limits.limit_for(d)) is not None
        )

    def _moved(self, lease: Lease, amount: Resources) -> None:
        """The pool's usage (and the quota usage the lease holds) changed by `amount`."""
        self.versions[lease.pool] = self.versions.get(lease.pool, 0) + 1
        if lease.quota_usage is not None and lease.requester is not None:
            self.quota_items.setdefault(lease.quota_usage, QuotaItem()).add(lease.requester, amount)

    # -- the lease's life --------------------------------------------------------------------

    def lease(self, pool: str, lease_id: str) -> Lease | None:
        return self.leases.get((pool, lease_id))

    def taken(self, pool: str, lease_id: str) -> Lease | None:
        return None  # the fake keeps no copy of its own: every settle reads the table

    def counted(self, pool: str) -> set[str]:
        return {i for (p, i) in self.members if p == pool}

    def write_settlement(
        self,
        pool: str,
        lease_id: str,
        lease: Lease | None,
        pending: Mapping[str, Resources],
        launched: int,
        records: Mapping[str, InstanceRecord] | None = None,
        completions: Sequence[IntentCompletion] = (),
    ) -> bool:
        """Members in place of the lease, if it is still as read (open, or still gone); the
        records of those counted now written with them (into `record_sink`), the intents'
        `completions` into `completion_sink`."""
        if records and self.record_sink is None:
            raise ValueError("records: this lease store cannot write instance records")
        if completions and self.completion_sink is None:
            raise ValueError("completions: this lease store cannot complete launch intents")
        if self.leases.get((pool, lease_id)) != lease:
            return False
        counted = {i: a for i, a in pending.items() if (pool, i) not in self.members}
        for instance_id, amount in counted.items():
            self.members[(pool, instance_id)] = amount
        if records and self.record_sink is not None:
            self.record_sink.put([records[i] for i in pending if i in records])
        for done in completions:
            assert self.completion_sink is not None
            self.completion_sink.complete_intent(done)
        held = lease or Lease(pool, lease_id, 0, Resources.ZERO, 0)
        self._moved(held, total(counted.values()) - held.amount)
        # The settled marker, as the adapter reads it back (`pool_items.settled_of`)
        count = lease.count if lease is not None else launched
        self.leases[(pool, lease_id)] = Lease(pool, lease_id, count, Resources.ZERO, 0, True)
        return True

    def reclaim(self, lease: Lease) -> bool:
        """The sync's reclaim of an expired lease."""
        found = self.leases.get((lease.pool, lease.lease_id))
        if found is None or found.settled or found.expires_at >= int(self._clock()):
            return False
        return self._drop(found)

    def cancel(self, pool: str, lease_id: str) -> bool:
        found = self.leases.get((pool, lease_id))
        if found is None or found.settled:
            return False
        return self._drop(found)

    def _drop(self, lease: Lease) -> bool:
        del self.leases[(lease.pool, lease.lease_id)]
        self._moved(lease, Resources.ZERO - lease.amount)
        return True

    def stored_limits(self, pool: str) -> PoolLimits | None:
        return self.limits.get(pool)
