"""Taking a limit lease, as Kueue's scheduler admits a workload: read a snapshot through the lease
port, decide with the domain, write the decision conditioned on what was read, and on a conflict
read again only what moved, a bounded number of times.

The decision (`quota_leases.fit_quota_lease`) fits the lease into the room the pool's limits
leave beside its usage, and the room its requester's quota leaves: `count x the largest
candidate` when that fits, otherwise narrowed to the candidate types that fit (`fit_lease`),
sized by the largest of those. The first try assumes the pool's usage leaves room for the whole
lease and reads nothing of it; when it does not (the limits alone cannot hold it, or the usage
item moved), the pool's usage is read and the decision made from what it says. Never is a lease
narrowed or refused on the container's copy of the limits: the stored ones are read first.

The write (`PoolLeases.write`) is one transaction of named items (domain/accounting/lease_reads.py);
its conflict names the items that moved, and says what to read again before deciding again: the
pool's usage (another lease or settle moved it), the stored limits (the pool was applied), the
quotas (a quota naming the pool, or a Cohort of its tree, was applied: the stored quota set),
the quota usage (another admission in the cohort, or in any cohort of its tree, wrote first: read
on the next decision). Through a Cohort tree (Kueue's hierarchical cohorts) the decision reads
the usage item of every cohort of the tree in the pool and conditions its write on each. A pool
or class applied since the
request was resolved is not decided again here: NodePoolChanged sends the request back to be
resolved on the stored documents. Another revision alone does not say the document changed
(a writer of another version spells it otherwise): the stored documents are read first, and when
they are the ones the request was resolved with, the write conditions on the revisions they are
stored with. A refusal (the limits, `limits.unready` or the quota leave no room) writes no lease
to fail on the NodePools' generation: for a request that named no pool it is confirmed on the
stored generation first (NodePoolChanged when a pool was applied or deleted since its listing).

A lease an earlier delivery took and left open (its worker died before it wrote an intent) is
taken up by the redelivery (`take_up`) only under the same configuration checks, in one
transaction beside the lease's extension by a whole lease period (only while it is open and
unexpired: an expired lease is one the sync may reclaim at any moment, issue 34).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseConflict,
    LeaseItem,
    LeaseReads,
)
from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    LeaseFit,
    room_left,
    unready_refusal,
)
from capacity_launcher.domain.accounting.quota_leases import (
    LeaseAsk,
    fit_quota_lease,
    governing,
    tree_usage_items,
)
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import NodePoolChanged, QuotaExceeded, Transient
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.service.accounting_ports import LeaseSnapshot, PoolLeases

# Decisions a lease makes before the message goes back (a re-read of the limits or the usage
# counts as one; a lost race for the quota usage does not, up to `QUOTA_TRIES`).
RESERVE_TRIES = 3
# Admissions that lost the race for their cohort's quota usage, before the message goes back.
QUOTA_TRIES = 4


def take_lease(
    leases: PoolLeases,
    ask: LeaseAsk,
    lease_id: str,
    limits: PoolLimits | None,
    seen: Revisions | None = None,
    *,
    unleased: bool = False,
) -> Lease | None:
    """The lease `ask` is granted under `lease_id`; None when not even `ask.least` fits now.

    `limits`: the container's copy of the pool's limits; `seen`: the revisions of the pool and
    class the request was resolved with (NodePoolChanged when either is stored at another one
    now). `unleased`: the caller knows no lease is stored under `lease_id` (none is read first;
    the lease is put only if absent all the same). Idempotent per lease id: a retry finds its
    lease. QuotaExceeded, UnreadyLimitReached or NodePoolDeleted when the quota, the pool's
    `limits.unready` or its deletion refuse it; Transient when other admissions kept winning."""
    existing = None if unleased else leases.lease(ask.pool, lease_id)
    if existing is not None:
        return existing
    snapshot = _Snapshot(ConfigReads(limits, seen), leases.quota_set())
    return _Admission(leases, ask, lease_id, snapshot).run()


def take_up(
    leases: PoolLeases, lease: Lease, limits: PoolLimits | None, seen: Revisions
) -> Lease | None:
    """An open lease an earlier delivery took, taken up only under what a new lease is
    conditioned on (the pool's stored limits and revision, its class's revision, the NodePools'
    generation) on `seen`, the revisions the request was resolved with now, and extended by a
    lease period. NodePoolChanged or NodePoolDeleted as for a new lease; None when it is no
    longer open, or expired (the caller gives it back and takes a new one)."""
    config = ConfigReads(limits, seen)
    for _ in range(RESERVE_TRIES):
        try:
            return leases.extend(lease, config)
        except LeaseConflict as conflict:
            if LeaseItem.OPEN_LEASE in conflict.moved:
                return None
            config = _checked_again(leases, lease.pool, config.seen, conflict)
    raise NodePoolChanged(lease.pool)  # applied again and again while it was taken up


class _Next(Enum):
    """What a try that leased nothing asks for next."""

    AGAIN = "again"  # decide again at once, on what was just read
    FULL = "full"  # not even `least` fits the room decided on
    USAGE_MOVED = "usage moved"  # the pool's usage did not hold it: read it, decide again


@dataclass
class _Snapshot:
    """What the admission has read so far (Kueue's snapshot)."""

    config: ConfigReads
    quotas: QuotaSet
    stored: bool = False  # `config.limits` are the stored ones, not the container's copy
    fresh: bool = False  # `quotas` were read now, not the container's copy
    used: Resources | None = None  # the pool's usage; None: not read (room for the whole)

    def whole_fits(self, ask: LeaseAsk) -> bool:
        """Whether the limits themselves hold the whole lease, and as many again as the
        requests launched with it ask for."""
        amount = ask.per_instance * (ask.count + ask.beside)
        return self.config.limits is None or not amount.fits_within(self.config.limits)


class _Admission:
    """One `take_lease`: the loop of read, decide, write."""

    def __init__(self, leases: PoolLeases, ask: LeaseAsk, lease_id: str, snapshot: _Snapshot):
        self._leases, self._ask, self._lease_id = leases, ask, lease_id
        self._snapshot = snapshot
        self._tries = self._lost = 0

    def run(self) -> Lease | None:
        snapshot, pool = self._snapshot, self._ask.pool
        while self._tries < RESERVE_TRIES + 2:
            self._tries += 1
            if snapshot.used is None and not snapshot.whole_fits(self._ask):
                if not snapshot.stored:
                    self._read_limits()  # never narrow nor refuse on a copy that may be stale
                    continue
                snapshot.used = self._leases.usage(pool)
            outcome = self._try()
            if isinstance(outcome, Lease):
                return outcome
            if outcome is _Next.FULL and snapshot.stored:
                self._confirm_pools()
                return None  # decided on the stored limits and the usage read: full
            if outcome is _Next.FULL:
                self._read_limits()
            elif outcome is _Next.USAGE_MOVED:
                snapshot.used = self._leases.usage(pool)
        return None

    def _try(self) -> Lease | _Next:
        """Decide and write the lease once."""
        try:
            fit, quota_usage = self._decide()
        except _HoldsBehind as behind:
            return self._hold_members(behind.pool)
        except QuotaExceeded:
            stored = self._leases.quota_generation(self._ask.pool)
            if self._snapshot.fresh or stored == self._snapshot.quotas.generation_in(
                self._ask.pool
            ):
                self._confirm_pools()
                raise
            # Refused by a copy older than the stored quotas: decide again on the stored ones.
            self._refresh_quotas()
            self._tries -= 1
            return _Next.AGAIN
        if fit is None:
            return _Next.FULL
        reads = self._reads(quota_usage)
        try:
            return self._leases.write(self._ask, self._lease_id, fit, reads)
        except LeaseConflict as conflict:
            existing = self._leases.lease(self._ask.pool, self._lease_id)
            if existing is not None:
                return existing  # a retry's, put before this one
            return self._after(conflict)

    def _decide(self) -> tuple[LeaseFit | None, tuple[tuple[str, int | None], ...]]:
        """The lease the room left and the quotas admit (None: not even `least` fits the pool's
        room), and the quota usage items it read (key, version), the one it holds first."""
        ask, snapshot = self._ask, self._snapshot
        room = room_left(snapshot.config.limits, snapshot.used or Resources.ZERO)
        quotas = snapshot.quotas.quotas
        quota = governing(quotas, ask.requester, ask.pool)
        if quota is None or ask.requester is None:
            return fit_quota_lease((), ask, {}, room), ()
        # Through a cohort tree, every cohort's item of the tree in the pool (Kueue's Cohort).
        cohorts = snapshot.quotas.cohorts
        items = tree_usage_items(quota, cohorts, ask.pool)
        for pool in dict.fromkeys(flavor for _, flavor in items):  # a group's other pools too
            if not snapshot.quotas.holds_current(pool):
                raise _HoldsBehind(pool)  # an apply naming the pool: its members held first
        readings = self._leases.quota_usage(items)
        usage = {k: v for _, found in readings.values() for k, v in found.items()}
        fit = fit_quota_lease(quotas, ask, usage, room, cohorts)
        if fit is None:
            return None, ()
        return fit, tuple((key, readings[key][0]) for key, _ in items)

    def _reads(self, quota_usage: tuple[tuple[str, int | None], ...]) -> LeaseReads:
        """What the write conditions on; `limits.unready` refuses here (a refusal of a request
        that named no pool confirmed on the NodePools' generation)."""
        snapshot, pool = self._snapshot, self._ask.pool
        reads = LeaseReads(snapshot.config, snapshot.quotas.generation_in(pool), quota_usage)
        limits = snapshot.config.limits
        if limits is None or limits.unready is None:
            return reads
        reading = self._leases.readiness(pool)
        if reading is None:
            return reads  # this store does not gate `limits.unready`
        readiness, version = reading
        refused = unready_refusal(pool, limits, readiness)
        if refused is not None:
            self._confirm_pools()
            raise refused
        return LeaseReads(
            reads.config,
            reads.quota_generation,
            quota_usage,
            unready_gated=True,
            usage_version=version,
        )

    def _after(self, conflict: LeaseConflict) -> _Next:
        """What a cancelled write asks for next, by the items that moved."""
        moved, snapshot, pool = conflict.moved, self._snapshot, self._ask.pool
        seen = snapshot.config.seen
        if seen is not None and LeaseItem.NODE_CLASS in moved:
            changed = NodePoolChanged(pool, f"NodeClass {seen.node_class_name} was applied")
            seen = _spelled_as_stored(self._leases, pool, seen, changed)
            snapshot.config = ConfigReads(snapshot.config.limits, seen)
            return _Next.AGAIN
        if _pools_moved(seen, conflict):
            raise NodePoolChanged(pool, "a NodePool was applied or deleted")
        if LeaseItem.QUOTA_USAGE in moved:
            # Another admission or release in the quota's group wrote first: read again.
            return self._lost_race()
        if snapshot.quotas.generation is not None and LeaseItem.QUOTA_GENERATION in moved:
            # A quota naming the pool was applied or deleted since this copy was read.
            self._refresh_quotas()
            return self._lost_race()
        if LeaseItem.LIMITS in moved:
            # The pool was applied (or deleted) since this copy was read: NodePoolChanged or
            # NodePoolDeleted, unless only its limits are checked (no revision was given).
            self._read_limits()
            snapshot.used = None
            return _Next.AGAIN
        return _Next.USAGE_MOVED

    def _hold_members(self, pool: str) -> _Next:
        """`pool`'s quota usage items may not hold every member the quotas now govern (an
        apply or delete naming the pool since they were held): hold them under the quotas
        read, the pool noted held at their generation, and decide again (the usage read after);
        when that generation moved meanwhile, read the quotas again first (a lost race)."""
        quotas = self._snapshot.quotas
        generation = quotas.generation_in(pool)
        if generation is not None and self._leases.hold_members(pool, quotas):
            self._snapshot.quotas = quotas.members_held(pool, generation)
            self._tries -= 1
            return _Next.AGAIN
        self._refresh_quotas()
        return self._lost_race()

    def _lost_race(self) -> _Next:
        """Another writer changed what the decision read: decide again, a bounded number of
        times (then the message goes back to the queue)."""
        self._lost += 1
        if self._lost >= QUOTA_TRIES:
            raise Transient("QuotaAdmission", "QuotaUsageContended")
        self._tries -= 1
        return _Next.AGAIN

    def _read_limits(self) -> None:
        self._snapshot.config = _in_force(self._leases, self._ask.pool, self._snapshot.config.seen)
        self._snapshot.stored = True

    def _refresh_quotas(self) -> None:
        self._snapshot.quotas, self._snapshot.fresh = self._leases.quota_set(fresh=True), True

    def _confirm_pools(self) -> None:
        """A refusal of a request that named no pool holds only for the pools it chose from:
        NodePoolChanged when a NodePool was applied or deleted since that listing (no lease is
        written to fail on its generation, and a pool applied just before may serve it)."""
        seen = self._snapshot.config.seen
        if seen is None or seen.pools_generation is None:
            return
        if self._leases.pools_generation() != seen.pools_generation:
            raise NodePoolChanged(self._ask.pool, "a NodePool was applied or deleted")


class _HoldsBehind(Exception):
    """A pool's members were last held at an older quota generation than the quotas read."""

    def __init__(self, pool: str) -> None:
        super().__init__(pool)
        self.pool = pool


def _pools_moved(seen: Revisions | None, conflict: LeaseConflict) -> bool:
    """A NodePool was applied or deleted since the listing the request chose its pool from."""
    return (
        seen is not None
        and seen.pools_generation is not None
        and LeaseItem.POOLS_GENERATION in conflict.moved
    )


def _checked_again(
    leases: LeaseSnapshot, pool: str, seen: Revisions | None, conflict: LeaseConflict
) -> ConfigReads:
    """What to check a take-up against again, after its configuration checks failed: the stored
    limits, and `seen` as the stored items spell it; NodePoolChanged when the pool or its class
    is another document now, or a pool was applied or deleted since the request's listing."""
    if seen is not None and LeaseItem.NODE_CLASS in conflict.moved:
        changed = NodePoolChanged(pool, f"NodeClass {seen.node_class_name} was applied")
        seen = _spelled_as_stored(leases, pool, seen, changed)
    elif _pools_moved(seen, conflict):
        raise NodePoolChanged(pool, "a NodePool was applied or deleted")
    return _in_force(leases, pool, seen)


def _in_force(leases: LeaseSnapshot, pool: str, seen: Revisions | None) -> ConfigReads:
    """The pool's stored limits, and `seen` as the stored items spell it."""
    try:
        return ConfigReads(leases.limits_in_force(pool, seen), seen)
    except NodePoolChanged as changed:
        seen = _spelled_as_stored(leases, pool, seen, changed)
        return ConfigReads(leases.limits_in_force(pool, seen), seen)


def _spelled_as_stored(
    leases: LeaseSnapshot, pool: str, seen: Revisions | None, changed: NodePoolChanged
) -> Revisions:
    """The revisions the stored pool and class carry, when they are the documents the request
    was resolved with in another version's spelling; `changed` when they are not."""
    stored = None if seen is None else leases.as_stored(pool, seen)
    if stored is None:
        raise changed
    return stored
