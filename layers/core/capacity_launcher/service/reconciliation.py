"""Reconciliation: each instance's membership in its pool's usage matches what runs in EC2.

Runs inside the reservation sync. What it repairs, one instance at a time and with the same
conditional transitions as the launcher and the instance events (so whoever gets there first
wins and nobody counts or releases twice): a live instance nobody counted (a lost start event,
a crash between launch and settle) is counted; a counted instance that terminated, or has been
stopped or missing longer than EC2's list can lag, is released. Leases of dead workers are
reclaimed; instances a crashed worker launched but never recorded are adopted from their
`capacity-launcher:request-id` tag. Instances of a live lease are left to that lease. A recorded
instance whose tags disagree with its record (a shared fleet's instance EC2 did not know in time
for its request's tags) is tagged from the record, so tags converge whatever a launch missed.

Only this deployment's instances (tagged with its stack) are looked at: another stack's in the
same account and Region are neither adopted nor counted. One made before instances carried a
stack is this deployment's when its table records it (it is then tagged with the stack), or when
the operator claims every untagged instance (CLAIM_UNTAGGED_RESOURCES).

Each pool's usage is checked against its unsettled leases plus its members, and rewritten only
if no writer changed it meanwhile (a version check): that repairs usage no instance explains.
That one read of the pool's leases and members is also the membership the instances are checked
against (each transition after it keeps usage equal to leases plus members). Drift is what both
repairs changed, in instances.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from capacity_launcher.domain.accounting.pool_usage import Member, Recount
from capacity_launcher.domain.capacity.fleet import ManagedInstance
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.reservation_state import HeldInstance
from capacity_launcher.domain.errors import LaunchFailed, Transient
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.tags import (
    NODE_CLASS,
    NODE_POOL,
    REQUEST_ID,
    REQUESTER,
    STACK,
    Ownership,
    recorded_tags,
    tags_to_fix,
)
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import ExpiringLeases, PoolMembers, PoolUsage
from capacity_launcher.service.pool_metrics import emit_pool_usage
from capacity_launcher.service.ports import Catalog, Configuration, FleetLauncher, InstanceItems
from capacity_launcher.service.usage_recount import recount_pool

# Instances that hold usage; stopping and stopped ones released it when their event arrived.
LIVE_STATES = frozenset({"pending", "running"})
# States an instance never leaves: its membership can go at once, whatever EC2's list lags.
TERMINAL_STATES = frozenset({"shutting-down", "terminated"})
# How far EC2's list may lag behind an event: a membership or release younger than this is left
# to the events (a released instance seen running later was started again, not described late).
REARM_AFTER_SECONDS = 300


@dataclass(frozen=True, slots=True)
class _Inventory:
    live: list[ManagedInstance]
    items: dict[str, InstanceRecord]  # the records read, not those adopted by this run
    sizes: dict[str, InstanceTypeInfo]
    states: dict[str, str | None]


@dataclass
class ReconciliationReport:
    drift: dict[str, int] = field(default_factory=dict)
    reclaimed: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    # Instances tagged from their records this run, and those EC2 refused to tag (next run retries).
    retagged: list[str] = field(default_factory=list)
    retag_failed: list[str] = field(default_factory=list)
    # reservation id -> requester -> live instances of ours in it
    usage_by_reservation: dict[str, dict[str, int]] = field(default_factory=dict)
    # reservation id -> our live instances in it, with the request that launched each
    held_by_reservation: dict[str, list[HeldInstance]] = field(default_factory=dict)
    # Our instances as EC2 listed them (all states), and the records of the live ones: the
    # usage roll-up counts their hours (service/usage_rollup.py).
    described: list[ManagedInstance] = field(default_factory=list)
    records: dict[str, InstanceRecord] = field(default_factory=dict)

    @property
    def total_drift(self) -> int:
        return sum(self.drift.values())


class Reconciliation:
    def __init__(
        self,
        leases: ExpiringLeases,
        members: PoolMembers,
        usage: PoolUsage,
        instances: FleetLauncher,
        items: InstanceItems,
        facts: Catalog,
        pools: Configuration,
        now: Callable[[], datetime],
        ownership: Ownership | None = None,
    ) -> None:
        self._leases = leases
        self._pool_members = members
        self._usage = usage
        self._instances = instances
        self._items = items
        self._facts = facts
        self._pools = pools
        self._now = now
        self._ownership = ownership or Ownership()

    def run(self) -> ReconciliationReport:
        report = ReconciliationReport()
        now = self._now()
        now_epoch = int(now.timestamp())
        documents = self._pools.node_pools()
        pools = {p.metadata.name for p in documents}
        # Leases first: an instance of a live lease is counted by that lease until it settles.
        in_flight = self._settle_leases(report, pools, now_epoch)
        seen = self._inventory(report, in_flight, now)
        pools |= {
            p for i in seen.live if (p := _pool_and_request(i, seen.items.get(i.instance_id))[0])
        }
        recounts = {pool: self._recompute(pool) for pool in pools}
        members = {
            pool: {m.instance_id: m for m in self._members(pool, recounts[pool])} for pool in pools
        }
        repaired: dict[str, int] = defaultdict(int)
        for instance in seen.live:
            item = report.records.get(instance.instance_id)
            self._note_reservation_use(report, instance, item)
            self._repair_live(instance, item, members, in_flight, seen.sizes, now, repaired)
        self._uncount_gone(members, seen.states, now_epoch, repaired)
        for pool in sorted(pools):
            report.drift[pool] = repaired[pool] + _corrected(recounts[pool])
        emit_pool_usage(documents, {p: r.recomputed for p, r in recounts.items() if r is not None})
        return report

    def _inventory(
        self, report: ReconciliationReport, in_flight: set[tuple[str, str]], now: datetime
    ) -> _Inventory:
        """What EC2 holds of ours and what our table records of it: orphans adopted, tags
        mended. The report keeps the instances described and every record, adopted or not."""
        described = self._described()
        live, items = self._ours_live(described)
        sizes, adopted_items = self._adopt_orphans(report, live, items, in_flight, now)
        ours_live = {i.instance_id for i in live}
        report.described = [
            i for i in described if i.instance_id in ours_live or i.state not in LIVE_STATES
        ]
        report.records = {**items, **adopted_items}
        self._retag(live, items, report)
        return _Inventory(
            live=live,
            items=items,
            sizes=sizes,
            states={i.instance_id: i.state for i in described},
        )

    def _ours_live(
        self, described: Sequence[ManagedInstance]
    ) -> tuple[list[ManagedInstance], dict[str, InstanceRecord]]:
        """The live instances described that are ours, and the records of the live ones: one
        made before instances carried their stack is ours if our table records it."""
        live = [i for i in described if i.state in LIVE_STATES]
        items = self._items.many([i.instance_id for i in live])
        return [i for i in live if self._ownership.owns(i.tags) or i.instance_id in items], items

    def _described(self) -> list[ManagedInstance]:
        """The service's instances of this deployment, and those carrying no stack (made before
        instances carried one): another deployment's are never counted, adopted or tagged."""
        return [
            i
            for i in self._instances.find_managed()
            if STACK not in i.tags or self._ownership.owns(i.tags)
        ]

    def _settle_leases(
        self, report: ReconciliationReport, pools: set[str], now_epoch: int
    ) -> set[tuple[str, str]]:
        """Reclaim the expired leases; the (pool, lease id) of the live ones. Adds their pools."""
        in_flight: set[tuple[str, str]] = set()
        for lease in self._leases.leases():
            pools.add(lease.pool)
            if lease.expires_at < now_epoch and self._leases.reclaim(lease):
                report.reclaimed.append(f"{lease.pool}/{lease.lease_id}")
            elif lease.expires_at >= now_epoch:
                in_flight.add((lease.pool, lease.lease_id))
        return in_flight

    def _adopt_orphans(
        self,
        report: ReconciliationReport,
        live: Sequence[ManagedInstance],
        items: Mapping[str, InstanceRecord],
        in_flight: set[tuple[str, str]],
        now: datetime,
    ) -> tuple[dict[str, InstanceTypeInfo], dict[str, InstanceRecord]]:
        """Record the live instances no item records and no live lease covers (those tagged
        with a request); the sizes of the orphans' types, and the records adopted."""
        orphans = [
            i
            for i in live
            if i.instance_id not in items and _pool_and_request(i, None) not in in_flight
        ]
        sizes = self._sizes(orphans)
        adopted_items = {
            o.instance_id: _adopted_record(o, sizes.get(o.instance_type), now)
            for o in orphans
            if o.tags.get(REQUEST_ID)
        }
        report.adopted = self._items.adopt(list(adopted_items.values()))
        return sizes, adopted_items

    def _repair_live(
        self,
        instance: ManagedInstance,
        item: InstanceRecord | None,
        members: Mapping[str, Mapping[str, Member]],
        in_flight: set[tuple[str, str]],
        sizes: Mapping[str, InstanceTypeInfo],
        now: datetime,
        repaired: dict[str, int],
    ) -> None:
        """Hold a counted live instance for its requester; count one its pool misses."""
        instance_id = instance.instance_id
        pool, request = _pool_and_request(instance, item)
        member = members.get(pool or "", {}).get(instance_id)
        requester = (item.requester if item else None) or instance.tags.get(REQUESTER)
        if member is not None and requester:
            # Counted for its pool only (adopted, or its lease was reclaimed before it
            # settled), or its quota changed: the quota governing it now counts it.
            _unless_contended(partial(self._pool_members.hold, member, requester))
        if not pool or member is not None:
            return
        if not self._due_a_count(instance, item, pool, request, in_flight, now):
            return
        amount = _amount(instance, item, sizes)
        count = partial(
            self._pool_members.count, unless_released=item is not None, requester=requester
        )
        repaired[pool] += _unless_contended(partial(count, pool, instance_id, amount))

    def _due_a_count(
        self,
        instance: ManagedInstance,
        item: InstanceRecord | None,
        pool: str,
        request: str | None,
        in_flight: set[tuple[str, str]],
        now: datetime,
    ) -> bool:
        """Whether a live instance its pool does not count should be counted now; re-arms the
        record of one released on a stop long enough ago."""
        if item is not None and item.released_at:
            if not _long_ago(item.released_at, now, REARM_AFTER_SECONDS):
                return False  # its stop is recent: EC2's list may lag behind the event
            # Released on a stop, running again, and its start event was lost: count it again.
            self._items.rearm(instance.instance_id)
        if request and (pool, request) in in_flight:
            return False  # launched under a lease that is not settled yet: the lease counts it
        # Without a request: maybe a coalesced launch's, not yet tagged with its request.
        return bool(request) or _long_ago(instance.launched_at, now, self._lease_window)

    def _uncount_gone(
        self,
        members: Mapping[str, Mapping[str, Member]],
        states: Mapping[str, str | None],
        now_epoch: int,
        repaired: dict[str, int],
    ) -> None:
        """Uncount the members whose instance is no longer live."""
        for pool, counted in members.items():
            for instance_id, member in counted.items():
                state = states.get(instance_id)
                if state in LIVE_STATES:
                    continue
                # Gone for good, or stopped (or not listed) for longer than EC2's list can lag.
                gone = state in TERMINAL_STATES
                if gone or now_epoch - member.counted_at > REARM_AFTER_SECONDS:
                    repaired[pool] += _unless_contended(partial(self._pool_members.uncount, member))

    def _retag(
        self,
        live: Sequence[ManagedInstance],
        items: Mapping[str, InstanceRecord],
        report: ReconciliationReport,
    ) -> None:
        """Tag each recorded instance with what its record says it carries, once per tag set."""
        by_fix: dict[tuple[tuple[str, str], ...], list[str]] = defaultdict(list)
        for instance in live:
            item = items.get(instance.instance_id)
            if item is not None:
                wanted = tags_to_fix(recorded_tags(item, self._ownership.stack), instance.tags)
                if wanted:
                    by_fix[tuple(sorted(wanted.items()))].append(instance.instance_id)
        for fix, instance_ids in by_fix.items():
            try:
                untagged = self._instances.tag(instance_ids, dict(fix))
            except (LaunchFailed, Transient):
                logger.exception("could not tag instances from their records; next sync retries")
                untagged = instance_ids
            report.retag_failed += untagged
            report.retagged += [i for i in instance_ids if i not in untagged]
        if report.retagged:
            logger.warning(
                "instances tagged from their records", extra={"instance_ids": report.retagged}
            )

    def _members(self, pool: str, recount: Recount | None) -> Sequence[Member]:
        """The members the recompute read; read again only if writers kept it from finishing."""
        return recount.members if recount is not None else self._pool_members.members(pool)

    def _recompute(self, pool: str) -> Recount | None:
        """Repairs usage not explained by members and leases (a lost write, an older version's
        delta); None when writers kept it from finishing (the next run repairs)."""
        recount = recount_pool(self._usage, pool)
        if recount is None or not recount.repaired:
            return recount
        logger.warning(
            "pool usage repaired",
            extra={
                "nodePool": pool,
                "stored": str(recount.stored),
                "recomputed": str(recount.recomputed),
            },
        )
        return recount

    @property
    def _lease_window(self) -> float:
        return float(self._leases.lease_seconds)

    def _note_reservation_use(
        self,
        report: ReconciliationReport,
        instance: ManagedInstance,
        item: InstanceRecord | None,
    ) -> None:
        reservation = instance.capacity_reservation_id
        if reservation:
            requester = (item.requester if item else None) or instance.tags.get(REQUESTER)
            by_requester = report.usage_by_reservation.setdefault(reservation, {})
            if requester:  # no requester, no key: usage is never keyed on an absent value
                by_requester[requester] = by_requester.get(requester, 0) + 1
            request = (item.request_id if item else None) or instance.tags.get(REQUEST_ID)
            held = HeldInstance(instance.instance_id, request)
            report.held_by_reservation.setdefault(reservation, []).append(held)

    def _sizes(self, orphans: Sequence[ManagedInstance]) -> dict[str, InstanceTypeInfo]:
        """Instance-type facts for instances no item records (to count and adopt them)."""
        if not orphans:
            return {}
        zones = sorted({o.zone or "" for o in orphans})
        names = sorted({o.instance_type for o in orphans})
        return {f.name: f for f in self._facts.offered(zones, names)}


