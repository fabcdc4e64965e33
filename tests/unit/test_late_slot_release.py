"""The rule that keeps a late termination event from freeing a slot twice (reservation_state)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.capacity.reservation_state import (
    StoredReservation,
    event_time,
    slot_counted_free,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot

ENDED = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)


def stored(synced_at: datetime | None) -> StoredReservation:
    snapshot = ReservationSnapshot(
        reservation_id="cr-1",
        instance_type="m5.large",
        zone="us-east-1a",
        state="active",
        total=1,
        available=1,
    )
    return StoredReservation(snapshot=snapshot, synced_at=synced_at)


@pytest.mark.parametrize(
    ("synced_after", "counted"),
    [
        (timedelta(seconds=-30), False),  # the sync looked before: the release is due
        (timedelta(milliseconds=400), False),  # within the event's second: maybe before
        (timedelta(seconds=1), True),  # surely after the end: EC2 counted it free
        (timedelta(seconds=45), True),
    ],
)
def test_a_slot_is_counted_free_only_by_a_sync_surely_after_the_end(synced_after, counted):
    assert slot_counted_free(stored(ENDED + synced_after), ENDED) is counted


def test_without_a_snapshot_a_sync_or_the_event_time_the_release_is_due():
    assert not slot_counted_free(None, ENDED)
    assert not slot_counted_free(stored(None), ENDED)
    assert not slot_counted_free(stored(ENDED + timedelta(hours=1)), None)


def test_the_envelope_time_is_read_as_eventbridge_writes_it():
    assert event_time("2026-11-29T08:00:00Z") == ENDED
    assert event_time("2026-11-29T08:00:00") == ENDED  # no zone: UTC
    assert event_time(None) is None
    assert event_time("yesterday") is None
    assert event_time(12) is None
