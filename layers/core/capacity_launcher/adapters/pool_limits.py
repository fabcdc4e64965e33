"""Pool usage, limit leases and per-instance membership, kept exact with DynamoDB transactions.

A worker leases `count x largest candidate` before launching (a conditional update that fails
rather than overrun), and settles the lease into one member item per instance that launched. A
lease that outlives its worker expires; the reservation sync reclaims it.

A pool's partition `Limits#<pool>` sorts as `Lease#` < `Member#` < `Settled#` < `Usage`: open
leases and members (live work) form one key range, which is all a recount reads; the proof that
a lease settled (`Settled#<id>`, kept a week) lies outside it, so the history of past requests
never costs the sync a read.

Usage is only ever changed in the same transaction as the item that explains the change (a lease
put, settled or reclaimed; a member put or deleted under a condition), so usage always equals the
unsettled leases plus the members of the pool, and no instance is counted or released twice,
whichever writer (launcher, instance events, reconciliation) gets there first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Protocol

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.config_store import quota_generation_check
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, to_item
from capacity_launcher.adapters.launch_records import instance_pk
from capacity_launcher.domain.errors import (
    ConditionFailed,
    NodePoolDeleted,
    QuotaExceeded,
    Transient,
)
from capacity_launcher.domain.index_shards import read_values, shard_value
from capacity_launcher.domain.pool_usage import Lease, Member, QuotaRecount, Recount
from capacity_launcher.domain.quantities import (
    CPU,
    DIMENSIONS,
    GPU,
    INSTANCES,
    MEMORY,
    PoolLimits,
    Resources,
    limits_token,
)
from capacity_launcher.domain.quota_admission import (
    LeaseAsk,
    admit_lease,
    governing,
    usage_items,
)
from capacity_launcher.domain.quotas import QuotaSet

USAGE = "Usage"
LEASE_PREFIX = "Lease#"
MEMBER_PREFIX = "Member#"
# A settled lease's proof of settlement: its own prefix, outside the live range below.
SETTLED_PREFIX = "Settled#"
# The live range's upper bound: '$' follows '#', so every `Member#...` key sorts below it.
_LIVE_UNTIL = "Member$"
# How long the proof of settlement is kept (longer than any redelivery).
SETTLED_MARKER_SECONDS = 7 * 24 * 3600
# An unsettled lease carries this (the sparse OpenLeases index's key): the sync reads only those.
OPEN_LEASES_INDEX = "OpenLeases"
OPEN_LEASE = "open"
INSTANCE_SK = "Instance"
_ATTRIBUTES = {CPU: "cpu", MEMORY: "memoryMiB", GPU: "gpu", INSTANCES: "instances"}
_RESERVE_TRIES = 3
# The lease transaction's items: the pool's usage, the lease, the pool's stored limits, the
# quotas' generation, then the quota usage items the admission read.
_LIMITS_ITEM = 2
_GENERATION_ITEM = 3
# Member puts per transaction (DynamoDB allows 100 actions: the rest is the pool's and the
# quota's usage, the lease's delete (or its absence checked) and the settled marker's put).
_MEMBERS_PER_TRANSACTION = 96
_SETTLE_TRIES = 3
# Leases taken and not settled yet that a container remembers, at most.
_MAX_TAKEN = 1000
# Admissions that lost the race for their cohort's quota usage, before the message goes back.
_QUOTA_TRIES = 4
# (quota usage item, requester): where a lease or member is also counted for its quota.
QuotaHold = tuple[str, str] | None


@dataclass
class _Reserving:
    """One `reserve`: what it asks, and what it has learnt so far."""

    ask: LeaseAsk
    limits: PoolLimits | None
    quotas: QuotaSet
    wanted: int
    stored: bool = False  # `limits` are the stored ones, not the container's copy
    fresh: bool = False  # `quotas` were read now, not the container's copy
    again: bool = False  # decide again at once
    tries: int = 0
    lost: int = 0

    def fits(self) -> bool:
        amount = self.ask.per_instance * self.wanted
        return self.limits is None or not amount.fits_within(self.limits)

    def count_lost(self) -> None:
        """Another writer changed what the decision read: decide again, a bounded number of
        times (then the message goes back to the queue)."""
        self.lost += 1
        if self.lost >= _QUOTA_TRIES:
            raise Transient("QuotaAdmission", "QuotaUsageContended")
        self.tries, self.again = self.tries - 1, True


class QuotaSource(Protocol):
    """Where the lease reads the quotas it decides with (the configuration store)."""

    def quota_set(self, *, fresh: bool = False) -> QuotaSet: ...

    def quota_generation(self) -> int: ...


class _NoQuotas:
    """No quota store: no quota governs, and no generation is checked."""

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        return QuotaSet(None)

    def quota_generation(self) -> int:
        return 0


class LeaseNotSettled(RuntimeError):
    """Settling kept meeting concurrent writers; the message goes back and the retry settles."""

    def __init__(self, pool: str, lease_id: str) -> None:
        super().__init__(f"lease {lease_id} of node pool {pool} could not be settled")


def limits_pk(pool: str) -> str:
    return f"Limits#{pool}"


class PoolLimitsStore:
    def __init__(
        self,
        table_name: str,
        lease_seconds: int,
        dynamodb: Any | None = None,
        clock: Callable[[], float] = time.time,
        quotas: QuotaSource | None = None,
    ) -> None:
        self._table = table_name
        self._lease_seconds = lease_seconds
        self._db = dynamodb or client("dynamodb")
        self._clock = clock
        self._quotas = quotas or _NoQuotas()
        # Leases this container took, as it wrote them: its settle starts from them instead of
        # reading them back (its transaction's conditions still catch one reclaimed meanwhile).
        self._taken: dict[tuple[str, str], Lease] = {}

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
        """Lease room for up to `count` instances, at least `min_count`; 0 if that does not fit now.

        `unleased`: the caller knows there is no lease under `lease_id` (none was ever taken, or
        it just read it), so none is read first (the lease is put only if absent all the same).

        Idempotent per lease id: a retry finds its lease and gets the same answer. When a
        CapacityQuota names the pool, the quota usage items its decision depends on are read,
        the domain decides (`admit_lease`), and the lease is written in one transaction that
        conditions on each item's version and on the quotas' generation (QuotaExceeded when it
        does not fit; Transient when other admissions kept winning the race). NodePoolDeleted
        when the pool is no longer stored: the lease is checked against the stored pool, and a
        deleted one has no room at all.
        """
        existing = None if unleased else self.lease(pool, lease_id)
        if existing is not None:
            return existing.count
        ask = LeaseAsk(pool, requester, per_instance, count, min_count)
        state = _Reserving(ask, limits, self._quotas.quota_set(), wanted=count)
        while state.tries < _RESERVE_TRIES + 2:
            state.tries += 1
            if state.fits():
                granted = self._try_lease(lease_id, state)
                if granted is not None:
                    return granted
                if state.again:
                    state.again = False
                    continue
            elif not state.stored:
                # Never refuse on a copy that may be stale: decide on the stored limits.
                state.limits, state.stored = self._limits_in_force(pool), True
                continue
            if not self._shrink(state):
                return 0
        return 0

    def _try_lease(self, lease_id: str, state: _Reserving) -> int | None:
        """Decide and write the lease once: the count leased, or None (`state.again`: decide
        again now; otherwise the pool's usage did not fit, shrink to its headroom)."""
        try:
            wanted, hold, admission = self._admit(state)
        except QuotaExceeded:
            if state.fresh or self._quotas.quota_generation() == state.quotas.generation:
                raise
            # Refused by a copy older than the stored quotas: decide again on the stored ones.
            self._refresh_quotas(state)
            state.tries, state.again = state.tries - 1, True
            return None
        amount = state.ask.per_instance * wanted
        pool = state.ask.pool
        items = self._reserve_items(pool, lease_id, wanted, amount, state.limits, hold)
        items.append(self._limits_check(pool, state.limits))
        if state.quotas.generation is not None:
            items.append(quota_generation_check(self._table, state.quotas.generation))
        first_quota_item = len(items)
        items += admission
        try:
            self._transact(items)
            self._took(items)
            return wanted
        except ConditionFailed as failed:
            existing = self.lease(pool, lease_id)
            if existing is not None:
                return existing.count
            self._after_conflict(state, failed, first_quota_item, len(items))
            return None

    def _after_conflict(
        self, state: _Reserving, failed: ConditionFailed, first_quota_item: int, size: int
    ) -> None:
        """What a cancelled lease transaction asks for next, by the item that failed."""
        if any(failed.failed_at(i) for i in range(first_quota_item, size)):
            # Another admission or release in the quota's group wrote first: read again.
            state.count_lost()
        elif state.quotas.generation is not None and failed.failed_at(_GENERATION_ITEM):
            # A quota was applied or deleted since this copy was read: decide on the stored one.
            state.count_lost()
            self._refresh_quotas(state)
        elif failed.failed_at(_LIMITS_ITEM):
            # The pool was applied (or deleted) since this copy was read.
            state.limits, state.stored = self._limits_in_force(state.ask.pool), True
            state.wanted, state.again = state.ask.count, True

    def _refresh_quotas(self, state: _Reserving) -> None:
        state.quotas, state.fresh = self._quotas.quota_set(fresh=True), True

    def _admit(self, state: _Reserving) -> tuple[int, QuotaHold, list[dict[str, Any]]]:
        """How many the quotas admit, where the lease holds quota, and the transaction items
        that write the admission: the pool's quota usage item updated, and every other item the
        decision read checked, each conditioned on the version read."""
        ask = replace(state.ask, count=state.wanted)
        quotas = state.quotas.quotas
        quota = governing(quotas, ask.requester, ask.pool)
        if quota is None or ask.requester is None:
            return ask.count, None, []
        items = usage_items(quota, ask.pool)
        readings = self._quota_usages(items)
        usage = {k: v for _, found in readings.values() for k, v in found.items()}
        wanted = admit_lease(quotas, ask, usage)
        pk = items[0][0]
        amount = ask.per_instance * wanted
        update = quota_usage.update(
            self._table, pk, ask.requester, amount, read_version=readings[pk][0], conditioned=True
        )
        checks = [quota_usage.unchanged(self._table, o, readings[o][0]) for o, _ in items[1:]]
        return wanted, (pk, ask.requester), [{"Update": update}, *checks]

    def _quota_usages(self, items: Sequence[tuple[str, str]]) -> dict[str, quota_usage.Reading]:
        """Each quota usage item an admission depends on, read strongly consistent at once."""
        return quota_usage.read_many(self._db, self._table, items)

    def _shrink(self, state: _Reserving) -> bool:
        """Ask for what the pool's stored usage leaves room for; False when that is too few."""
        if state.limits is None:
            state.wanted = state.ask.count
            return True
        headroom = state.limits.headroom(self.usage(state.ask.pool), state.ask.per_instance)
        state.wanted = state.ask.count if headroom is None else min(state.ask.count, headroom)
        return state.wanted >= state.ask.least and state.wanted > 0

    def stored_limits(self, pool: str) -> PoolLimits | None:
        """The limits of the pool as last applied (strongly consistent); None also when the
        pool is no longer stored (a lease then says NodePoolDeleted)."""
        return self._stored(pool)[1]

    def _limits_in_force(self, pool: str) -> PoolLimits | None:
        found, limits = self._stored(pool)
        if not found:
            raise NodePoolDeleted(pool)
        return limits

    def _stored(self, pool: str) -> tuple[bool, PoolLimits | None]:
        """Whether the pool is stored, and its limits as last applied (strongly consistent)."""
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table,
                Key=key("NodePool", pool),
                ConsistentRead=True,
                ProjectionExpression="pk, #limits",
                ExpressionAttributeNames={"#limits": "limits"},
            ).get("Item")
        token = (item or {}).get("limits", {}).get("S")
        dumped = json.loads(token) if token else None
        return item is not None, None if dumped is None else PoolLimits.model_validate(dumped)

    def _limits_check(self, pool: str, limits: PoolLimits | None) -> dict[str, Any]:
        """The lease holds only if the pool is still stored, with the limits it was sized by (a
        pool stored before limits were kept beside it is not checked): a copy of the pool that
        outlived its deletion must not take it for a pool without limits."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": key("NodePool", pool),
                "ConditionExpression": (
                    "attribute_exists(pk) AND (attribute_not_exists(#limits) OR #limits = :limits)"
                ),
                "ExpressionAttributeNames": {"#limits": "limits"},
                "ExpressionAttributeValues": {":limits": {"S": limits_token(limits)}},
            }
        }

    @property
    def lease_seconds(self) -> int:
        return self._lease_seconds

    def settle(self, pool: str, lease_id: str, members: Mapping[str, Resources]) -> None:
        """Turn the lease into one member per instance launched (id -> amount), exactly once.

        The last transaction deletes the open lease (only if it is still open: a reclaim that
        got there first makes this one try again, as a reclaimed lease) and puts its settled
        marker (only if none exists: a second settle fails), which stays until the table's TTL
        removes it, so a redelivered request can never lease, or count, the same instances
        twice. Members that
        exist already (counted by reconciliation after the lease was reclaimed, or by an earlier
        try that crashed between chunks) are left as they are.
        """
        pending = dict(members)
        taken = self._taken.pop((pool, lease_id), None)
        for _ in range(_SETTLE_TRIES):
            lease = taken or self.lease(pool, lease_id)
            taken = None  # a try that failed reads it again
            if lease is not None and lease.settled:
                return
            ids = sorted(pending)
            size = _MEMBERS_PER_TRANSACTION
            chunks = [ids[i : i + size] for i in range(0, len(ids), size)] or [[]]
            try:
                # A reclaimed lease gave its quota back: its instances count for the pool only.
                hold = _hold(lease)
                for chunk in chunks[:-1]:
                    amount = _total(pending[i] for i in chunk)
                    puts = self._member_puts(pool, chunk, pending, hold)
                    self._transact(
                        [*puts, *self._usage_updates(pool, amount, hold)],
                    )
                    for instance_id in chunk:
                        pending.pop(instance_id)
                amount = _total(pending[i] for i in chunks[-1])
                if lease is not None:
                    amount = amount - lease.amount
                self._transact(
                    [
                        *self._member_puts(pool, chunks[-1], pending, hold),
                        *self._usage_updates(pool, amount, hold),
                        *self._settlement(pool, lease_id, lease, len(members)),
                    ]
                )
                return
            except ConditionFailed:
                counted = {m.instance_id for m in self.members(pool)}
                pending = {i: r for i, r in pending.items() if i not in counted}
        raise LeaseNotSettled(pool, lease_id)

    def count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        *,
        unless_released: bool = False,
        requester: str | None = None,
    ) -> bool:
        """Count one instance in its pool's usage; False if it is counted already.

        With `unless_released`, also False if its instance item records a stop or termination
        (so a writer that saw the instance running before the event cannot count it back). When
        a quota governs `requester` in the pool, its quota usage counts it too, unconditionally:
        it runs (adopted, or started again), and counting the truth keeps new admissions out.
        """
        hold = self._hold_for(requester, pool)
        items = self._member_puts(pool, [instance_id], {instance_id: amount}, hold)
        items += self._usage_updates(pool, amount, hold)
        if unless_released:
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self._table,
                        "Key": key(instance_pk(instance_id), INSTANCE_SK),
                        "ConditionExpression": (
                            "attribute_exists(pk) AND attribute_not_exists(releasedAt)"
                        ),
                    }
                }
            )
        try:
            self._transact(items)
        except ConditionFailed:
            return False
        return True

    def hold(self, member: Member, requester: str) -> bool:
        """Make a member count in the quota usage that governs `requester` in its pool now: one
        counted for its pool only (adopted, or its lease was reclaimed before it settled) gains
        it; one whose quota changed cohort, or no longer covers it, moves or drops it. The
        member's change is conditioned on the hold it had, and travels with both usage changes;
        False when nothing changed (or a concurrent writer changed the member first)."""
        wanted = self._hold_for(requester, member.pool)
        had = _hold(member)
        if wanted == had:
            return False
        condition = "attribute_exists(sk) AND attribute_not_exists(quotaUsage)"
        values: dict[str, Any] = {}
        if had is not None:
            condition = "attribute_exists(sk) AND quotaUsage = :had"
            values[":had"] = had[0]
        if wanted is None:
            expression = "REMOVE quotaUsage, requester"
        else:
            expression = "SET quotaUsage = :usage, requester = :requester"
            values |= {":usage": wanted[0], ":requester": wanted[1]}
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(limits_pk(member.pool), MEMBER_PREFIX + member.instance_id),
                    "UpdateExpression": expression,
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": to_item(values),
                }
            }
        ]
        if had is not None:
            amount = Resources.ZERO - member.amount
            items.append({"Update": quota_usage.update(self._table, *had, amount)})
        if wanted is not None:
            items.append({"Update": quota_usage.update(self._table, *wanted, member.amount)})
        try:
            self._transact(items)
        except ConditionFailed:
            return False
        return True

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]:
        """Use by (requester, pool) in one cohort-and-flavor quota usage item (strongly
        consistent)."""
        return self._quota_usage(pk, pool)[1]

    def recount_quotas(self, pool: str, pks: Sequence[str]) -> dict[str, QuotaRecount | None]:
        """Set each quota usage item of `pks` to the unsettled leases plus the members of `pool`
        that hold it, per requester, if no writer moved it meanwhile (its version, as
        `recompute`); one read of the pool's live range serves every item (None: contended)."""
        found: dict[str, QuotaRecount | None] = dict.fromkeys(pks)
        pending = list(pks)
        for _ in range(_RESERVE_TRIES):
            if not pending:
                break
            before = {pk: self._quota_usage(pk, pool) for pk in pending}
            counted = _counted(self._live(pool))
            again = []
            for pk in pending:
                version, stored = before[pk]
                if self._quota_usage(pk, pool)[0] != version:
                    again.append(pk)
                    continue
                recounted = _held(counted, pk, pool)
                if _nonzero(stored) == _nonzero(recounted):
                    found[pk] = QuotaRecount(pk, stored, recounted, repaired=False)
                    continue
                try:
                    with aws_call("PutItem"):
                        self._db.put_item(
                            **quota_usage.replacement(self._table, pk, recounted, version)
                        )
                except ConditionFailed:
                    again.append(pk)
                    continue
                found[pk] = QuotaRecount(pk, stored, recounted, repaired=True)
            pending = again
        return found

    def _hold_for(self, requester: str | None, pool: str) -> QuotaHold:
        """Where an instance of `requester` in `pool` counts for its quota (None: nowhere)."""
        if requester is None:
            return None
        try:
            quota = governing(self._quotas.quota_set().quotas, requester, pool)
        except QuotaExceeded:
            return None  # quotas name the pool, none covers it: it counts for the pool only
        if quota is None:
            return None
        return quota_usage.quota_usage_pk(quota.cohort_key, pool), requester

    def uncount(self, member: Member) -> bool:
        """Take one counted instance out of its pool's usage; False if it was taken out before."""
        try:
            self._transact(
                [
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": key(limits_pk(member.pool), MEMBER_PREFIX + member.instance_id),
                            "ConditionExpression": "attribute_exists(sk)",
                        }
                    },
                    *self._usage_updates(
                        member.pool, Resources.ZERO - member.amount, _hold(member)
                    ),
                ]
            )
        except ConditionFailed:
            return False
        return True

    def uncount_instance(self, pool: str, instance_id: str) -> bool:
        """`uncount` by id, for the amount the instance was counted for."""
        member = self.member(pool, instance_id)
        return member is not None and self.uncount(member)

    def member(self, pool: str, instance_id: str) -> Member | None:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table,
                Key=key(limits_pk(pool), MEMBER_PREFIX + instance_id),
                ConsistentRead=True,
            ).get("Item")
        return _member(from_item(item)) if item else None

    def members(self, pool: str) -> list[Member]:
        """Every instance counted in the pool's usage (one Query of the pool's partition)."""
        prefix = {":prefix": {"S": MEMBER_PREFIX}}
        return [_member(i) for i in self._partition(pool, "begins_with(sk, :prefix)", prefix)]

    def usage(self, pool: str) -> Resources:
        return self._usage_item(pool)[0]

    def recompute(self, pool: str) -> Recount | None:
        """Set usage to its unsettled leases plus its members, if no writer moved it meanwhile.

        Every usage change bumps `version`; the read of leases and members is bracketed by two
        reads of it and the write is conditional on it, so a concurrent transaction makes this
        try again (None after a few tries: the next sync repairs) instead of being overwritten.
        The members it read come back with it: as of that read, they are the pool's.
        """
        for _ in range(_RESERVE_TRIES):
            stored, version = self._usage_item(pool)
            counted = _counted(self._live(pool))
            recomputed = _total(_resources(i) for i in counted)
            if self._usage_item(pool)[1] != version:
                continue
            members = tuple(_member(i) for i in counted if str(i["sk"]).startswith(MEMBER_PREFIX))
            if recomputed == stored:
                return Recount(stored, recomputed, repaired=False, members=members)
            values = {
                "pk": limits_pk(pool),
                "sk": USAGE,
                "version": (version or 0) + 1,
                **_attributes(recomputed),
            }
            condition: dict[str, Any] = {"ExpressionAttributeNames": {"#version": "version"}}
            if version is None:
                condition["ConditionExpression"] = "attribute_not_exists(#version)"
            else:
                condition["ConditionExpression"] = "#version = :version"
                condition["ExpressionAttributeValues"] = {":version": {"N": str(version)}}
            try:
                with aws_call("PutItem"):
                    self._db.put_item(TableName=self._table, Item=to_item(values), **condition)
            except ConditionFailed:
                continue
            return Recount(stored, recomputed, repaired=True, members=members)
        return None

    def lease(self, pool: str, lease_id: str) -> Lease | None:
        """The lease, open or settled (None: never leased, or reclaimed), in one read.

        Settled is either proof: a `Settled#` marker, or a `Lease#` item marked `settled`, the
        format settles wrote before the marker moved out of the live range. Such items stay in
        deployed tables until their TTL (SETTLED_MARKER_SECONDS), so both are honoured here,
        and `reclaim`, `cancel` and `settle` never take an old-format marker for an open lease.
        """
        keys = [key(limits_pk(pool), p + lease_id) for p in (LEASE_PREFIX, SETTLED_PREFIX)]
        found = {str(i["sk"]): i for i in batch_get(self._db, self._table, keys)}
        marker = found.get(SETTLED_PREFIX + lease_id)
        if marker is not None:
            return _settled(marker)
        item = found.get(LEASE_PREFIX + lease_id)
        return _lease(item) if item else None

    def leases(self) -> list[Lease]:
        """Every unsettled lease (the sync reclaims the expired ones): one Query of the sparse
        OpenLeases index per shard value, and one of the bare value older leases carry."""
        found: list[Lease] = []
        paginator = self._db.get_paginator("query")
        for value in read_values(OPEN_LEASE):
            with aws_call("Query"):
                pages = paginator.paginate(
                    TableName=self._table,
                    IndexName=OPEN_LEASES_INDEX,
                    KeyConditionExpression="openLease = :open",
                    FilterExpression="attribute_not_exists(settled)",
                    ExpressionAttributeValues={":open": {"S": value}},
                )
                found += [_lease(from_item(i)) for page in pages for i in page["Items"]]
        return found

    def reclaim(self, lease: Lease) -> bool:
        """Give an expired lease's amount back; False if it was settled or reclaimed meanwhile."""
        return self._drop(lease, expired_only=True)

    def cancel(self, pool: str, lease_id: str) -> bool:
        """Give back a lease nothing was launched for (its worker stopped on an exception)."""
        self._taken.pop((pool, lease_id), None)
        lease = self.lease(pool, lease_id)
        return lease is not None and not lease.settled and self._drop(lease, expired_only=False)

    def is_settled(self, pool: str, lease_id: str) -> bool:
        lease = self.lease(pool, lease_id)
        return lease is not None and lease.settled

    def _drop(self, lease: Lease, *, expired_only: bool) -> bool:
        # A settled lease has no `Lease#` item, or (old format) one marked `settled`.
        condition = "attribute_exists(pk) AND attribute_not_exists(settled)"
        delete: dict[str, Any] = {
            "TableName": self._table,
            "Key": key(limits_pk(lease.pool), LEASE_PREFIX + lease.lease_id),
            "ConditionExpression": condition,
        }
        if expired_only:
            delete["ConditionExpression"] = condition + " AND expiresAt < :now"
            delete["ExpressionAttributeValues"] = {":now": {"N": str(int(self._clock()))}}
        try:
            self._transact(
                [
                    *self._usage_updates(lease.pool, Resources.ZERO - lease.amount, _hold(lease)),
                    {"Delete": delete},
                ]
            )
        except ConditionFailed:
            return False
        return True

    def _usage_updates(self, pool: str, amount: Resources, hold: QuotaHold) -> list[dict[str, Any]]:
        """The pool's usage change, and the same change to its quota usage when it holds one."""
        updates = [{"Update": self._add_update(pool, amount)}]
        if hold is not None:
            updates.append({"Update": quota_usage.update(self._table, *hold, amount)})
        return updates

    def _quota_usage(
        self, pk: str, pool: str
    ) -> tuple[int | None, dict[tuple[str, str], Resources]]:
        with aws_call("GetItem"):
            return quota_usage.read(self._db, self._table, pk, pool)

    def _reserve_items(
        self,
        pool: str,
        lease_id: str,
        count: int,
        amount: Resources,
        limits: PoolLimits | None,
        hold: QuotaHold = None,
    ) -> list[dict[str, Any]]:
        update = self._add_update(pool, amount)
        conditions = []
        for dimension in DIMENSIONS:
            bound = limits.limit_for(dimension) if limits else None
            if bound is None:
                continue
            name = _ATTRIBUTES[dimension]
            conditions.append(f"(attribute_not_exists(#{name}) OR #{name} <= :max_{name})")
            update["ExpressionAttributeValues"][f":max_{name}"] = {
                "N": str(bound - amount.amount(dimension))
            }
        if conditions:
            update["ConditionExpression"] = " AND ".join(conditions)
        lease = {
            "pk": limits_pk(pool),
            "sk": LEASE_PREFIX + lease_id,
            "count": count,
            "expiresAt": int(self._clock()) + self._lease_seconds,
            "openLease": shard_value(OPEN_LEASE, limits_pk(pool) + LEASE_PREFIX + lease_id),
            **_attributes(amount),
            **_hold_attributes(hold),
        }
        return [
            {"Update": update},
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(lease),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]

    def _add_update(self, pool: str, amount: Resources) -> dict[str, Any]:
        """ADD to usage; every change bumps `version` (what `recompute` is conditional on)."""
        names = {f"#{a}": a for a in _ATTRIBUTES.values()}
        names["#version"] = "version"
        values = {f":{_ATTRIBUTES[d]}": {"N": str(v)} for d, v in amount.amounts().items()}
        values[":one"] = {"N": "1"}
        adds = [f"#{a} :{a}" for a in _ATTRIBUTES.values()]
        return {
            "TableName": self._table,
            "Key": key(limits_pk(pool), USAGE),
            "UpdateExpression": "ADD " + ", ".join([*adds, "#version :one"]),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _usage_item(self, pool: str) -> tuple[Resources, int | None]:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(limits_pk(pool), USAGE), ConsistentRead=True
            ).get("Item")
        if not item:
            return Resources.ZERO, None
        values = from_item(item)
        version = values.get("version")
        return _resources(values), None if version is None else int(version)

    def _live(self, pool: str) -> list[dict[str, Any]]:
        """The pool's open leases and members: one key range, never its settled history."""
        between = {":from": {"S": LEASE_PREFIX}, ":until": {"S": _LIVE_UNTIL}}
        return self._partition(pool, "sk BETWEEN :from AND :until", between)

    def _partition(
        self, pool: str, sk_condition: str, values: dict[str, Any]
    ) -> list[dict[str, Any]]:
        condition = "pk = :pk AND " + sk_condition
        values = {":pk": {"S": limits_pk(pool)}, **values}
        with aws_call("Query"):
            pages = self._db.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                ConsistentRead=True,
            )
            return [from_item(i) for page in pages for i in page["Items"]]

    def _member_puts(
        self,
        pool: str,
        instance_ids: Sequence[str],
        amounts: Mapping[str, Resources],
        hold: QuotaHold = None,
    ) -> list[dict[str, Any]]:
        now = int(self._clock())
        return [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "pk": limits_pk(pool),
                            "sk": MEMBER_PREFIX + instance_id,
                            "countedAt": now,
                            **_attributes(amounts[instance_id]),
                            **_hold_attributes(hold),
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            }
            for instance_id in instance_ids
        ]

    def _settlement(
        self, pool: str, lease_id: str, lease: Lease | None, count: int
    ) -> list[dict[str, Any]]:
        """The open lease leaves the live range and its proof of settlement is put beside it."""
        lease_key = key(limits_pk(pool), LEASE_PREFIX + lease_id)
        if lease is None:
            # Reclaimed while we launched: its amount already left usage; record ours afresh,
            # unless a redelivery leased again meanwhile (then the retry settles that lease).
            gone: dict[str, Any] = {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": lease_key,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        else:
            # Still open: not reclaimed, nor settled in the old format (see `lease`).
            gone = {
                "Delete": {
                    "TableName": self._table,
                    "Key": lease_key,
                    "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(settled)",
                }
            }
        marker = {
            "pk": limits_pk(pool),
            "sk": SETTLED_PREFIX + lease_id,
            "count": lease.count if lease is not None else count,
            "settledAt": int(self._clock()),
            "ttl": int(self._clock()) + SETTLED_MARKER_SECONDS,
        }
        put = {
            "Put": {
                "TableName": self._table,
                "Item": to_item(marker),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        return [gone, put]

    def _took(self, items: Sequence[dict[str, Any]]) -> None:
        """Remember the lease a reserve transaction (`_reserve_items` first) just put."""
        if len(self._taken) >= _MAX_TAKEN:
            self._taken.clear()  # leases whose settle never came (their requests went back)
        lease = _lease(from_item(items[1]["Put"]["Item"]))
        self._taken[(lease.pool, lease.lease_id)] = lease

    def _transact(self, items: list[dict[str, Any]]) -> None:
        with aws_call("TransactWriteItems"):
            self._db.transact_write_items(TransactItems=items)


def _attributes(amount: Resources) -> dict[str, Decimal]:
    return {_ATTRIBUTES[d]: v for d, v in amount.amounts().items()}


def _resources(item: dict[str, Any]) -> Resources:
    return Resources.from_amounts({d: item.get(a, 0) for d, a in _ATTRIBUTES.items()})


def _hold_attributes(hold: QuotaHold) -> dict[str, str]:
    return {} if hold is None else {"quotaUsage": hold[0], "requester": hold[1]}


def _hold(counted: Lease | Member | None) -> QuotaHold:
    if counted is None or counted.quota_usage is None or counted.requester is None:
        return None
    return counted.quota_usage, counted.requester


def _nonzero(usage: Mapping[tuple[str, str], Resources]) -> dict[tuple[str, str], Resources]:
    return {k: v for k, v in usage.items() if not v.is_zero()}


def _total(amounts: Iterable[Resources]) -> Resources:
    total = Resources.ZERO
    for amount in amounts:
        total = total + amount
    return total


def _counted(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """What usage is made of: members and unsettled leases (an old-format settled marker is a
    `Lease#` item marked `settled`, in the live range until its TTL; see `lease`)."""
    return [
        i
        for i in items
        if str(i["sk"]).startswith(MEMBER_PREFIX)
        or (str(i["sk"]).startswith(LEASE_PREFIX) and not i.get("settled"))
    ]


def _held(
    counted: Iterable[dict[str, Any]], pk: str, pool: str
) -> dict[tuple[str, str], Resources]:
    """Use by (requester, pool) of the counted items that hold quota usage item `pk`."""
    held: dict[tuple[str, str], Resources] = {}
    for item in counted:
        requester = item.get("requester")
        if item.get("quotaUsage") == pk and requester:
            where = (str(requester), pool)
            held[where] = held.get(where, Resources.ZERO) + _resources(item)
    return held


def _member(item: dict[str, Any]) -> Member:
    return Member(
        pool=str(item["pk"]).removeprefix("Limits#"),
        instance_id=str(item["sk"]).removeprefix(MEMBER_PREFIX),
        amount=_resources(item),
        counted_at=int(item.get("countedAt", 0)),
        quota_usage=item.get("quotaUsage"),
        requester=item.get("requester"),
    )


def _settled(item: dict[str, Any]) -> Lease:
    return Lease(
        pool=str(item["pk"]).removeprefix("Limits#"),
        lease_id=str(item["sk"]).removeprefix(SETTLED_PREFIX),
        count=int(item.get("count", 0)),
        amount=Resources.ZERO,
        expires_at=0,
        settled=True,
    )


def _lease(item: dict[str, Any]) -> Lease:
    return Lease(
        pool=str(item["pk"]).removeprefix("Limits#"),
        lease_id=str(item["sk"]).removeprefix(LEASE_PREFIX),
        count=int(item.get("count", 0)),
        amount=_resources(item),
        expires_at=int(item.get("expiresAt", 0)),
        settled=bool(item.get("settled", False)),
        quota_usage=item.get("quotaUsage"),
        requester=item.get("requester"),
    )
