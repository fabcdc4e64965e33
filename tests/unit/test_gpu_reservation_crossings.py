"""Issue 16's crossings: a scheduled reservation or block starts, a block nears its end, expiry."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.capacity.reservation_state import (
    HeldInstance,
    StoredReservation,
    Thresholds,
    next_state,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import (
    BLOCK_EXPIRING,
    RESERVATION_ACTIVATED,
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRED,
    RESERVATION_EXPIRING,
    RESERVATION_UNDERUTILIZED,
    RESERVATION_UTILIZATION_HIGH,
)

START = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)
END = START + timedelta(days=1)
RULES = Thresholds(
    utilization_high=0.99,
    expiring_horizon=timedelta(hours=72),
    block_expiring_horizon=timedelta(minutes=60),
)


def block(state: str, available: int = 2) -> ReservationSnapshot:
    return ReservationSnapshot(
        reservation_id="cr-block",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        state=state,
        total=2,
        available=available,
        reservation_type="capacity-block",
        start_date=START,
        end_date=END,
    )


def walk(
    *steps: tuple[ReservationSnapshot, datetime], held: tuple[HeldInstance, ...] = ()
) -> list[list[tuple[str, dict[str, object]]]]:
    stored: StoredReservation | None = None
    timeline = []
    for observation, now in steps:
        stored, events = next_state(stored, observation, {}, RULES, now, held)
        timeline.append([(e.detail_type, dict(e.detail)) for e in events])
    return timeline


def types(timeline: list[list[tuple[str, dict[str, object]]]]) -> list[list[str]]:
    return [[t for t, _ in step] for step in timeline]


def test_a_block_is_announced_activated_expiring_with_its_instances_then_expired_each_once():
    held = (HeldInstance("i-2", "r-train"), HeldInstance("i-1", "r-train"), HeldInstance("i-3"))
    timeline = walk(
        (block("scheduled"), START - timedelta(hours=1)),
        (block("active"), START + timedelta(minutes=1)),
        (block("active", 0), END - timedelta(hours=2)),
        (block("active", 0), END - timedelta(minutes=59)),
        (block("active", 0), END - timedelta(minutes=45)),
        (block("expired", 0), END + timedelta(minutes=1)),
        (block("expired", 0), END + timedelta(minutes=2)),
    )
    assert types(timeline) == [
        [],
        [RESERVATION_ACTIVATED],
        # unused from its start until 2 hours before its end: idle for more than a period
        [RESERVATION_EXHAUSTED, RESERVATION_UTILIZATION_HIGH, RESERVATION_UNDERUTILIZED],
        [BLOCK_EXPIRING],
        [],
        [RESERVATION_EXPIRED],
        [],
    ]
    assert RESERVATION_EXPIRING not in {t for step in types(timeline) for t in step}
    _, activated = timeline[1][0]
    assert (activated["reservationType"], activated["startDate"]) == (
        "capacity-block",
        START.isoformat(),
    )
    held_timeline = walk(
        (block("active"), START + timedelta(minutes=1)),
        (block("active"), END - timedelta(minutes=50)),
        held=held,
    )
    _, expiring = held_timeline[1][0]
    assert expiring["instances"] == [
        {"instanceId": "i-1", "requestId": "r-train"},
        {"instanceId": "i-2", "requestId": "r-train"},
        {"instanceId": "i-3", "requestId": None},
    ]
    assert expiring["requestIds"] == ["r-train"]
    assert expiring["instancesTerminatedAt"] == (END - timedelta(minutes=30)).isoformat()
    assert expiring["secondsUntilTermination"] == 20 * 60


def test_a_future_dated_reservation_that_starts_is_activated_not_replenished():
    odcr = ReservationSnapshot(
        reservation_id="cr-future",
        instance_type="m5.large",
        zone="us-east-1a",
        state="scheduled",
        total=4,
        available=0,
        start_date=START,
    )

    timeline = walk(
        (odcr, START - timedelta(days=1)),
        (replace(odcr, state="active", available=4), START + timedelta(minutes=1)),
    )
    assert types(timeline) == [[], [RESERVATION_ACTIVATED]]


def test_a_reservation_first_seen_expired_is_not_announced():
    assert types(walk((block("expired", 0), END + timedelta(hours=1)))) == [[]]
