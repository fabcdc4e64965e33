"""How many requests wait and the oldest wait, by team (domain/records/wait_gauges.py): what the
sync publishes each minute and `top` shows (issue 37, "Visible")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.domain.records.wait_gauges import (
    NO_REQUESTER,
    OTHER_TEAMS,
    WaitGauge,
    total,
    wait_gauges,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def waiting(request_id: str, requester: str | None, minutes_ago: float) -> RequestRecord:
    received = NOW - timedelta(minutes=minutes_ago)
    return RequestRecord(
        request_id=request_id,
        node_pool="general",
        requester=requester,
        status=RequestStatus.WAITING,
        requested=1,
        launched=0,
        received_at=received,
        finished_at=received,
    )


def test_each_team_counts_its_waiting_requests_and_its_oldest_wait() -> None:
    records = [
        waiting("a-1", "team-a", 10),
        waiting("a-2", "team-a", 30),
        waiting("b-1", "team-b", 45),
        waiting("x-1", None, 1),
    ]
    assert wait_gauges(records, NOW) == [
        WaitGauge("team-a", 2, 1800.0),
        WaitGauge("team-b", 1, 2700.0),
        WaitGauge(NO_REQUESTER, 1, 60.0),
    ]


def test_an_outcome_not_yet_published_is_not_waiting() -> None:
    ended = waiting("a-1", "team-a", 10).model_copy(update={"status": RequestStatus.FAILED})
    assert wait_gauges([ended], NOW) == []
    assert total([]) == WaitGauge("", 0, 0.0)


def test_past_the_top_teams_the_rest_are_added_up_under_one_series() -> None:
    records = [waiting(f"t{n}-{k}", f"team-{n}", n) for n in range(1, 6) for k in range(n)]
    gauges = wait_gauges(records, NOW, top=2)
    # The most waiting first: team-5 (5), team-4 (4); the rest (3 + 2 + 1) summed, oldest 3 min
    assert gauges == [
        WaitGauge("team-5", 5, 300.0),
        WaitGauge("team-4", 4, 240.0),
        WaitGauge(OTHER_TEAMS, 6, 180.0),
    ]
    assert total(gauges) == WaitGauge("", 15, 300.0)


def test_a_clock_behind_a_receipt_never_makes_a_negative_age() -> None:
    assert wait_gauges([waiting("a-1", "team-a", -1)], NOW) == [WaitGauge("team-a", 1, 0.0)]
