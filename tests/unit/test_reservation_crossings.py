"""The sync's crossing rules, without AWS: each event once per crossing, re-armed when it clears."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.capacity.reservation_state import (
    StoredReservation,
    Thresholds,
    next_state,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot, term_matches
from capacity_launcher.domain.records.status import (
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRING,
    RESERVATION_REPLENISHED,
    RESERVATION_UTILIZATION_HIGH,
)

NOW = datetime(2026, 1, 15, 12, tzinfo=UTC)
RULES = Thresholds(utilization_high=0.9, expiring_horizon=timedelta(hours=72))


def seen(available: int, total: int = 10, **fields: object) -> ReservationSnapshot:
    return ReservationSnapshot(
        reservation_id="cr-0123456789abcdef0",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        state=str(fields.pop("state", "active")),
        total=total,
        available=available,
        **fields,  # type: ignore[arg-type]
    )


def walk(*observations: ReservationSnapshot) -> list[list[str]]:
    """The events of each sync in turn, each starting from what the previous one stored."""
    stored: StoredReservation | None = None
    timeline = []
    for observation in observations:
        stored, events = next_state(stored, observation, {}, RULES, NOW)
        timeline.append([e.detail_type for e in events])
    return timeline


def test_exhausted_fires_when_available_reaches_zero_and_once():
    assert walk(seen(3), seen(0), seen(0)) == [
        [],
        [RESERVATION_EXHAUSTED, RESERVATION_UTILIZATION_HIGH],
        [],
    ]


def test_replenished_fires_once_when_an_exhausted_reservation_has_capacity_again():
    assert walk(seen(0, total=1), seen(1, total=1), seen(1, total=1)) == [
        [RESERVATION_EXHAUSTED, RESERVATION_UTILIZATION_HIGH],
        [RESERVATION_REPLENISHED],
        [],
    ]


def test_a_workers_exhausted_flag_is_cleared_with_a_replenished_event_when_ec2_has_capacity():
    flagged = StoredReservation(snapshot=replace(seen(5), exhausted=True), version=3)
    stored, events = next_state(flagged, seen(5), {}, RULES, NOW)
    assert [e.detail_type for e in events] == [RESERVATION_REPLENISHED]
    assert not stored.snapshot.exhausted
    assert stored.version == 4


def test_a_workers_exhausted_flag_stays_while_ec2_shows_no_capacity():
    flagged = StoredReservation(snapshot=replace(seen(0), exhausted=True))
    stored, _ = next_state(flagged, seen(0), {}, RULES, NOW)
    assert stored.snapshot.exhausted


def test_utilization_high_fires_once_per_upward_crossing_and_rearms_below():
    assert walk(seen(5), seen(1), seen(1), seen(3), seen(1)) == [
        [],
        [RESERVATION_UTILIZATION_HIGH],
        [],
        [],
        [RESERVATION_UTILIZATION_HIGH],
    ]


def test_expiring_fires_once_within_the_horizon_and_rearms_after_an_extension():
    soon, later = NOW + timedelta(hours=48), NOW + timedelta(days=30)
    assert walk(
        seen(5, end_date=later),
        seen(5, end_date=soon),
        seen(5, end_date=soon),
        seen(5, end_date=later),
        seen(5, end_date=soon),
    ) == [[], [RESERVATION_EXPIRING], [], [], [RESERVATION_EXPIRING]]


def test_inactive_reservations_raise_no_capacity_events():
    assert walk(seen(0, state="expired"), seen(0, state="cancelled")) == [[], []]


def test_event_detail_names_the_reservation_and_its_numbers():
    _, (event,) = next_state(None, seen(1, total=10), {"team-a": 9}, RULES, NOW)
    assert event.detail_type == RESERVATION_UTILIZATION_HIGH
    assert event.detail["capacityReservationId"] == "cr-0123456789abcdef0"
    assert event.detail["utilization"] == 0.9
    assert event.detail["usageByRequester"] == {"team-a": 9}
    assert event.detail["threshold"] == 0.9


def test_selector_terms_match_tags_owner_and_criteria_of_active_reservations_only():
    reservation = seen(1, tags={"team": "ml", "env": "prod"}, owner_id="123456789012")
    by_tags = CapacityReservationSelectorTerm.model_validate({"tags": {"team": "ml"}})
    by_owner = CapacityReservationSelectorTerm.model_validate({"ownerID": "210987654321"})
    by_id = CapacityReservationSelectorTerm.model_validate({"id": "cr-0123456789abcdef0"})
    assert term_matches(by_tags, reservation)
    assert not term_matches(by_owner, reservation)
    assert not term_matches(by_tags, replace(reservation, state="expired"))
    assert term_matches(by_id, replace(reservation, state="expired"))
