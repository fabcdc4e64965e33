"""The minute's live waits, read once for the two parts of the sync that read them (issue 38).

The waits' backstop (service/wait_backstop.py) reads the waits past their deadline by its margin,
and the waiting gauges (service/sync_metrics.py) every live wait: each was one Query per shard of
the WaitingRequests index, the same index twice a minute. A `MinuteWaits` is made per run: its
first read is of every live wait (the gauges' bound, none lasts past MAX_CAPACITY_WAIT from its
receipt), and each narrower bound is that read filtered as the Query's key condition would
(`deadline_before`, in the domain). The sync's own writes keep it true: a wait the backstop ended
is held as its outcome (no longer Waiting: the gauges skip it), one it cleared leaves it. A write
whose condition failed (a delivery of the held copy served the wait meanwhile) says the read is
stale: the next call reads again. A wait another writer started or ended between the backstop and
the gauges, seconds apart, is counted as read (the gauges are a minute's sample).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from capacity_launcher.domain.capacity.capacity_wait import HeldWait, deadline_before
from capacity_launcher.domain.launch_request import MAX_CAPACITY_WAIT
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.ports import HeldWaits


class MinuteWaits:
    """`HeldWaits` over one read of every live wait, for one run of the sync."""

    def __init__(self, waits: HeldWaits) -> None:
        self._waits = waits
        self._read: tuple[datetime, dict[str, HeldWait]] | None = None

    def overdue_waits(self, deadline_before_: datetime) -> list[HeldWait]:
        """The waits whose deadline is before `deadline_before_`, from the minute's read (made
        now, of every live wait, if there is none yet)."""
        if self._read is None or deadline_before_ > self._read[0]:
            bound = _every_live_wait(deadline_before_)
            read = self._waits.overdue_waits(bound)
            self._read = (bound, {w.record.request_id: w for w in read})
        return [w for w in self._read[1].values() if deadline_before(w, deadline_before_)]

    def end_wait(self, wait: HeldWait, outcome: RequestRecord) -> bool:
        ended = self._waits.end_wait(wait, outcome)
        if not ended:
            self._read = None  # another writer changed it since the read: read again
        elif self._read is not None and wait.record.request_id in self._read[1]:
            self._read[1][wait.record.request_id] = HeldWait(
                outcome, wait.held_by, wait.served, wait.waiting_until
            )
        return ended

    def clear_wait(self, request_id: str) -> None:
        self._waits.clear_wait(request_id)
        if self._read is not None:
            self._read[1].pop(request_id, None)


def _every_live_wait(asked: datetime) -> datetime:
    """A bound past every live wait's deadline when `asked` is a bound of now or before: a wait
    lasts at most MAX_CAPACITY_WAIT from its receipt."""
    return asked + MAX_CAPACITY_WAIT + timedelta(days=1)
