"""Issue 12.3: the fleet adapter waits out EC2's eventual consistency on fresh instance ids.

EC2 API Reference, "Eventual consistency in the Amazon EC2 API"
(https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from capacity_launcher.adapters.fleet import VISIBILITY_BACKOFF_SECONDS, Fleet
from capacity_launcher.domain.errors import LaunchFailed

IDS = ["i-0123456789abcdef0"]


@pytest.fixture
def waits() -> list[float]:
    """The waits the adapter asked for (its `pause`), instead of sleeping them."""
    return []


def _ec2() -> tuple[Any, Stubber]:
    client = boto3.client(
        "ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, Stubber(client)


def _not_found(stubber: Stubber, operation: str) -> None:
    stubber.add_client_error(
        operation,
        service_error_code="InvalidInstanceID.NotFound",
        service_message=f"The instance ID '{IDS[0]}' does not exist",
    )


def test_terminate_retries_a_fresh_id_until_ec2_knows_it(waits: list[float]) -> None:
    # Given EC2 does not know the id for two tries
    ec2, stubber = _ec2()
    _not_found(stubber, "terminate_instances")
    _not_found(stubber, "terminate_instances")
    stubber.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": IDS})
    # When it is terminated
    with stubber:
        Fleet(ec2, waits.append).terminate(IDS)
        # Then the third try went through, after two jittered waits within the schedule
        stubber.assert_no_pending_responses()
    assert len(waits) == 2
    assert all(d / 2 <= w <= d for w, d in zip(waits, VISIBILITY_BACKOFF_SECONDS, strict=False))


def test_terminate_gives_up_after_the_bound_with_the_ec2_error(waits: list[float]) -> None:
    ec2, stubber = _ec2()
    for _ in range(len(VISIBILITY_BACKOFF_SECONDS) + 1):
        _not_found(stubber, "terminate_instances")
    # then the ids are looked up: EC2 lists none of them yet, and fresh ones are not gone
    stubber.add_response("describe_instances", {"Reservations": []})
    with stubber, pytest.raises(LaunchFailed) as failed:
        Fleet(ec2, waits.append).terminate(IDS, fresh=True)  # just launched: not taken for gone
    assert failed.value.code == "InvalidInstanceID.NotFound"
    assert len(waits) == len(VISIBILITY_BACKOFF_SECONDS)


def test_tags_on_ids_that_stay_unknown_are_given_up_without_failing_the_launch(
    waits: list[float],
) -> None:
    ec2, stubber = _ec2()
    for _ in range(len(VISIBILITY_BACKOFF_SECONDS) + 1):
        _not_found(stubber, "create_tags")
    with stubber:
        untagged = Fleet(ec2, waits.append).tag(IDS, {"capacity-launcher:request-id": "r-1"})
        stubber.assert_no_pending_responses()
    assert len(waits) == len(VISIBILITY_BACKOFF_SECONDS)
    # and the ids are reported, for the metric and the sync's reconciliation to tag them later
    assert untagged == IDS


def test_tags_that_go_through_leave_nothing_untagged(waits: list[float]) -> None:
    ec2, stubber = _ec2()
    _not_found(stubber, "create_tags")
    stubber.add_response("create_tags", {})
    with stubber:
        assert Fleet(ec2, waits.append).tag(IDS, {"capacity-launcher:request-id": "r-1"}) == []
    assert len(waits) == 1


def test_tags_go_1000_instances_a_call_and_only_a_refused_calls_ids_are_left_untagged(
    waits: list[float],
) -> None:
    # Given 1500 instances, the first 1000 known to EC2 and the last 500 not (CreateTags takes
    # at most 1000 resource ids a call)
    many = [f"i-{n:017x}" for n in range(1500)]
    ec2, stubber = _ec2()
    tags = [{"Key": "capacity-launcher:request-id", "Value": "r-1"}]
    stubber.add_response("create_tags", {}, {"Resources": many[:1000], "Tags": tags})
    for _ in range(len(VISIBILITY_BACKOFF_SECONDS) + 1):
        _not_found(stubber, "create_tags")
    # When they are tagged
    with stubber:
        untagged = Fleet(ec2, waits.append).tag(many, {"capacity-launcher:request-id": "r-1"})
        stubber.assert_no_pending_responses()
    # Then only the refused call's ids are reported untagged
    assert untagged == many[1000:]


def test_other_tag_errors_are_not_retried(waits: list[float]) -> None:
    ec2, stubber = _ec2()
    stubber.add_client_error("create_tags", service_error_code="UnauthorizedOperation")
    with stubber, pytest.raises(LaunchFailed):
        Fleet(ec2, waits.append).tag(IDS, {"k": "v"})
    assert waits == []


def _launched_never_described(
    lifecycle: str, instance_type: str, zone: str, waits: list[float]
) -> Any:
    """CreateFleet launched one instance (answered with `lifecycle`) that DescribeInstances never
    lists; the landing the adapter reports for it."""
    ec2, stubber = _ec2()
    overrides = {"InstanceType": instance_type, "SubnetId": "subnet-1", "AvailabilityZone": zone}
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-1",
            "Instances": [
                {
                    "LaunchTemplateAndOverrides": {"Overrides": overrides},
                    "Lifecycle": lifecycle,
                    "InstanceIds": IDS,
                    "InstanceType": instance_type,
                }
            ],
            "Errors": [],
        },
    )
    for _ in range(len(VISIBILITY_BACKOFF_SECONDS) + 1):
        stubber.add_response("describe_instances", {"Reservations": []})
    fleet = Fleet(ec2, waits.append)
    with stubber:
        result = fleet.create(
            {"LaunchTemplateConfigs": [], "TargetCapacitySpecification": {"TotalTargetCapacity": 1}}
        )
        (landing,) = fleet.describe(result.instance_ids)
    assert result.instance_ids == tuple(IDS)
    return landing


def test_describe_falls_back_to_the_create_fleet_answer(waits: list[float]) -> None:
    landing = _launched_never_described("spot", "m5.large", "us-east-1b", waits)
    # Then the instance is reported from what CreateFleet said
    assert (landing.instance_type, landing.zone, landing.capacity_type) == (
        "m5.large",
        "us-east-1b",
        "spot",
    )
    assert landing.capacity_reservation_id is None
    assert len(waits) == len(VISIBILITY_BACKOFF_SECONDS)


@pytest.mark.parametrize(
    ("lifecycle", "capacity_type"),
    [
        ("capacity-block", "reserved"),
        ("interruptible-capacity-reservation", "reserved"),
        ("on-demand", "on-demand"),
    ],
)
def test_the_create_fleet_lifecycle_of_reserved_markets_reads_as_reserved(
    waits: list[float], lifecycle: str, capacity_type: str
) -> None:
    """botocore's CreateFleetInstance.Lifecycle (InstanceLifecycle: spot, on-demand,
    interruptible-capacity-reservation, capacity-block): an instance of a block or an
    interruptible reservation, reported from the CreateFleet answer, is reserved capacity."""
    landing = _launched_never_described(lifecycle, "p5.48xlarge", "us-east-1a", waits)
    assert landing.capacity_type == capacity_type
