"""What waits, and where in its queue (`capacity-launcher get queues`): Kueue's pending
workloads per queue, with their positions. Read on demand, from the queues' items and the
waiting requests' records; nothing is stored for it, so a position is never stale."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from capacity_launcher.domain.accounting.admission_queue import (
    QueuedRequest,
    QueueEntry,
    positions,
)
from capacity_launcher.domain.records.status import RequestRecord

# The entries listed per pool: an operator's screen, not an export.
SHOWN_PER_POOL = 100


class QueueEntries(Protocol):
    def entries(self, pool: str, limit: int) -> list[QueueEntry]: ...


class WaitingRecords(Protocol):
    def get_records(self, request_ids: Sequence[str]) -> dict[str, RequestRecord]: ...


@dataclass(frozen=True)
class QueueView:
    queues: QueueEntries
    records: WaitingRecords

    def pending(
        self, pools: Iterable[str], limit: int = SHOWN_PER_POOL
    ) -> dict[str, list[QueuedRequest]]:
        """Each pool's waiting requests in admission order (its first `limit`), numbered from
        the head: one Query per pool and one read of their records per hundred."""
        entries = {pool: self.queues.entries(pool, limit) for pool in pools}
        ids = [e.request_id for listed in entries.values() for e in listed]
        records: Mapping[str, RequestRecord] = self.records.get_records(ids) if ids else {}
        return {pool: positions(listed, records) for pool, listed in entries.items()}
