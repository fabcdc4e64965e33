"""The backstop of waits for scheduled capacity: the reservation sync ends a Waiting request whose
held copy was lost (retention passed, purged, dead-lettered).

Only waits past their deadline by more than BACKSTOP_MARGIN_SECONDS are read (one Query of a
sparse index: live waits, never history), so a live held copy always ends its own wait first. The
Failed record is written only if the wait is still as read (Waiting, the same held copy, no
delivery began serving it since): a held copy arriving at the same moment and the backstop never
both end it. Its event is published after the write; the record leaves the index only then, so an
outcome written by a run that died before publishing is published by the next.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from capacity_launcher.domain.capacity.capacity_wait import (
    BACKSTOP_MARGIN_SECONDS,
    backstop_due,
    ended_by_backstop,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import Event
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import HeldWaits


class WaitBackstop:
    def __init__(
        self, waits: HeldWaits, publish: Callable[..., None], now: Callable[[], datetime]
    ) -> None:
        self._waits = waits
        self._publish = publish
        self._now = now

    @property
    def waits(self) -> HeldWaits:
        """The store it reads the waits from (the sync's minute reads them once through it for
        the gauges too: service/minute_waits.py)."""
        return self._waits

    def run(
        self, now_seen: Mapping[str, ReservationSnapshot], waits: HeldWaits | None = None
    ) -> list[str]:
        """End the overdue waits (their reservations' states as the sync saw them this minute);
        returns the request ids whose outcome was published. `waits`: the minute's read of the
        waits, shared with the gauges (service/minute_waits.py), else the store."""
        now = self._now()
        ended = []
        waits = waits or self._waits
        for wait in waits.overdue_waits(now - timedelta(seconds=BACKSTOP_MARGIN_SECONDS)):
            outcome = wait.record
            if not outcome.is_final:
                if not backstop_due(wait, now):
                    continue  # a delivery of its held copy is serving it
                outcome = ended_by_backstop(wait.record, now, now_seen)
                if not waits.end_wait(wait, outcome):
                    continue  # its held copy came back meanwhile: that delivery ends it
                logger.warning(
                    "waiting request ended by the backstop: its held copy was lost",
                    extra={"requestId": outcome.request_id, "heldBy": wait.held_by},
                )
            self._publish(Event(outcome.detail_type, outcome.to_detail()))
            waits.clear_wait(outcome.request_id)
            ended.append(outcome.request_id)
        return ended
