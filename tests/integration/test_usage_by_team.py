"""Issue 39, usage by team on the local cloud: the sync rolls instance lifetimes up into day items,
the hours add up to the instances' lifetimes on the emulator's clock, and a reservation's idle
hours go to the teams that used it."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest

import moto_capacity
from capacity_launcher.domain.accounting.team_usage import price_table
from moto_capacity.core.clock import CLOCK
from tests.integration.test_idle_reservations import targeted
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import launch_request

TEN_MINUTES = 600


def stay_within_one_day(hours: float) -> None:
    """Move the emulator's clock past the next UTC midnight when fewer than `hours` are left
    before it (the test then runs the same whatever the hour it starts at)."""
    now = CLOCK.now()
    midnight = datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=UTC)
    if (midnight - now).total_seconds() < hours * 3600:
        moto_capacity.advance_clock((midnight - now).total_seconds() + 60)


def run_for(minutes: int) -> datetime:
    """The sync every ten minutes of the emulator's clock; the moment the last run's roll-up
    counted up to. Not the clock after the run: the emulator's clock follows real time too, and
    the sync's parts after the roll-up (the shared resolution's Describes) take seconds on a
    loaded machine, which the instances that run throughout would count twice over."""
    last = CLOCK.now()
    for _ in range(minutes // 10):
        moto_capacity.advance_clock(TEN_MINUTES)
        usage = sync().usage
        assert usage is not None
        last = usage.until
    return last


def test_usage_hours_add_up_to_the_instances_lifetimes_and_idle_goes_to_the_users(
    cloud, subnets, image
):
    # The idle share is attributed per UTC day: the scenario's two hours stay inside one day
    # (run near midnight, the emulator's clock moves on to the next day's first hour first)
    stay_within_one_day(hours=3)
    # Given a reservation of 3 the pool targets (on-demand beyond it): team-a runs 1 instance,
    # team-b 3 (2 in the reservation, 1 on-demand)
    reservation_id = targeted(cloud, subnets, image, 3)
    cloud.send(launch_request("r-a", nodePool="general", count=1, requester="team-a"))
    cloud.send(launch_request("r-b", nodePool="general", count=3, requester="team-b"))
    team_b = cloud.record("r-b")
    assert team_b is not None and team_b.launched == 3
    cloud.wait_out_consistency()
    first = sync().usage
    assert first.written and first.since is None  # the first roll-up only sets the watermark
    started = first.until
    # When they run for an hour and five minutes (mid-window), then team-b's on-demand and one
    # reserved instance terminate
    run_for(60)
    moto_capacity.advance_clock(300)
    gone = [
        next(i.instance_id for i in team_b.instances if i.capacity_type == "on-demand"),
        next(i.instance_id for i in team_b.instances if i.capacity_type == "reserved"),
    ]
    cloud.ec2.terminate_instances(InstanceIds=gone)
    ended = CLOCK.now()
    events = cloud.adapters().instance_events()
    for instance_id in gone:
        events.state_changed(instance_id, "terminated")
    last = run_for(60)
    # Then the usage report's hours are the lifetimes inside the counted span, exactly
    day = datetime.combine(started.date(), time(), tzinfo=UTC)
    report = cloud.adapters().queries().usage_between(day, last + timedelta(seconds=1))
    two_hours = (last - started).total_seconds() / 3600
    first_hour = (ended - started).total_seconds() / 3600
    expected = 2 * two_hours + 2 * first_hour  # two ran throughout, two until `ended`
    assert sum(r.instance_hours for r in report.rows) == pytest.approx(expected, abs=1e-3)
    by = {(r.requester, r.capacity_kind): r for r in report.rows}
    assert by[("team-a", "reserved")].instance_hours == pytest.approx(two_hours, abs=1e-3)
    assert by[("team-b", "on-demand")].instance_hours == pytest.approx(first_hour, abs=1e-3)
    assert by[("team-b", "reserved")].instance_hours == pytest.approx(
        two_hours + first_hour, abs=1e-3
    )
    # and the reservation: paid 3 throughout, 1 idle after `ended`, shared 1:1 between the two
    # teams that used it the second hour (team-b used it more that day: 3:2 over the day)
    [reservation] = report.reservations
    assert reservation.reservation_id == reservation_id
    assert reservation.paid_hours == pytest.approx(3 * two_hours, abs=0.01)
    # a reservation's counts are the sync's looks, each held until the next: exact to one
    # sync interval (ten minutes here, one in a deployment) per instance that came or went
    idle = last - ended
    assert reservation.idle_hours == pytest.approx(idle.total_seconds() / 3600, abs=10 / 60 + 0.01)
    team_a_share = by[("team-a", "reserved")].idle_share_hours
    team_b_share = by[("team-b", "reserved")].idle_share_hours
    assert team_a_share + team_b_share == pytest.approx(reservation.idle_hours, abs=1e-6)
    assert team_b_share / team_a_share == pytest.approx(
        by[("team-b", "reserved")].instance_hours / by[("team-a", "reserved")].instance_hours,
        rel=1e-6,
    )
    assert by[("team-b", "on-demand")].idle_share_hours == 0
    # and costs come only from the operator's prices
    priced = (
        cloud.adapters()
        .queries()
        .usage_between(
            day, last + timedelta(seconds=1), price_table({"onDemand": {"m5.large": "0.096"}})
        )
    )
    costs = {(r.requester, r.capacity_kind): r.estimated_cost for r in priced.rows}
    assert costs[("team-b", "on-demand")] == (
        Decimal("0.096") * Decimal(str(round(first_hour, 6)))
    ).quantize(Decimal("0.01"))
    assert costs[("team-a", "reserved")] is None


def test_a_window_is_counted_once_whatever_runs_again(cloud, subnets, image):
    targeted(cloud, subnets, image, 1)
    cloud.send(launch_request("r-once", nodePool="general", count=1, requester="team-a"))
    cloud.wait_out_consistency()
    sync()
    moto_capacity.advance_clock(3600)
    first = sync().usage
    again = sync().usage  # no simulated time passed: only the seconds the syncs took
    assert first.instance_hours == pytest.approx(1.0, abs=0.01)
    # The emulator's clock follows real time too: the window since the first is counted once,
    # its one instance for those seconds (4.5 s on a loaded machine: over a fixed 1e-3 h)
    assert again.since == first.until
    took = (again.until - first.until).total_seconds() / 3600
    assert took < 0.05
    assert again.instance_hours == pytest.approx(took, abs=1e-6)
    store = cloud.adapters().usage_store()
    # a writer holding an old watermark adds nothing
    assert store.add(first.since, first.until, {}, ()) is False
