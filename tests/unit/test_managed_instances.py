"""`Fleet.find_managed` hands the service typed records, not DescribeInstances' dictionaries.

EC2 API Reference, DescribeInstances
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.stub import ANY, Stubber

from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.domain.capacity.fleet import ManagedInstance

LAUNCHED = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)


def _ec2() -> tuple[Any, Stubber]:
    client = boto3.client(
        "ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, Stubber(client)


def _described(*instances: dict[str, Any]) -> dict[str, Any]:
    return {"Reservations": [{"Instances": list(instances)}]}


def test_each_managed_instance_is_a_record_of_what_the_callers_read() -> None:
    ec2, stubber = _ec2()
    reserved = {
        "InstanceId": "i-00000000000000001",
        "InstanceType": "m5.large",
        "State": {"Code": 16, "Name": "running"},
        "Placement": {"AvailabilityZone": "us-east-1a"},
        "CapacityReservationId": "cr-0123456789abcdef0",
        "LaunchTime": LAUNCHED,
        "Tags": [{"Key": "capacity-launcher:request-id", "Value": "r-1"}],
    }
    spot = {
        "InstanceId": "i-00000000000000002",
        "InstanceType": "c5.xlarge",
        "State": {"Code": 48, "Name": "terminated"},
        "Placement": {"AvailabilityZone": "us-east-1b"},
        "InstanceLifecycle": "spot",
    }
    bare = {"InstanceId": "i-00000000000000003", "InstanceType": "t3.micro"}
    stubber.add_response("describe_instances", _described(reserved, spot, bare), {"Filters": ANY})
    with stubber:
        found = Fleet(ec2).find_managed({"capacity-launcher:node-pool": "general"})
        stubber.assert_no_pending_responses()
    assert found == [
        ManagedInstance(
            instance_id="i-00000000000000001",
            instance_type="m5.large",
            state="running",
            zone="us-east-1a",
            capacity_type="reserved",
            capacity_reservation_id="cr-0123456789abcdef0",
            launched_at=LAUNCHED,
            tags={"capacity-launcher:request-id": "r-1"},
        ),
        ManagedInstance(
            instance_id="i-00000000000000002",
            instance_type="c5.xlarge",
            state="terminated",
            zone="us-east-1b",
            capacity_type="spot",
            capacity_reservation_id=None,
            launched_at=None,
        ),
        # EC2 says nothing of its state or zone: the record says so, it invents nothing
        ManagedInstance(
            instance_id="i-00000000000000003",
            instance_type="t3.micro",
            state=None,
            zone=None,
            capacity_type="on-demand",
            capacity_reservation_id=None,
            launched_at=None,
        ),
    ]


def test_find_managed_filters_on_the_managed_tag_and_the_tags_asked() -> None:
    ec2, stubber = _ec2()
    expected = {
        "Filters": [
            {"Name": "tag:capacity-launcher:managed", "Values": ["true"]},
            {"Name": "tag:capacity-launcher:request-id", "Values": ["r-1"]},
        ]
    }
    stubber.add_response("describe_instances", _described(), expected)
    with stubber:
        assert Fleet(ec2).find_managed({"capacity-launcher:request-id": "r-1"}) == []
        stubber.assert_no_pending_responses()
