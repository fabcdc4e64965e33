"""Limit leases: room a worker takes in its pool's usage before launching, kept exact with
DynamoDB transactions.

A worker leases `count x largest candidate` before launching (a conditional update that fails
rather than overrun); when the room its pool's limits (or its quota) leave cannot hold that,
the lease covers only the candidate types that fit, sized by the largest of them, and the
worker launches only those (`Lease.instance_types`, `pool_usage.fit_lease`). It settles the
lease into one member per instance that launched (`Limits#<pool>`/`Member#<id>`, as
`pool_members` counts them) and a proof of settlement
(`Settled#<id>`, kept a week). A lease that outlives its worker expires; the reservation sync
reclaims it. A lease nothing was launched for is cancelled. Each of these changes the pool's
usage (and the quota usage the lease holds) in the transaction that puts or deletes the lease,
so it happens once whoever gets there first (the item layout: `pool_items`).

Taking a lease is the service's loop (service/admission.py): it reads what its decision depends
on through this store (the pool's stored limits, the quotas and their generation, the quota
usage items, the pool's usage when the whole lease may not fit, its `limits.unready` count),
asks the domain (`quota_leases.fit_quota_lease`), and has this store write one transaction
conditioned on exactly what it read (`lease_admission`: named items, and a conflict naming the
items that moved).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.aws import all_pages, aws_call
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, to_item
from capacity_launcher.adapters.lease_admission import LeaseWrites
from capacity_launcher.adapters.pool_items import (
    LEASE_PREFIX,
    OPEN_LEASE,
    OPEN_LEASES_INDEX,
    SETTLED_MARKER_SECONDS,
    SETTLED_PREFIX,
    NoQuotas,
    PoolItems,
    QuotaSource,
    held_as_read,
    hold_of,
    lease_of,
    limits_pk,
    settled_of,
)
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseReads,
    QuotaReading,
    UnreadyReading,
)
from capacity_launcher.domain.accounting.pool_usage import Lease, LeaseFit, total
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.index_shards import read_values
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion

# Member puts per transaction (DynamoDB allows 100 actions: the rest is the pool's and the
# quota's usage, the lease's delete (or its absence checked) and the settled marker's put).
_MEMBERS_PER_TRANSACTION = 96
# Leases taken and not settled yet that a container remembers, at most.
_MAX_TAKEN = 1000


class UnreadyGate(Protocol):
    """A pool's count for `limits.unready`, and the usage version it was read at
    (adapters/pool_readiness.py)."""

    def reading(self, pool: str) -> UnreadyReading: ...


class RecordPuts(Protocol):
    """Instance records as TransactWriteItems puts (adapters/instance_records.py)."""

    def transaction_puts(self, records: Iterable[InstanceRecord]) -> list[dict[str, Any]]: ...


class CompletionUpdates(Protocol):
    """Launch intents' completions as TransactWriteItems updates, or each written alone
    (adapters/launch_records.py)."""

    def completion_updates(
        self, completions: Iterable[IntentCompletion]
    ) -> list[dict[str, Any]]: ...
    def complete_intent(self, done: IntentCompletion) -> None: ...


class PoolLeaseStore:
    def __init__(
        self,
        table_name: str,
        lease_seconds: int,
        dynamodb: Any | None = None,
        *,
        clock: Callable[[], float],
        quotas: QuotaSource | None = None,
        unready_gate: UnreadyGate | None = None,
        record_puts: RecordPuts | None = None,
        completion_updates: CompletionUpdates | None = None,
    ) -> None:
        """`record_puts`: the instance records' transaction puts, so a settle writes each
        instance's record with its member (None: a settle given records refuses them);
        `completion_updates`: the same for the intents whose answers a settle carries."""
        self._record_puts = record_puts
        self._completion_updates = completion_updates
        self._items = PoolItems(table_name, dynamodb)
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._quotas = quotas or NoQuotas()
        self._unready = unready_gate
        self._writes = LeaseWrites(self._items, lease_seconds, clock)
        # Leases this container took, as it wrote them: its settle starts from them instead of
        # reading them back (its transaction's conditions still catch one reclaimed meanwhile).
        self._taken: dict[tuple[str, str], Lease] = {}

    @property
    def lease_seconds(self) -> int:
        return self._lease_seconds

    # -- what the admission reads (service/admission.py) ---------------------------------------

    def limits_in_force(self, pool: str, seen: Revisions | None = None) -> PoolLimits | None:
        """The stored limits; NodePoolDeleted when the pool is no longer stored, NodePoolChanged
        when it is stored at another revision than `seen`."""
        return self._items.limits_in_force(pool, seen)

    def as_stored(self, pool: str, seen: Revisions) -> Revisions | None:
        return self._items.as_stored(pool, seen)

    def usage(self, pool: str) -> Resources:
        return self._items.usage_item(pool)[0]

    def pools_generation(self) -> int:
        return self._items.pools_generation()

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        return self._quotas.quota_set(fresh=fresh)

    def quota_generation(self, pool: str) -> int:
        return self._quotas.quota_generation(pool)

    def quota_usage(self, items: Sequence[UsageKey]) -> dict[str, QuotaReading]:
        """Each quota usage item an admission depends on, read strongly consistent at once."""
        return dict(quota_usage.read_many(self._items.db, self._items.table, items))

    def readiness(self, pool: str) -> UnreadyReading | None:
        """The pool's count for `limits.unready` and the usage version it was read at (None:
        this store has no gate)."""
        return None if self._unready is None else self._unready.reading(pool)

    def hold_members(self, pool: str, quotas: QuotaSet) -> bool:
        """Every member of the pool made to hold the quota usage governing it under `quotas`,
        and the pool noted as held at their generation (False: it moved; adapters/pool_members)."""
        members = PoolMemberStore(self._items.table, self._items.db, clock=self._clock)
        held = members.hold_all(pool, quotas)
        generation = quotas.generation_in(pool)
        if held and generation is not None:
            self._quotas.note_members_held(pool, generation)
        return held

    # -- what it writes ------------------------------------------------------------------------

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease:
        """Put the lease the admission decided, conditioned on what it read (LeaseConflict
        naming the items that moved: `lease_admission`); remembered for its settle."""
        lease = self._writes.write(ask, lease_id, fit, reads)
        self._took(lease)
        return lease

    def extend(self, lease: Lease, reads: ConfigReads) -> Lease:
        """An open lease an earlier delivery took, extended by a lease period while it is open
        and unexpired, beside the configuration checks of a new lease (`lease_admission`)."""
        return self._writes.extend(lease, reads)

    def stored_limits(self, pool: str) -> PoolLimits | None:
        """The limits of the pool as last applied (strongly consistent); None also when the
        pool is no longer stored (a lease then says NodePoolDeleted)."""
        return self._items.stored(pool)[1]

    # -- settling (the loop and its decision: service/lease_settlement.py) --------------------

    def taken(self, pool: str, lease_id: str) -> Lease | None:
        """The lease as this container took it (once: a second ask reads the table)."""
        return self._taken.pop((pool, lease_id), None)

    def counted(self, pool: str) -> set[str]:
        """The instance ids counted as the pool's members (strongly consistent)."""
        return {m.instance_id for m in self._items.members(pool)}

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
        """Put the members of `pending` and the lease's settlement, conditioned on `lease` as
        read (None: reclaimed, and not leased again since); False when it moved. `records`:
        the instances' records, each put in the transaction that puts its member (issue 38: no
        write of their own, and never a member without its record). `completions`: the intents
        whose instances these are, marked done in the transaction that settles the lease
        (issue 38: no UpdateItem of their own; a settled lease's intents are done).

        The last transaction deletes the open lease (only if it is still open) and puts its
        settled marker (only if none exists: a second settle fails), which stays until the
        table's TTL removes it, so a redelivered request can never lease, or count, the same
        instances twice. Members past a transaction's size go in chunks before it; members that
        exist already (counted by reconciliation after a reclaim, or by a try that crashed
        between chunks) are left as they are by the caller's next try."""
        if records and self._record_puts is None:
            raise ValueError("records: this lease store cannot write instance records")
        done: list[dict[str, Any]] = []
        if completions:
            if self._completion_updates is None:
                raise ValueError("completions: this lease store cannot complete launch intents")
            done = self._completion_updates.completion_updates(completions)
        try:
            carried = self._settle_once(
                pool, lease_id, lease, dict(pending), launched, records or {}, done
            )
        except ConditionFailed:
            return False
        for c in [] if carried else completions:
            # Their writes alone were refused (done already; a snapshot without the slots noted):
            # each is stored alone, which reads what refused it (launch_records.complete_intent).
            assert self._completion_updates is not None
            self._completion_updates.complete_intent(c)
        return True

    def _settle_once(
        self,
        pool: str,
        lease_id: str,
        lease: Lease | None,
        pending: dict[str, Resources],
        launched: int,
        records: Mapping[str, InstanceRecord],
        done: Sequence[dict[str, Any]] = (),
    ) -> bool:
        """Put the members in chunks (`pending` loses each chunk written), each with its
        instances' records, the last with the lease's settlement (of a reclaimed lease, with
        nothing left to count: its marker) and the intents' completions `done`; False when
        those alone were refused (the last is then written without them)."""
        ids = sorted(pending)
        # A member and its record: half as many instances a transaction when records ride it;
        # the intents' completions take their room from every chunk alike.
        room = _MEMBERS_PER_TRANSACTION - len(done)
        size = room // 2 if records else room
        chunks = [ids[i : i + size] for i in range(0, len(ids), size)] or [[]]
        hold = hold_of(lease)
        for chunk in chunks[:-1]:
            amount = total(pending[i] for i in chunk)
            puts = self._items.member_puts(pool, chunk, pending, hold, int(self._clock()))
            usage = self._items.usage_updates(pool, amount, hold)
            self._items.transact([*puts, *self._records_of(chunk, records), *usage])
            for instance_id in chunk:
                pending.pop(instance_id)
        amount = total(pending[i] for i in chunks[-1])
        if lease is not None:
            amount = amount - lease.amount
        last = [
            *self._items.member_puts(pool, chunks[-1], pending, hold, int(self._clock())),
            *self._records_of(chunks[-1], records),
            *self._items.usage_updates(pool, amount, hold),
            *self._settlement(pool, lease_id, lease, launched),
        ]
        try:
            self._items.transact([*last, *done])
        except ConditionFailed as failed:
            if not done or any(failed.failed_at(i) for i in range(len(last))):
                raise
            self._items.transact(last)
            return False
        return True

    def _records_of(
        self, chunk: Sequence[str], records: Mapping[str, InstanceRecord]
    ) -> list[dict[str, Any]]:
        mine = [records[i] for i in chunk if i in records]
        if not mine or self._record_puts is None:
            return []
        return self._record_puts.transaction_puts(mine)

    def lease(self, pool: str, lease_id: str) -> Lease | None:
        """The lease, open or settled (None: never leased, or reclaimed), in one read.

        Settled is either proof: a `Settled#` marker, or a `Lease#` item marked `settled`, the
        format settles wrote before the marker moved out of the live range. Such items stay in
        deployed tables until their TTL (SETTLED_MARKER_SECONDS), so both are honoured here,
        and `reclaim`, `cancel` and `settle` never take an old-format marker for an open lease.
        """
        keys = [key(limits_pk(pool), p + lease_id) for p in (LEASE_PREFIX, SETTLED_PREFIX)]
        found = {str(i["sk"]): i for i in batch_get(self._items.db, self._items.table, keys)}
        marker = found.get(SETTLED_PREFIX + lease_id)
        if marker is not None:
            return settled_of(marker)
        item = found.get(LEASE_PREFIX + lease_id)
        return lease_of(item) if item else None

    def leases(self) -> list[Lease]:
        """Every unsettled lease (the sync reclaims the expired ones): one Query of the sparse
        OpenLeases index per shard value, and one of the bare value older leases carry."""
        found: list[Lease] = []
        for value in read_values(OPEN_LEASE):
            with aws_call("Query"):
                pages = all_pages(
                    self._items.db.query,
                    TableName=self._items.table,
                    IndexName=OPEN_LEASES_INDEX,
                    KeyConditionExpression="openLease = :open",
                    FilterExpression="attribute_not_exists(settled)",
                    ExpressionAttributeValues={":open": {"S": value}},
                )
                found += [lease_of(from_item(i)) for page in pages for i in page["Items"]]
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

    def _drop(self, lease: Lease, *, expired_only: bool, again: bool = True) -> bool:
        # A settled lease has no `Lease#` item, or (old format) one marked `settled`; and the
        # lease still holds the quota usage it was read with (an admission's hold after an
        # apply moves it: then it is read again and given back from where it is held, once).
        held, values = held_as_read(lease)
        condition = f"attribute_exists(pk) AND attribute_not_exists(settled) AND {held}"
        delete: dict[str, Any] = {
            "TableName": self._items.table,
            "Key": key(limits_pk(lease.pool), LEASE_PREFIX + lease.lease_id),
            "ConditionExpression": condition,
        }
        if expired_only:
            delete["ConditionExpression"] = condition + " AND expiresAt < :now"
            values[":now"] = {"N": str(int(self._clock()))}
        if values:
            delete["ExpressionAttributeValues"] = values
        amount = Resources.ZERO - lease.amount
        try:
            self._items.transact(
                [*self._items.usage_updates(lease.pool, amount, hold_of(lease)), {"Delete": delete}]
            )
        except ConditionFailed:
            now = self.lease(lease.pool, lease.lease_id) if again else None
            if now is None or now.settled or hold_of(now) == hold_of(lease):
                return False
            return self._drop(now, expired_only=expired_only, again=False)
        return True

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
                    "TableName": self._items.table,
                    "Key": lease_key,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        else:
            # Still open: not reclaimed, nor settled in the old format (see `lease`), and holding
            # the quota usage it was read with (an admission's hold after an apply moves it:
            # adapters/pool_members.py; the settle then reads it again).
            held, values = held_as_read(lease)
            gone = {
                "Delete": {
                    "TableName": self._items.table,
                    "Key": lease_key,
                    "ConditionExpression": (
                        f"attribute_exists(pk) AND attribute_not_exists(settled) AND {held}"
                    ),
                    **({"ExpressionAttributeValues": values} if values else {}),
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
                "TableName": self._items.table,
                "Item": to_item(marker),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        return [gone, put]

    def _took(self, lease: Lease) -> None:
        """Remember the lease a reserve transaction just put."""
        if len(self._taken) >= _MAX_TAKEN:
            self._taken.clear()  # leases whose settle never came (their requests went back)
        self._taken[(lease.pool, lease.lease_id)] = lease
