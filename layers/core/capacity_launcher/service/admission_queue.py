"""The admission queues (issue 37): waiting requests are entries of their pool's queue, woken by
room appearing, never by polling. The order and every rule are the domain's
(domain/accounting/admission_queue.py); this loop reads heads and re-drives them.

- **Enqueue** (the launch batch, as a request is put to wait for room): its entry is written at
  its place (priority, then arrival). An entry a room event woke and that was refused again passes
  the wake on to the entry behind it (Kueue's BestEffortFIFO, at most WAKE_WINDOW entries per
  event), unless it has been passed over MAX_PASSES times: then it blocks the queue behind it.
- **Leave** (the batch, as a request that waited ends: admitted, or failed at its deadline): its
  entry is removed and the queue's head woken (the room it found may hold more).
- **Wake** (room appeared: an instance of the pool stopped or terminated, the sync's minute, a
  pool or quota applied): one Query of the queue's first FAIR_WINDOW entries, one read of the
  usage items of the cohorts waiting in it (through a tree, every cohort of the tree; none when
  one quota waits there), one read of the
  chosen entry's record, one message sent and one conditional write handing its wait to that
  message. The window is tried in fair order (priority, then, through a cohort tree, the shares
  of the subtrees the entries come from, level by level from the root down, then the lowest
  dominant resource share of the requester's quota, then arrival:
  domain/accounting/fair_sharing.py); an entry whose
  request no longer waits there is removed and the next one tried (at most a few per wake). The
  cost of a wake is flat in the number waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting import fair_sharing
from capacity_launcher.domain.accounting.admission_queue import (
    QueueEntry,
    entry_key,
    pass_wake_on,
    queue_pool,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import HeldRequests, QueueItems, Redrive, ShareReads

if TYPE_CHECKING:  # a type only: the Kueue document's module stays out of a handler's init
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort

# Entries a wake may find stale (their request ended or waits elsewhere) before it stops.
_STALE_PER_WAKE = 4


class AdmissionQueue:
    def __init__(
        self,
        items: QueueItems,
        records: HeldRequests,
        queue: Redrive,
        quotas: Callable[[], list[CapacityQuota]] | None = None,
        usage: ShareReads | None = None,
        cohorts: Callable[[], Mapping[str, Cohort]] | None = None,
    ) -> None:
        self._items = items
        self._records = records
        self._queue = queue
        # The quotas (a container's copy) and their usage: what fair sharing orders by (None:
        # the queue's own order).
        self._quotas = quotas
        self._usage = usage
        # The applied Cohorts (read with the quotas, the same copy): their tree orders the
        # window level by level (None, or none applied: the flat order).
        self._cohorts = cohorts

    def enqueue(self, entry: QueueEntry) -> None:
        """Its entry, at its place; a woken entry refused again passes the wake on."""
        before = self._items.put(entry)
        nxt = pass_wake_on(before) if before is not None else None
        if nxt is None:
            return
        self._items.passed_over(entry)
        self.wake(entry.pool, chain=nxt, after=entry.key)

    def leave(self, waited: RequestRecord, priority: int) -> None:
        """A request that waited in a queue ended: its entry goes, the queue's head is woken."""
        pool = queue_pool(waited.waiting_for)
        if pool is None:
            return
        self._items.remove(pool, entry_key(priority, waited.received_at, waited.request_id))
        self.wake(pool)

    def wake(self, pool: str, *, chain: int = 1, after: str | None = None) -> str | None:
        """Wake the first of the pool's queue in fair order (the one after `after` in that order,
        when a wake is passed on): its message is sent again, now. Returns its request id (None:
        nothing waits there)."""
        order = self._fair_order(pool, self._items.head(pool, limit=fair_sharing.FAIR_WINDOW))
        if after is not None:
            order = fair_sharing.after(order, after)
        for entry in order[:_STALE_PER_WAKE]:
            if self._redrive(entry, chain):
                return entry.request_id
        return None

    def _fair_order(self, pool: str, window: list[QueueEntry]) -> list[QueueEntry]:
        """The window in the order a wake tries it: the shares read only when two quotas wait."""
        if self._quotas is None or self._usage is None or len(window) < 2:
            return fair_sharing.fair_order(window, {})
        quotas = self._quotas()
        cohorts = self._cohorts() if self._cohorts is not None else {}
        teams = fair_sharing.governing(window, pool, quotas)
        items = fair_sharing.usage_items(teams, pool, cohorts)
        usage = self._usage.usage_in(items, pool) if items else {}
        share = fair_sharing.shares(teams, quotas, usage, pool, cohorts)
        return fair_sharing.fair_order(window, share)

    def wake_all(self, pools: Iterable[str]) -> list[str]:
        """The sync's minute: the head of every pool's queue (one Query per pool)."""
        woken = []
        for pool in pools:
            try:
                request_id = self.wake(pool)
            except Exception:
                logger.exception("could not wake the pool's queue", extra={"nodePool": pool})
                continue
            if request_id is not None:
                woken.append(request_id)
        return woken

    def _redrive(self, entry: QueueEntry, chain: int) -> bool:
        """Send the entry's message again; False when it is stale (removed)."""
        found = self._records.waiting(entry.request_id)
        record = found[0] if found is not None else None
        if (
            record is None
            or record.status is not RequestStatus.WAITING
            or queue_pool(record.waiting_for) != entry.pool
        ):
            self._items.remove(entry.pool, entry.key)
            return False
        assert found is not None
        sent = self._queue.redrive(entry.queue_arn, entry.body)
        if self._records.rehold(entry.request_id, found[1], sent):
            self._items.woken(entry, chain)
        logger.info(
            "woke a waiting request",
            extra={"requestId": entry.request_id, "nodePool": entry.pool, "chain": chain},
        )
        return True
