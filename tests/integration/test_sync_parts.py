"""Issue 35: one failing call no longer ends the sync's minute. Each part (reconciliation, the
reservations' snapshots, readiness marks, quotas, the waits' backstop, the template sweep) is
contained: its failure is logged with the part's name and its error's code, counted in
`SyncPartFailed`, named in the report, and the other parts still run. A listing token EC2 refuses
is dropped and the listing starts over, and a fresh instance id DescribeInstanceStatus does not
know yet (EC2 API Reference, "Eventual consistency in the Amazon EC2 API",
https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html) leaves the other ids'
readiness decided."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity
from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_readiness import PoolReadiness
from capacity_launcher.adapters.template_inventory import TemplateInventory
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.service.lease_settlement import settle as settle_lease
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import reserve, setup_pool
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.leases import reserve_room

EACH = Resources(cpu=Decimal(2), memory_mib=8192, instances=1)


def _failed_part_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [vars(r) for r in caplog.records if r.getMessage().startswith("sync part failed")]


def test_a_failing_reconciliation_leaves_the_snapshots_synced(
    cloud: Any, subnets: dict[str, str], image: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a targeted reservation, and EC2 refusing the reconciliation's DescribeInstances
    reservation = reserve(cloud, 2)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    moto_capacity.inject_fault("ec2:DescribeInstances", "UnauthorizedOperation")
    # When the sync runs
    report = sync()
    # Then the reconciliation failed alone: named, logged with its code, counted
    assert report.failed == ["reconciliation"]
    assert report.synced == [reservation]
    assert snapshot(reservation).snapshot.total == 2
    (line,) = _failed_part_lines(caplog)
    assert line["part"] == "reconciliation"
    assert line["code"] == "UnauthorizedOperation"


def test_a_refused_listing_token_restarts_the_listing_instead_of_failing_every_run(
    cloud: Any,
) -> None:
    # Given 3 managed templates listed 2 a page, one page a run
    for i in range(3):
        cloud.ec2.create_launch_template(
            LaunchTemplateName=f"capacity-launcher-{i}",
            LaunchTemplateData={"InstanceType": "m5.large"},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [{"Key": "capacity-launcher:managed", "Value": "true"}],
                }
            ],
        )
    inventory = TemplateInventory(client("ec2"), pages_per_run=1, page_size=2)
    first = inventory.managed()
    assert first
    # When EC2 refuses the token the last run kept (expired)
    moto_capacity.inject_fault("ec2:DescribeLaunchTemplates", "InvalidNextToken", times=1)
    # Then the run lists from the first page, and the next run goes on from there
    again = inventory.managed()
    assert [t.name for t in again] == [t.name for t in first]
    assert inventory.managed()


def test_a_fresh_instance_status_does_not_know_leaves_the_others_marked_ready(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    # Given two members running for long, and one launched a moment ago (not known yet)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"unready": "50%"})
    settings = get_settings()
    readiness = PoolReadiness(settings.state_table_name, client("dynamodb"), client("ec2"))
    leases = PoolLeaseStore(
        settings.state_table_name, settings.limit_lease_seconds, client("dynamodb"), clock=time.time
    )
    old = cloud.ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2)["Instances"]
    cloud.wait_out_consistency()
    moto_capacity.set_consistency(instance_visibility_seconds=30)
    fresh = cloud.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"]
    ids = [i["InstanceId"] for i in [*old, *fresh]]
    limits = PoolLimits.model_validate({"unready": "100%"})
    assert reserve_room(leases, "general", "r", EACH, 3, 3, limits, unleased=True) == 3
    settle_lease(leases, "general", "r", dict.fromkeys(ids, EACH))
    # When the sync marks the ready members
    marked = readiness.mark_ready("general")
    # Then the two known ones are ready, and the fresh one waits for the next sync
    assert marked == sorted(i["InstanceId"] for i in old)
    moto_capacity.advance_clock(31)
    assert readiness.mark_ready("general") == [fresh[0]["InstanceId"]]


def test_an_error_nothing_expected_in_one_part_leaves_the_others_running(
    cloud: Any, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the template sweep's listing failing in a way nothing expected
    reservation = reserve(cloud, 1)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )

    def broken(self: Any) -> Any:
        raise ClientError({"Error": {"Code": "InvalidParameterValue", "Message": "x"}}, "Any")

    monkeypatch.setattr(TemplateInventory, "managed", broken)
    # When the sync runs, it finishes, naming the part that failed
    report = sync()
    assert report.failed == ["templates"]
    assert report.synced == [reservation]
