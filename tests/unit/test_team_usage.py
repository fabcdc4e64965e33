"""Issue 39, usage by team: the pure rules (domain/accounting/team_usage.py)."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from capacity_launcher.domain.accounting.team_usage import (
    Lifetime,
    PriceTableError,
    UsageBucket,
    capacity_kind,
    hours_by_day,
    price_table,
    reservation_window,
    usage_report,
    window_usage,
)

DAY = date(2026, 11, 27)
MIDNIGHT = datetime(2026, 11, 28, tzinfo=UTC)


def life(
    instance_id: str,
    requester: str | None,
    start: datetime,
    end: datetime | None = None,
    *,
    kind: str = "on-demand",
    reservation: str | None = None,
    itype: str = "m5.large",
) -> Lifetime:
    return Lifetime(instance_id, requester, "general", kind, itype, reservation, start, end)  # type: ignore[arg-type]


def bucket(
    requester: str | None, kind: str = "on-demand", reservation: str | None = None, day: date = DAY
) -> UsageBucket:
    return UsageBucket(day, requester, "general", kind, "m5.large", reservation)


def test_hours_are_split_at_utc_midnight():
    assert hours_by_day(MIDNIGHT - timedelta(hours=2), MIDNIGHT + timedelta(hours=3)) == {
        DAY: 2.0,
        date(2026, 11, 28): 3.0,
    }
    assert hours_by_day(MIDNIGHT, MIDNIGHT) == {}


def test_a_window_counts_each_life_inside_it_a_running_one_up_to_the_windows_end():
    since, until = MIDNIGHT - timedelta(hours=4), MIDNIGHT - timedelta(hours=1)
    usage = window_usage(
        [
            life("i-1", "team-a", since - timedelta(hours=10)),  # runs through: 3 h
            life("i-2", "team-a", since + timedelta(hours=1), since + timedelta(hours=2)),  # 1 h
            life("i-3", "team-b", since - timedelta(hours=5), since - timedelta(hours=1)),  # 0
        ],
        since,
        until,
    )
    assert usage == {bucket("team-a"): pytest.approx(4.0)}


def test_consecutive_windows_add_up_to_the_lifetime():
    lives = [
        life("i-1", "team-a", MIDNIGHT - timedelta(minutes=95), MIDNIGHT + timedelta(minutes=7))
    ]
    edges = [MIDNIGHT - timedelta(hours=2) + timedelta(minutes=10 * k) for k in range(14)]
    total = sum(sum(window_usage(lives, a, b).values()) for a, b in itertools.pairwise(edges))
    assert total == pytest.approx(102 / 60)


def test_a_blocks_reserved_capacity_is_block():
    assert capacity_kind("reserved", "capacity-block") == "block"
    assert capacity_kind("reserved", "default") == "reserved"
    assert capacity_kind("reserved", None) == "reserved"
    assert capacity_kind("spot", None) == "spot"
    assert capacity_kind("on-demand", None) == "on-demand"


def test_idle_hours_go_to_the_teams_in_proportion_to_their_use_of_the_reservation_that_day():
    reservation = reservation_window(
        "cr-1", "default", "m5.large", 4, 1, MIDNIGHT - timedelta(hours=10), MIDNIGHT
    )
    usage = {
        bucket("team-a", "reserved", "cr-1"): 20.0,
        bucket("team-b", "reserved", "cr-1"): 10.0,
        bucket("team-b"): 5.0,  # on-demand: no share
    }
    report = usage_report(MIDNIGHT - timedelta(days=1), MIDNIGHT, usage, [reservation])
    shares = {(r.requester, r.capacity_kind): r.idle_share_hours for r in report.rows}
    # paid 40, used 30: 10 idle, 2:1
    assert shares[("team-a", "reserved")] == pytest.approx(10 * 2 / 3)
    assert shares[("team-b", "reserved")] == pytest.approx(10 / 3)
    assert shares[("team-b", "on-demand")] == 0
    [row] = report.reservations
    assert (row.paid_hours, row.used_hours, row.idle_hours) == (40.0, 30.0, 10.0)
    assert row.unattributed_idle_hours == 0


def test_a_day_none_of_ours_used_the_reservation_leaves_its_idle_hours_unattributed():
    reservation = reservation_window(
        "cr-1", "default", "m5.large", 2, 2, MIDNIGHT - timedelta(hours=3), MIDNIGHT
    )
    report = usage_report(
        MIDNIGHT - timedelta(days=1), MIDNIGHT, {bucket("team-a"): 1.0}, [reservation]
    )
    assert report.reservations[0].unattributed_idle_hours == 6.0
    assert all(r.idle_share_hours == 0 for r in report.rows)


def test_cost_only_where_the_operators_table_prices_the_row():
    prices = price_table({"onDemand": {"m5.large": "0.10"}, "reserved": {"m5.large": 0.06}})
    reservation = reservation_window(
        "cr-1", "default", "m5.large", 2, 1, MIDNIGHT - timedelta(hours=10), MIDNIGHT
    )
    usage = {
        bucket("team-a"): 10.0,
        bucket("team-a", "reserved", "cr-1"): 10.0,
        bucket("team-b", "spot"): 3.0,
    }
    report = usage_report(MIDNIGHT - timedelta(days=1), MIDNIGHT, usage, [reservation], prices)
    costs = {r.capacity_kind: r.estimated_cost for r in report.rows}
    assert costs["on-demand"] == Decimal("1.00")
    # the reservation's 10 used hours and its 10 idle hours, all team-a's
    assert costs["reserved"] == Decimal("1.20")
    assert costs["spot"] is None  # not priced: no guess
    assert report.estimated_cost == Decimal("2.20")
    unpriced = usage_report(MIDNIGHT - timedelta(days=1), MIDNIGHT, usage, [reservation])
    assert unpriced.estimated_cost is None
    assert all(r.estimated_cost is None for r in unpriced.rows)


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"ondemand": {"m5.large": 1}}, "ondemand"),
        ({"spot": {"m5.large": "cheap"}}, "spot.m5.large"),
        ({"block": {"p5.48xlarge": -1}}, "block.p5.48xlarge"),
        (["m5.large"], "(document)"),
    ],
)
def test_a_bad_price_table_is_refused_naming_the_field(document, named):
    with pytest.raises(PriceTableError) as error:
        price_table(document)
    assert named in str(error.value)
