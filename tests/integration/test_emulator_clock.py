"""Issue 34, item 6: the service's stores tell the time by the composition root's clock (the
emulator's locally), so advancing the emulator's clock (`POST /moto-capacity/clock`, what
`local up` offers) expires leases as it expires everything else. The lease store read the wall
clock: a lease stamped on it outlived an advance, and reconciliation, judging it on the
emulator's, counted its instance beside it."""

from __future__ import annotations

import pytest

import moto_capacity
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.settings import get_settings
from tests.integration.test_accounting import usage
from tests.integration.test_launch_into_reservations import killed_after_create_fleet, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room

ONE = Resources(instances=1)
DAY = 24 * 3600


def test_a_lease_expires_when_the_emulator_clock_passes_its_expiry(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a lease a worker took and left open
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    leases = cloud.adapters().pool_leases()
    assert reserve_room(leases, "general", "left-open", ONE, 2, 1, None) == 2
    # When the emulator's clock moves past its expiry
    moto_capacity.advance_clock(get_settings().limit_lease_seconds + 60)
    # Then reconciliation finds it expired, reclaims it, and the pool counts nothing
    report = sync().reconciliation
    assert report is not None
    assert report.reclaimed == ["general/left-open"]
    assert leases.leases() == []
    assert usage() == 0


def test_a_lease_taken_after_the_clock_moved_keeps_its_instance_in_flight(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the emulator's clock a day ahead of the wall clock
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.advance_clock(DAY)
    # When a worker dies right after CreateFleet launched 1 instance (its lease stays open, in
    # flight), and the sync reconciles before the lease expires
    killed_after_create_fleet(cloud, launch_request("in-flight", nodePool="general"), monkeypatch)
    assert len(cloud.managed_instances()) == 1
    report = sync().reconciliation
    # Then the lease is live: its instance is in flight, counted once (by the lease), not
    # adopted beside it (usage 2 for 1 instance)
    assert report is not None
    assert report.reclaimed == []
    assert usage() == 1
    assert report.drift == {"general": 0}
