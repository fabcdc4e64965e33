"""Issue 39: idle reservations. The sync's looks accumulate paid and idle instance-hours in a
bounded state, and a period below the threshold at every look is announced once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.capacity.idle_reservations import (
    IdlePolicy,
    IdleState,
    advance_idle,
    idle_hours_at,
    paid_hours_at,
)
from capacity_launcher.domain.capacity.reservation_state import Thresholds, next_state
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import RESERVATION_UNDERUTILIZED

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
POLICY = IdlePolicy(threshold=0.5, period=timedelta(hours=3))


def seen(available: int, total: int = 4, state: str = "active") -> ReservationSnapshot:
    return ReservationSnapshot("cr-idle", "p5.48xlarge", "us-east-1a", state, total, available)


def looks(*steps: tuple[int, ReservationSnapshot]) -> tuple[IdleState, list[int]]:
    """Each step: the minute of the look and what EC2 said; the state after, and the minutes at
    which an underutilized period ended."""
    state: IdleState | None = None
    announced = []
    for minute, observation in steps:
        state, ended = advance_idle(state, observation, POLICY, T0 + timedelta(minutes=minute))
        if ended is not None:
            announced.append(minute)
    assert state is not None
    return state, announced


def every_minute(
    until: int, available: int, total: int = 4
) -> list[tuple[int, ReservationSnapshot]]:
    return [(m, seen(available, total)) for m in range(until + 1)]


def test_idle_hours_are_the_unused_instances_times_the_hours_between_looks():
    state, _ = looks((0, seen(3)), (60, seen(1)), (120, seen(1)))
    # 3 idle for the first hour, 1 for the second; 4 paid for both
    assert idle_hours_at(state, T0 + timedelta(minutes=120)) == pytest.approx(4.0)
    assert paid_hours_at(state, T0 + timedelta(minutes=120)) == pytest.approx(8.0)
    # read later, the open interval counts at the last counts seen
    assert idle_hours_at(state, T0 + timedelta(minutes=180)) == pytest.approx(5.0)


def test_an_unchanged_look_keeps_the_state_as_is_so_nothing_is_written():
    first, _ = advance_idle(None, seen(2), POLICY, T0)
    again, ended = advance_idle(first, seen(2), POLICY, T0 + timedelta(minutes=1))
    assert again is first and ended is None


def test_a_period_below_the_threshold_at_every_look_is_announced_once_per_period():
    # 1 of 4 used (utilization 0.25) for 7 hours, looked at every minute
    state, announced = looks(*every_minute(7 * 60, available=3))
    assert announced == [180, 360]
    # bounded: the state holds numbers, no history of looks
    assert state.period_start == T0 + timedelta(minutes=360)


def test_a_single_look_at_or_above_the_threshold_spares_the_period():
    steps = every_minute(179, available=3)
    steps[90] = (90, seen(2))  # half used once: 0.5 is not below 0.5
    _, announced = looks(*steps, (180, seen(3)))
    assert announced == []


def test_the_announced_period_says_its_paid_used_and_idle_hours():
    state: IdleState | None = None
    state, _ = advance_idle(state, seen(3), POLICY, T0)
    state, ended = advance_idle(state, seen(3), POLICY, T0 + timedelta(hours=3))
    assert ended is not None
    assert (ended.start, ended.end) == (T0, T0 + timedelta(hours=3))
    assert ended.paid_hours == pytest.approx(12.0)
    assert ended.idle_hours == pytest.approx(9.0)
    assert ended.used_hours == pytest.approx(3.0)
    assert ended.utilization == pytest.approx(0.25)
    assert ended.peak_utilization == pytest.approx(0.25)


def test_time_not_active_is_neither_paid_nor_idle_and_restarts_the_period():
    state, announced = looks(
        (0, seen(4, state="scheduled")),
        (600, seen(4, state="scheduled")),
        (601, seen(4)),
        (700, seen(4, state="expired")),
        (1000, seen(4, state="expired")),
    )
    assert announced == []
    assert idle_hours_at(state, T0 + timedelta(minutes=1000)) == pytest.approx(4 * 99 / 60)


def test_the_sync_publishes_underutilized_with_the_period_in_its_detail():
    rules = Thresholds(utilization_high=0.9, expiring_horizon=timedelta(hours=72), idle=POLICY)
    stored, events = next_state(None, seen(3), {}, rules, T0)
    assert events == []
    stored, events = next_state(stored, seen(3), {}, rules, T0 + timedelta(minutes=1))
    assert events == []
    stored, events = next_state(stored, seen(3), {}, rules, T0 + timedelta(hours=3))
    assert [e.detail_type for e in events] == [RESERVATION_UNDERUTILIZED]
    detail = events[0].detail
    assert detail["capacityReservationId"] == "cr-idle"
    assert detail["threshold"] == 0.5 and detail["periodHours"] == 3
    assert detail["idleInstanceHours"] == 9.0 and detail["paidInstanceHours"] == 12.0
    assert detail["periodStart"] == T0.isoformat()
    # the next minute publishes nothing: once per period
    _, events = next_state(stored, seen(3), {}, rules, T0 + timedelta(hours=3, minutes=1))
    assert events == []


def test_a_state_stored_before_idle_accounting_starts_it_without_an_event():
    rules = Thresholds(utilization_high=0.9, expiring_horizon=timedelta(hours=72), idle=POLICY)
    stored, _ = next_state(None, seen(3), {}, rules, T0)
    legacy = replace(stored, idle=None)
    again, events = next_state(legacy, seen(3), {}, rules, T0 + timedelta(hours=5))
    assert events == [] and again.idle is not None
    assert again.idle.period_start == T0 + timedelta(hours=5)
