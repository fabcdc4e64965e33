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
  pool or quota applied): one Query of the head (Limit 1), one read of its record, one message
  sent and one conditional write handing its wait to that message. An entry whose request no
  longer waits there is removed and the next one read (at most a few per wake). The cost of a wake
  is flat in the number waiting.
"""

from __future__ import annotations

from collections.abc import Iterable

from capacity_launcher.domain.accounting.admission_queue import (
    QueueEntry,
    entry_key,
    pass_wake_on,
    queue_pool,
)
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import HeldRequests, QueueItems, Redrive

# Entries a wake may find stale (their request ended or waits elsewhere) before it stops.
_STALE_PER_WAKE = 4


class AdmissionQueue:
    def __init__(
        self,
        items: QueueItems,
        records: HeldRequests,
        queue: Redrive,
    ) -> None:
        self._items = items
        self._records = records
        self._queue = queue

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
        """Wake the head of the pool's queue (the entry after `after`, when a wake is passed on):
        its message is sent again, now. Returns its request id (None: nothing waits there)."""
        for _ in range(_STALE_PER_WAKE):
            found = self._items.head(pool, after)
            if not found:
                return None
            [entry] = found
            if self._redrive(entry, chain):
                return entry.request_id
            after = entry.key
        return None

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
