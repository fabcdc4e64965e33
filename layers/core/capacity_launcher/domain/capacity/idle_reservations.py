"""Idle reservations: paid and unused instance-hours, and when a reservation is underutilized.

The sync sees each selected reservation once a minute (`total`, `available`). A reservation is
paid for every instance of `total` while it is `active`; the `available` ones are paid and unused:
**idle**. Between two looks the counts last seen are taken to hold (a left Riemann sum over the
sync's looks; a sync that stopped for a while counts what it saw last for the whole gap).

`IdleState` is what a snapshot keeps: the counts it accounts from, the instance-hours paid and idle
in the current period and in all, and the highest utilization seen in the period. It is folded
(hours added up to now) only when the counts change or a period ends, so a reservation whose
counts stay put is not written every minute: `idle_hours_at` adds the open interval when read.

Rule (`IdlePolicy`): a period starts when the sync first sees the reservation active (or when the
last period ended). When a period of `period` has passed, the reservation was **underutilized** in
it if its utilization stayed below `threshold` at every look (`peak < threshold`): then one
`Capacity Reservation Underutilized` event says so, with the period's paid, used and idle hours.
A new period begins either way, so the event comes at most once per period, never every minute.
A reservation that stops being active (expired, cancelled, scheduled again) closes its period
without a verdict; a new one starts when it is active again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot

# Defaults (Settings: IDLE_UTILIZATION_THRESHOLD, IDLE_PERIOD_HOURS; template.yaml parameters).
DEFAULT_IDLE_THRESHOLD = 0.5
DEFAULT_IDLE_PERIOD = timedelta(hours=3)
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class IdlePolicy:
    """Below `threshold` utilization at every look for a whole `period`: underutilized."""

    threshold: float = DEFAULT_IDLE_THRESHOLD
    period: timedelta = DEFAULT_IDLE_PERIOD


@dataclass(frozen=True)
class IdleState:
    """A reservation's idle accounting, kept in its snapshot (bounded: numbers, no lists)."""

    counted_until: datetime
    period_start: datetime
    total: int = 0
    available: int = 0
    period_paid_hours: float = 0.0
    period_idle_hours: float = 0.0
    peak_utilization: float = 0.0
    paid_hours: float = 0.0
    idle_hours: float = 0.0

    @property
    def utilization(self) -> float:
        return (self.total - self.available) / self.total if self.total else 0.0


@dataclass(frozen=True)
class IdlePeriod:
    """A period that ended with the reservation underutilized: what the event says."""

    start: datetime
    end: datetime
    paid_hours: float
    idle_hours: float
    peak_utilization: float

    @property
    def used_hours(self) -> float:
        return self.paid_hours - self.idle_hours

    @property
    def utilization(self) -> float:
        return self.used_hours / self.paid_hours if self.paid_hours else 0.0


def _counts(seen: ReservationSnapshot) -> tuple[int, int]:
    """What the reservation is paid for and leaves unused now: nothing unless active."""
    if seen.state != ACTIVE or seen.total <= 0:
        return 0, 0
    return seen.total, min(max(seen.available, 0), seen.total)


def _folded(state: IdleState, now: datetime) -> IdleState:
    """`state` with the hours since `counted_until` added, at the counts it holds."""
    hours = max((now - state.counted_until).total_seconds(), 0.0) / SECONDS_PER_HOUR
    paid, idle = state.total * hours, state.available * hours
    return replace(
        state,
        counted_until=max(now, state.counted_until),
        period_paid_hours=state.period_paid_hours + paid,
        period_idle_hours=state.period_idle_hours + idle,
        paid_hours=state.paid_hours + paid,
        idle_hours=state.idle_hours + idle,
    )


def advance_idle(
    prev: IdleState | None, seen: ReservationSnapshot, policy: IdlePolicy, now: datetime
) -> tuple[IdleState, IdlePeriod | None]:
    """The idle state after the sync's look at `now`, and the period that ended underutilized
    (None when none did). `prev` comes back unchanged when nothing is to be written."""
    total, available = _counts(seen)
    utilization = (total - available) / total if total else 0.0
    if prev is None:
        start = IdleState(counted_until=now, period_start=now, total=total, available=available)
        return replace(start, peak_utilization=utilization), None
    period_over = prev.total > 0 and now - prev.period_start >= policy.period
    if (total, available) == (prev.total, prev.available) and not period_over:
        return prev, None
    state = _folded(prev, now)
    ended: IdlePeriod | None = None
    if period_over and state.peak_utilization < policy.threshold and state.period_paid_hours > 0:
        ended = IdlePeriod(
            start=state.period_start,
            end=now,
            paid_hours=state.period_paid_hours,
            idle_hours=state.period_idle_hours,
            peak_utilization=state.peak_utilization,
        )
    # A period restarts when one ends, and whenever the reservation is not (or not yet) active.
    restart = period_over or total == 0 or prev.total == 0
    if restart:
        state = replace(
            state,
            period_start=now,
            period_paid_hours=0.0,
            period_idle_hours=0.0,
            peak_utilization=utilization,
        )
    else:
        state = replace(state, peak_utilization=max(state.peak_utilization, utilization))
    return replace(state, total=total, available=available), ended


def idle_hours_at(state: IdleState | None, now: datetime) -> float:
    """Idle instance-hours up to `now`: those counted, and the open interval at the last counts."""
    if state is None:
        return 0.0
    return _folded(state, now).idle_hours


def paid_hours_at(state: IdleState | None, now: datetime) -> float:
    """Paid instance-hours up to `now`, as `idle_hours_at`."""
    if state is None:
        return 0.0
    return _folded(state, now).paid_hours
