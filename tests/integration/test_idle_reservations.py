"""Issue 39: a selected reservation paid and little used is announced underutilized once per
period, and its idle instance-hours are what the emulator's clock says they are."""

from __future__ import annotations

import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RESERVATION_UNDERUTILIZED
from tests.integration.test_launch_into_reservations import reserve, setup_pool
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.cloud import emulator_seconds, launch_request

TEN_MINUTES = 600


def targeted(cloud, subnets, image, count: int) -> str:
    """A reservation of `count` m5.large that the pool `general` targets."""
    reservation_id = reserve(cloud, count)
    target = {"capacityReservationTarget": {"capacityReservationId": reservation_id}}
    setup_pool(cloud, subnets, image, reservation_spec=target)
    return reservation_id


def test_a_reservation_one_quarter_used_is_announced_once_per_three_hours_with_its_idle_hours(
    cloud, subnets, image
):
    # Given a reservation of 4 the pool targets, one instance launched into it
    reservation_id = targeted(cloud, subnets, image, 4)
    cloud.send(launch_request("r-idle", nodePool="general", count=1, requester="team-a"))
    record = cloud.record("r-idle")
    assert record is not None and record.launched == 1
    cloud.wait_out_consistency()
    first = sync()
    assert RESERVATION_UNDERUTILIZED not in [e.detail_type for e in first.events]
    # When the sync runs every ten minutes for 7 hours of the emulator's clock
    announced = []
    started = emulator_seconds()
    for _ in range(42):
        moto_capacity.advance_clock(TEN_MINUTES)
        announced += [e for e in sync().events if e.detail_type == RESERVATION_UNDERUTILIZED]
    # (the emulator's clock follows real time too: the seconds the 42 syncs took are idle hours of
    # 3 instances as well, a few minutes' worth on a loaded machine)
    slack = 3 * (emulator_seconds() - started - 42 * TEN_MINUTES) / 3600
    # Then the reservation (a quarter used at every look) is announced once per 3-hour period
    assert len(announced) == 2
    detail = announced[0].detail
    assert detail["capacityReservationId"] == reservation_id
    assert detail["periodUtilization"] == pytest.approx(0.25, abs=0.01)
    assert detail["idleInstanceHours"] == pytest.approx(3 * 3, abs=0.2 + slack)
    published = [e for e in cloud.events() if e["detail-type"] == RESERVATION_UNDERUTILIZED]
    assert len(published) == 2
    # and `get reservations` shows 3 idle instances for the 7 hours (and the minutes before)
    idle = cloud.adapters().queries().reservation_idle_hours()
    assert idle[reservation_id] == pytest.approx(3 * 7, abs=0.3 + slack)
    assert snapshot(reservation_id).idle is not None


def test_a_reservation_used_at_half_or_more_is_never_announced(cloud, subnets, image):
    reservation_id = targeted(cloud, subnets, image, 2)
    cloud.send(launch_request("r-half", nodePool="general", count=1))
    cloud.wait_out_consistency()
    events = []
    for _ in range(24):
        moto_capacity.advance_clock(TEN_MINUTES)
        events += [e.detail_type for e in sync().events]
    assert RESERVATION_UNDERUTILIZED not in events
    assert cloud.adapters().queries().reservation_idle_hours()[reservation_id] == pytest.approx(
        4.0, abs=0.2
    )
