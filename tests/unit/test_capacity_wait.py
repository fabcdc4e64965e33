"""The rules of waiting for scheduled capacity (domain/capacity/capacity_wait.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.capacity.capacity_wait import (
    BACKSTOP_MARGIN_SECONDS,
    MAX_CHECK_SECONDS,
    MIN_CHECK_SECONDS,
    HeldWait,
    awaited,
    awaited_records,
    backstop_due,
    ended_by_backstop,
    missed_deadline,
    next_check_seconds,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
BLOCK = ReservationSnapshot(
    reservation_id="cr-0000000000000000a",
    instance_type="p5.48xlarge",
    zone="us-east-1a",
    state="scheduled",
    total=2,
    available=0,
    reservation_type="capacity-block",
    start_date=NOW + timedelta(hours=5),
    end_date=NOW + timedelta(days=1, hours=5),
)


def test_only_reservations_starting_before_the_deadline_are_awaited() -> None:
    late = replace(BLOCK, reservation_id="cr-0000000000000000b", start_date=NOW + timedelta(days=2))
    pending = replace(
        BLOCK, reservation_id="cr-0000000000000000c", state="pending", start_date=None
    )

    found = awaited([BLOCK, late, pending], NOW + timedelta(days=1))

    assert [r.reservation_id for r in found] == [BLOCK.reservation_id, pending.reservation_id]
    assert awaited([BLOCK], BLOCK.start_date) == []  # starting at the deadline is too late


def test_the_next_look_is_at_the_start_or_deadline_within_sqs_bounds() -> None:
    deadline = NOW + timedelta(days=1)
    assert next_check_seconds(NOW, deadline, [BLOCK]) == MAX_CHECK_SECONDS
    soon = replace(BLOCK, start_date=NOW + timedelta(seconds=200))
    assert next_check_seconds(NOW, deadline, [soon]) == 200
    assert next_check_seconds(NOW, NOW + timedelta(seconds=5), [soon]) == MIN_CHECK_SECONDS
    # A start already passed (delayed, or the sync has not seen it active): the deadline counts.
    started = replace(BLOCK, state="delayed", start_date=NOW - timedelta(hours=1))
    assert next_check_seconds(NOW, NOW + timedelta(seconds=300), [started]) == 300


def test_the_missed_deadline_names_each_reservation_its_state_now_and_start() -> None:
    deadline = NOW + timedelta(hours=6)
    waited = awaited_records([BLOCK])

    delayed = missed_deadline(
        deadline, waited, {BLOCK.reservation_id: replace(BLOCK, state="delayed")}
    )
    full = missed_deadline(deadline, waited, {BLOCK.reservation_id: replace(BLOCK, state="active")})
    gone = missed_deadline(deadline, waited, {})

    assert delayed.startswith("waitForCapacityUntil: 2026-11-23T18:00:00.000Z passed")
    assert f"{BLOCK.reservation_id} (delayed, starts 2026-11-23T17:00:00.000Z)" in delayed
    assert "(active but full," in full
    assert "(scheduled, starts" in gone  # no longer selected: as last seen


def test_a_wait_a_delivery_is_serving_is_left_to_it_one_margin_more() -> None:
    # Given a Waiting record whose deadline passed by more than the margin
    deadline = NOW - timedelta(seconds=BACKSTOP_MARGIN_SECONDS + 1)
    record = RequestRecord(
        request_id="r-1",
        status=RequestStatus.WAITING,
        requested=1,
        launched=0,
        received_at=deadline - timedelta(days=1),
        finished_at=deadline - timedelta(minutes=15),
        wait_for_capacity_until=deadline,
        waiting_for=awaited_records([BLOCK]),
    )
    # Then the backstop ends it, unless a delivery of its held copy began serving it
    assert backstop_due(HeldWait(record, "m-1"), NOW)
    assert not backstop_due(HeldWait(record, "m-1", served=1), NOW)
    later = NOW + timedelta(seconds=BACKSTOP_MARGIN_SECONDS)
    assert backstop_due(HeldWait(record, "m-1", served=1), later)


def test_a_wait_the_backstop_ends_keeps_the_requests_deadline_on_its_record() -> None:
    # Given a Waiting record whose held copy was lost
    deadline = NOW - timedelta(seconds=BACKSTOP_MARGIN_SECONDS + 1)
    waiting = RequestRecord(
        request_id="r-1",
        status=RequestStatus.WAITING,
        requested=1,
        launched=0,
        received_at=deadline - timedelta(days=1),
        finished_at=deadline - timedelta(minutes=15),
        wait_for_capacity_until=deadline,
        waiting_for=awaited_records([BLOCK]),
    )
    # When the backstop ends it
    failed = ended_by_backstop(waiting, NOW, {})
    # Then it is Failed, waits for nothing, and still says until when it could wait
    # (docs/contracts.md, Waiting for scheduled capacity: every record of the request carries
    # waitForCapacityUntil)
    assert failed.status is RequestStatus.FAILED and failed.waiting_for == []
    assert failed.wait_for_capacity_until == deadline
    assert failed.to_detail()["waitForCapacityUntil"] == waiting.to_detail()["waitForCapacityUntil"]