def _corrected(recount: Recount | None) -> int:
    """Instances the recompute corrected usage by."""
    if recount is None or not recount.repaired:
        return 0
    return abs(recount.stored.instances - recount.recomputed.instances)


def _amount(
    instance: ManagedInstance,
    item: InstanceRecord | None,
    sizes: Mapping[str, InstanceTypeInfo],
) -> Resources:
    """What a live instance counts for: its record's resources, else its type's."""
    if item is not None:
        return item.resources
    info = sizes.get(instance.instance_type)
    return info.resources() if info else Resources(instances=1)


def _unless_contended(transition: Callable[[], bool]) -> bool:
    """One instance's transition; if writers contend for the pool now, the next run repairs it."""
    try:
        return transition()
    except Transient:
        return False


def _pool_and_request(
    instance: ManagedInstance, item: InstanceRecord | None
) -> tuple[str | None, str | None]:
    tags = instance.tags
    pool = (item.node_pool if item else None) or tags.get(NODE_POOL)
    request = (item.request_id if item else None) or tags.get(REQUEST_ID)
    return pool or None, request or None


def _long_ago(moment: str | datetime | None, now: datetime, seconds: float) -> bool:
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return True
    if moment is None:
        return True
    return (now - moment).total_seconds() > seconds


def _adopted_record(
    instance: ManagedInstance, info: InstanceTypeInfo | None, now: datetime
) -> InstanceRecord:
    tags, launched_at = instance.tags, instance.launched_at
    return InstanceRecord.placed(
        instance,
        info.resources() if info else Resources(instances=1),
        request_id=tags.get(REQUEST_ID),
        node_pool=tags.get(NODE_POOL),
        node_class=tags.get(NODE_CLASS),
        requester=tags.get(REQUESTER),
        state=instance.state or "running",
        launched_at=launched_at.isoformat() if launched_at is not None else None,
        adopted_at=now.isoformat(),
    )
