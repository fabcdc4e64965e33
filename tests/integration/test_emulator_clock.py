"""Issue 34, item 6: the service's stores tell the time by the composition root's clock (the
emulator's locally), so advancing the emulator's clock (`POST /moto-capacity/clock`, what
`local up` offers) expires leases as it expires everything else. The lease store read the wall
clock: a lease stamped on it outlived an advance, and reconciliation, judging it on the
emulator's, counted its instance beside it."""

from __future__ import annotations

from datetime import datetime

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.apis.priority_classes import parse_priority_class
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.settings import get_settings
from local_cloud.documents import capacity_quota
from moto_capacity.core.clock import CLOCK
from tests.integration.test_accounting import usage
from tests.integration.test_launch_into_reservations import killed_after_create_fleet, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room

ONE = Resources(instances=1)
DAY = 24 * 3600
PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def stamped(kind: str, name: str) -> datetime:
    """When the state table says a document was last applied (its `updatedAt`)."""
    item = aws.client("dynamodb").get_item(
        TableName=get_settings().state_table_name,
        Key={"pk": {"S": kind}, "sk": {"S": name}},
    )["Item"]
    return datetime.fromisoformat(item["updatedAt"]["S"])


def on_the_emulator_clock(moment: datetime) -> bool:
    return abs((moment - CLOCK.now()).total_seconds()) < 60


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


def a_day_later_a_pool_and_its_quota(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """The emulator's clock moved a day ahead of the wall clock, then a NodeClass, a NodePool
    and a CapacityQuota applied."""
    moto_capacity.advance_clock(DAY)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(capacity_quota("team-a", "general", {"instances": "2"}))


def test_documents_applied_after_the_clock_moved_are_stamped_on_it(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # When a NodeClass, a NodePool, a CapacityQuota and a PriorityClass are applied after the
    # emulator's clock moved a day ahead
    a_day_later_a_pool_and_its_quota(cloud, subnets, image)
    cloud.adapters().configuration().apply(parse_priority_class(PRIORITY_CLASS))
    # Then each is stamped on the emulator's clock, as everything else the service writes
    for kind, name in [
        ("NodeClass", "standard"),
        ("NodePool", "general"),
        ("CapacityQuota", "team-a"),
        ("PriorityClass", "high"),
    ]:
        assert on_the_emulator_clock(stamped(kind, name)), (kind, stamped(kind, name))


def test_a_quota_status_the_sync_has_not_written_is_observed_on_the_emulator_clock(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the emulator's clock a day ahead, and a quota applied since the last sync
    a_day_later_a_pool_and_its_quota(cloud, subnets, image)
    # When `get quotas` computes its status (the sync has not stored one yet)
    status = cloud.adapters().queries().quota_status_of()["team-a"]
    # Then it was observed on the clock the sync stamps its statuses with
    observed = datetime.fromisoformat(status["observedAt"].replace("Z", "+00:00"))
    assert on_the_emulator_clock(observed), status["observedAt"]
