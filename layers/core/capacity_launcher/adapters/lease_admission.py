"""Taking a limit lease: read what the decision depends on, ask the domain, write once.

The decision (`quota_admission.fit_quota_lease`) fits the lease into the room the pool's limits
leave beside its usage, and the room its requester's quota leaves: `count x the largest
candidate` when that fits, otherwise narrowed to the candidate types that fit (`fit_lease`),
sized by the largest of those. The first try assumes the pool's usage leaves room for the whole
lease and reads nothing of it; when it does not (the limits alone cannot hold it, or the usage
condition failed), the pool's usage item is read and the decision is made from what it says.

The lease transaction's items are, in order: the pool's usage (an ADD conditioned on each
limited dimension's headroom: the lease never takes the usage over the limits, whatever was
read), the lease's put (only if absent, with the types it covers when narrowed), the pool's
stored limits and revision checked, its NodeClass's revision checked, the NodePools'
generation checked (a request that named no pool: its choice of pool), the pool's quota
generation checked (only a change to a quota naming the pool bumps it), then the quota usage
items the admission read (the pool's cohort-and-flavor item updated, every other one
checked), each conditioned on the version read. When a condition
fails, the item that failed says what to read again before deciding again: the pool's usage
item (another lease or settle moved it), the stored limits, the quotas. A pool or class
applied since the request was resolved is not decided again here: NodePoolChanged sends the
request back to be resolved on the stored documents (its candidates come from them). Another
revision alone does not say the document changed (a writer of another version spells it
otherwise): the stored documents are read first, and when they are the ones the request was
resolved with, the lease conditions on the revisions they are stored with. A refusal (the
limits, `limits.unready` or the quota leave no room) writes no lease to fail on the NodePools'
generation: for a request that named no pool it is confirmed on the stored generation first
(NodePoolChanged when a pool was applied or deleted since its listing: one applied just before
may serve it).

A lease an earlier delivery took and left open (its worker died before it wrote an intent) is
taken up by the redelivery (`take_up`) only under the same configuration checks, in one
transaction beside the lease's extension: it was sized on the pool of its time, and the request
is resolved again when its pool or class was applied since. The extension is conditioned on the
lease being open and unexpired, and gives it a whole lease period from now: an expired lease is
one the sync may reclaim at any moment (its reclaim is conditioned on the expiry alone), under
the launch that took it up, and another request may lease the room it frees (issue 34).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.config_items import (
    pool_generation_check,
    pool_quota_generation_check,
)
from capacity_launcher.adapters.dynamodb import from_item, to_item
from capacity_launcher.adapters.pool_items import (
    LEASE_PREFIX,
    OPEN_LEASE,
    NoQuotas,
    PoolItems,
    QuotaHold,
    QuotaSource,
    attributes_of,
    hold_attributes,
    lease_of,
    lease_types_attributes,
    limits_pk,
    within,
)
from capacity_launcher.domain.documents import Revisions
from capacity_launcher.domain.errors import (
    ConditionFailed,
    NodePoolChanged,
    QuotaExceeded,
    Transient,
    UnreadyLimitReached,
)
from capacity_launcher.domain.index_shards import shard_value
from capacity_launcher.domain.pool_usage import Lease, LeaseFit, Room, room_left
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.quota_admission import (
    LeaseAsk,
    fit_quota_lease,
    governing,
    usage_items,
)
from capacity_launcher.domain.quotas import QuotaSet

_RESERVE_TRIES = 3
# Where the lease transaction's items are (see the module's docstring).
_LEASE_ITEM = 1
_LIMITS_ITEM = 2
_NODE_CLASS_ITEM = 3  # when the revisions the request was resolved with are given
_POOLS_ITEM = 4  # when, besides, the request named no pool
# Where a take-up's items are: the lease's extension (open and unexpired), then the
# configuration checks a new lease makes (from `_LIMITS_ITEM` on there), in the same order.
_OPEN_ITEM = 0
_TAKE_UP_CHECKS = 1
# Admissions that lost the race for their cohort's quota usage, before the message goes back.
_QUOTA_TRIES = 4
# Reads a lease by pool and lease id (the store's: open, settled, or None).
LeaseReader = Callable[[str, str], Lease | None]


class UnreadyGate(Protocol):
    """Refuses a lease over `limits.unready`, or conditions its usage update on what it read
    (adapters/pool_readiness.py)."""

    def gate(self, pool: str, limits: PoolLimits | None, usage_update: dict[str, Any]) -> None: ...


@dataclass
class _Reserving:
    """One `reserve`: what it asks, and what it has learnt so far."""

    ask: LeaseAsk
    lease_id: str
    limits: PoolLimits | None
    quotas: QuotaSet
    seen: Revisions | None  # the pool and class the request was resolved with
    stored: bool = False  # `limits` are the stored ones, not the container's copy
    fresh: bool = False  # `quotas` were read now, not the container's copy
    again: bool = False  # decide again at once
    full: bool = False  # the last decision found room for fewer than `least`
    tries: int = 0
    lost: int = 0
    # The pool's usage as last read; None: not read (the decision assumes room for the whole).
    used: Resources | None = None
    taken: Lease | None = None  # the lease this reserve put, or a retry's that it found
    put: bool = False  # `taken` was put by this reserve

    def whole_fits(self) -> bool:
        """Whether the limits themselves hold `count x per_instance` (the whole lease), and as
        many again as the requests launched with it ask for."""
        amount = self.ask.per_instance * (self.ask.count + self.ask.beside)
        return self.limits is None or not amount.fits_within(self.limits)

    def room(self) -> Room:
        return room_left(self.limits, self.used or Resources.ZERO)

    def count_lost(self) -> None:
        """Another writer changed what the decision read: decide again, a bounded number of
        times (then the message goes back to the queue)."""
        self.lost += 1
        if self.lost >= _QUOTA_TRIES:
            raise Transient("QuotaAdmission", "QuotaUsageContended")
        self.tries, self.again = self.tries - 1, True


def _pools_changed(state: _Reserving, failed: ConditionFailed) -> bool:
    """A NodePool was applied or deleted since the listing the request chose its pool from."""
    seen = state.seen
    return seen is not None and seen.pools_generation is not None and failed.failed_at(_POOLS_ITEM)


class LeaseAdmission:
    """The decision and the transaction behind `PoolLeaseStore.reserve`."""

    def __init__(
        self,
        items: PoolItems,
        lease_seconds: int,
        clock: Callable[[], float],
        quotas: QuotaSource | None = None,
        unready_gate: UnreadyGate | None = None,
    ) -> None:
        self._items = items
        self._unready_gate = unready_gate
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._quotas = quotas or NoQuotas()

    def reserve(
        self,
        ask: LeaseAsk,
        lease_id: str,
        limits: PoolLimits | None,
        lease: LeaseReader,
        seen: Revisions | None = None,
    ) -> tuple[Lease | None, bool]:
        """The lease `ask` is granted (None: not even `ask.least` fits now), and whether it was
        put now (False: `lease` found the one a retry had put). `seen`: the revisions of the
        pool and class the request was resolved with (NodePoolChanged when either is stored
        at another one now)."""
        state = _Reserving(ask, lease_id, limits, self._quotas.quota_set(), seen)
        while state.tries < _RESERVE_TRIES + 2:
            state.tries += 1
            if state.used is None and not state.whole_fits():
                if not state.stored:
                    # Never narrow nor refuse on a copy that may be stale: read the stored one.
                    state.limits, state.stored = self._in_force(state), True
                    continue
                state.used = self._usage(ask.pool)
            if self._try_lease(state, lease):
                return state.taken, state.put
            if state.again:
                state.again = False
                continue
            if state.full and state.stored:
                self._confirm_pools(state)
                return None, False  # decided on the stored limits and usage read: full
            if state.full:
                state.limits, state.stored = self._in_force(state), True
                continue
            # The usage condition failed (another lease or settle moved it): read the usage
            # and decide again from what it says.
            state.used = self._usage(ask.pool)
        return None, False

    def take_up(self, lease: Lease, limits: PoolLimits | None, seen: Revisions) -> Lease | None:
        """An open lease an earlier delivery took (and died before it wrote an intent), taken up
        by this one only under what a new lease is conditioned on: one transaction, its
        extension by a whole lease period (only while it is open and unexpired) and the
        configuration checks of a new lease (the pool's stored limits and revision, its
        NodeClass's revision, the NodePools' generation) on `seen`, the revisions the request
        was resolved with now. The lease was sized on the pool of its time; it must not launch
        under requirements nobody applies any more. NodePoolChanged or NodePoolDeleted as for a
        new lease; None when it is no longer open, or expired (the sync may reclaim it under the
        launch: the caller gives it back, and a new lease is taken, conditioned like any
        other)."""
        pool = lease.pool
        confirmed: Revisions | None = seen
        for _ in range(_RESERVE_TRIES):
            checks = self._configuration_checks(pool, limits, confirmed)
            now = int(self._clock())
            until = now + self._lease_seconds
            extension = self._items.lease_extension(pool, lease.lease_id, now, until)
            try:
                self._items.transact([extension, *checks])
            except ConditionFailed as failed:
                if failed.failed_at(_OPEN_ITEM):
                    return None
                limits, confirmed = self._checked_again(pool, confirmed, failed)
                continue
            return replace(lease, expires_at=until)
        raise NodePoolChanged(pool)  # applied again and again while it was taken up

    def _checked_again(
        self, pool: str, seen: Revisions | None, failed: ConditionFailed
    ) -> tuple[PoolLimits | None, Revisions | None]:
        """What to check a take-up against again, after its configuration checks failed: the
        stored limits, and `seen` as the stored items spell it; NodePoolChanged when the pool or
        its class is another document now, or a pool was applied or deleted since the listing
        the request chose from; NodePoolDeleted when the pool is no longer stored."""
        at = _TAKE_UP_CHECKS + _NODE_CLASS_ITEM - _LIMITS_ITEM
        if seen is not None and failed.failed_at(at):
            changed = NodePoolChanged(pool, f"NodeClass {seen.node_class_name} was applied")
            seen = self._spelled_as_stored(pool, seen, changed)
        elif seen is not None and seen.pools_generation is not None and failed.failed_at(at + 1):
            raise NodePoolChanged(pool, "a NodePool was applied or deleted")
        return self._limits_in_force(pool, seen)

    def _confirm_pools(self, state: _Reserving) -> None:
        """A refusal of a request that named no pool holds only for the pools it chose from:
        NodePoolChanged when a NodePool was applied or deleted since that listing (no lease is
        written to fail on its generation, and a pool applied just before may serve it)."""
        seen = state.seen
        if seen is None or seen.pools_generation is None:
            return
        if self._items.pools_generation() != seen.pools_generation:
            raise NodePoolChanged(state.ask.pool, "a NodePool was applied or deleted")

    def _in_force(self, state: _Reserving) -> PoolLimits | None:
        limits, state.seen = self._limits_in_force(state.ask.pool, state.seen)
        return limits

    def _limits_in_force(
        self, pool: str, seen: Revisions | None
    ) -> tuple[PoolLimits | None, Revisions | None]:
        """The pool's stored limits, and `seen` as the stored items spell it."""
        try:
            return self._items.limits_in_force(pool, seen), seen
        except NodePoolChanged as changed:
            seen = self._spelled_as_stored(pool, seen, changed)
            return self._items.limits_in_force(pool, seen), seen

    def _spelled_as_stored(
        self, pool: str, seen: Revisions | None, changed: NodePoolChanged
    ) -> Revisions:
        """The revisions the stored pool and class carry, when they are the documents the
        request was resolved with in another version's spelling; `changed` when they are not."""
        stored = None if seen is None else self._items.as_stored(pool, seen)
        if stored is None:
            raise changed
        return stored

    def _usage(self, pool: str) -> Resources:
        return self._items.usage_item(pool)[0]

    def _try_lease(self, state: _Reserving, lease: LeaseReader) -> bool:
        """Decide and write the lease once: True when it was leased (`state.taken`); False when
        not (`state.full`: not even `least` fits the room decided on; `state.again`: decide
        again now; otherwise the pool's usage did not hold it: read it and decide again)."""
        try:
            fit, hold, admission = self._admit(state)
        except QuotaExceeded:
            pool = state.ask.pool
            stored = self._quotas.quota_generation(pool)
            if state.fresh or stored == state.quotas.generation_in(pool):
                self._confirm_pools(state)
                raise
            # Refused by a copy older than the stored quotas: decide again on the stored ones.
            self._refresh_quotas(state)
            state.tries, state.again = state.tries - 1, True
            return False
        state.full = fit is None
        if fit is None:
            return False
        pool = state.ask.pool
        items = self._reserve_items(state, fit, hold)
        self._gate_unready(state, items[0]["Update"])
        items += self._configuration_checks(pool, state.limits, state.seen)
        generation_item = len(items)
        quota_generation = state.quotas.generation_in(pool)
        if quota_generation is not None:
            items.append(pool_quota_generation_check(self._items.table, pool, quota_generation))
        first_quota_item = len(items)
        items += admission
        try:
            self._items.transact(items)
        except ConditionFailed as failed:
            existing = lease(pool, state.lease_id)
            if existing is not None:
                state.taken = existing
                return True
            self._after_conflict(state, failed, generation_item, first_quota_item, len(items))
            return False
        state.taken = lease_of(from_item(items[_LEASE_ITEM]["Put"]["Item"]))
        state.put = True
        return True

    def _gate_unready(self, state: _Reserving, usage_update: dict[str, Any]) -> None:
        """`limits.unready`: a refusal (of a request that named no pool, confirmed on the
        NodePools' generation), or the usage update conditioned on what the gate read."""
        if self._unready_gate is None:
            return
        try:
            self._unready_gate.gate(state.ask.pool, state.limits, usage_update)
        except UnreadyLimitReached:
            self._confirm_pools(state)
            raise

    def _configuration_checks(
        self, pool: str, limits: PoolLimits | None, seen: Revisions | None
    ) -> list[dict[str, Any]]:
        """What the request was resolved and the lease decided with, checked in its transaction
        (at `_LIMITS_ITEM` on): the pool's stored limits and revision, its NodeClass's revision,
        and the NodePools' generation its pool was chosen from."""
        checks = [self._items.limits_check(pool, limits, seen)]
        if seen is not None:
            checks.append(self._items.node_class_check(seen))
            if seen.pools_generation is not None:
                checks.append(pool_generation_check(self._items.table, seen.pools_generation))
        return checks

    def _after_conflict(
        self,
        state: _Reserving,
        failed: ConditionFailed,
        generation_item: int,
        first_quota_item: int,
        size: int,
    ) -> None:
        """What a cancelled lease transaction asks for next, by the item that failed."""
        if state.seen is not None and failed.failed_at(_NODE_CLASS_ITEM):
            name = state.seen.node_class_name
            changed = NodePoolChanged(state.ask.pool, f"NodeClass {name} was applied")
            state.seen = self._spelled_as_stored(state.ask.pool, state.seen, changed)
            state.again = True
            return
        if _pools_changed(state, failed):
            raise NodePoolChanged(state.ask.pool, "a NodePool was applied or deleted")
        if any(failed.failed_at(i) for i in range(first_quota_item, size)):
            # Another admission or release in the quota's group wrote first: read again.
            state.count_lost()
        elif state.quotas.generation is not None and failed.failed_at(generation_item):
            # A quota naming the pool was applied or deleted since this copy was read: decide on
            # the stored ones.
            state.count_lost()
            self._refresh_quotas(state)
        elif failed.failed_at(_LIMITS_ITEM):
            # The pool was applied (or deleted) since this copy was read: NodePoolChanged or
            # NodePoolDeleted, unless only its limits are checked (no revision was given).
            state.limits, state.stored = self._in_force(state), True
            state.used, state.again = None, True

    def _refresh_quotas(self, state: _Reserving) -> None:
        state.quotas, state.fresh = self._quotas.quota_set(fresh=True), True

    def _admit(self, state: _Reserving) -> tuple[LeaseFit | None, QuotaHold, list[dict[str, Any]]]:
        """The lease the room left and the quotas admit (None: not even `least` fits the pool's
        room), where it holds quota, and the transaction items that write the admission: the
        pool's quota usage item updated, and every other item the decision read checked, each
        conditioned on the version read."""
        ask, room = state.ask, state.room()
        quotas = state.quotas.quotas
        quota = governing(quotas, ask.requester, ask.pool)
        if quota is None or ask.requester is None:
            return fit_quota_lease((), ask, {}, room), None, []
        items = usage_items(quota, ask.pool)
        readings = self._quota_usages(items)
        usage = {k: v for _, found in readings.values() for k, v in found.items()}
        fit = fit_quota_lease(quotas, ask, usage, room)
        if fit is None:
            return None, None, []
        pk = items[0][0]
        amount = fit.per_instance * fit.count
        table = self._items.table
        update = quota_usage.update(
            table, pk, ask.requester, amount, read_version=readings[pk][0], conditioned=True
        )
        checks = [quota_usage.unchanged(table, o, readings[o][0]) for o, _ in items[1:]]
        return fit, (pk, ask.requester), [{"Update": update}, *checks]

    def _quota_usages(self, items: list[tuple[str, str]]) -> dict[str, quota_usage.Reading]:
        """Each quota usage item an admission depends on, read strongly consistent at once."""
        return quota_usage.read_many(self._items.db, self._items.table, items)

    def _reserve_items(
        self, state: _Reserving, fit: LeaseFit, hold: QuotaHold
    ) -> list[dict[str, Any]]:
        """The pool's usage, added to under its limits' headroom, and the lease put if absent."""
        pool, count, amount = state.ask.pool, fit.count, fit.per_instance * fit.count
        update = self._items.add_update(pool, amount)
        within(update, state.limits, amount)
        lease = {
            "pk": limits_pk(pool),
            "sk": LEASE_PREFIX + state.lease_id,
            "count": count,
            "expiresAt": int(self._clock()) + self._lease_seconds,
            "openLease": shard_value(OPEN_LEASE, limits_pk(pool) + LEASE_PREFIX + state.lease_id),
            **attributes_of(amount),
            **hold_attributes(hold),
            **lease_types_attributes(fit.instance_types),
        }
        put = {
            "TableName": self._items.table,
            "Item": to_item(lease),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        return [{"Update": update}, {"Put": put}]
