"""How many requests wait, and for how long, by team (issue 37's "visible"): what the sync's
minute publishes as metrics and `top` shows, from the live Waiting records (the sparse
WaitingRequests index: every wait, for scheduled capacity or in an admission queue).

A team is what `team_of` makes of a record's `requester`: the requester itself where an operator
reads it (`top`), the metrics' bounded requester dimension where CloudWatch does
(domain/apis/quota_sets.requester_dimension). Whatever the number of teams, the TOP_TEAMS with
the most waiting requests (ties: the oldest wait first, then the name) each have their own
gauge, the rest are added up under OTHER_TEAMS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from capacity_launcher.domain.records.status import RequestRecord, RequestStatus

# Teams with a series of their own; the others are summed (CloudWatch bills per series).
TOP_TEAMS = 20
OTHER_TEAMS = "(other teams)"
NO_REQUESTER = "-"


@dataclass(frozen=True)
class WaitGauge:
    """`waiting` requests of `team` wait; the oldest of them was received `oldest_seconds`
    ago."""

    team: str
    waiting: int
    oldest_seconds: float


def as_written(requester: str | None) -> str:
    return requester or NO_REQUESTER


def wait_gauges(
    records: Iterable[RequestRecord],
    now: datetime,
    team_of: Callable[[str | None], str] = as_written,
    top: int = TOP_TEAMS,
) -> list[WaitGauge]:
    """One gauge per team with a waiting request, the most waiting first; past `top` teams, one
    OTHER_TEAMS gauge adds up the rest (its oldest is theirs)."""
    counts: dict[str, int] = {}
    oldest: dict[str, float] = {}
    for record in records:
        if record.status is not RequestStatus.WAITING:
            continue  # an outcome not yet published is still in the index
        team = team_of(record.requester)
        counts[team] = counts.get(team, 0) + 1
        age = max((now - record.received_at).total_seconds(), 0.0)
        oldest[team] = max(oldest.get(team, 0.0), age)
    ranked = sorted(counts, key=lambda team: (-counts[team], -oldest[team], team))
    gauges = [WaitGauge(team, counts[team], oldest[team]) for team in ranked[:top]]
    rest = ranked[top:]
    if rest:
        gauges.append(
            WaitGauge(
                OTHER_TEAMS,
                sum(counts[team] for team in rest),
                max(oldest[team] for team in rest),
            )
        )
    return gauges


def total(gauges: Iterable[WaitGauge]) -> WaitGauge:
    """Every team's waiting requests, and the oldest wait of all (0 when nothing waits)."""
    listed = list(gauges)
    return WaitGauge(
        "",
        sum(g.waiting for g in listed),
        max((g.oldest_seconds for g in listed), default=0.0),
    )
