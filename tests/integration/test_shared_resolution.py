"""Issue 38: fresh launcher containers share the sync's resolution of a NodeClass (subnets,
security groups, images, instance types and where they are offered) instead of each making a
Describe per kind; a class applied since, a resolution too old or none at all sends a container
back to EC2, and a class EC2 refuses now is not shared (domain/capacity/shared_resolution.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws, shared_resolutions
from capacity_launcher.domain.capacity.shared_resolution import MAX_AGE_SECONDS, Resolution
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.resolution_sync import ResolutionReport
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, current, launch_request

DESCRIBES = (
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeImages",
    "DescribeInstanceTypes",
    "DescribeInstanceTypeOfferings",
)


def _resolve() -> ResolutionReport:
    """The sync's resolutions part alone, as the minute's run builds it (with the summary of
    open reservations its list gives: these tests' account has none)."""
    return current().adapters().resolution_sync().run(frozenset())


def _stored(node_class: str) -> dict[str, dict[str, Any]]:
    """The class's resolution items as the table holds them, by sort key."""
    items = aws.client("dynamodb").query(
        TableName=current().adapters().settings.state_table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": shared_resolutions.partition(node_class)}},
    )["Items"]
    return {item["sk"]["S"]: item for item in items}


def _describes(calls: Counter[str]) -> dict[str, int]:
    return {op: calls[op] for op in DESCRIBES if calls[op]}


def _launch_fresh(cloud: Cloud, request_id: str) -> Any:
    """One request served by a new launcher container (its caches empty)."""
    failed = cloud.send(launch_request(request_id, nodePool="general"), batch=cloud.fresh_batch())
    assert not failed, failed
    record = cloud.record(request_id)
    assert record is not None
    return record


def _pool(cloud: Cloud, subnets: dict[str, str], image: str, zone: str = "us-east-1a") -> None:
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=("m5.large", "c5.large"),
        zones=(zone,),
    )


def test_fresh_containers_share_the_sync_s_resolution(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    # Given a NodeClass the sync has resolved
    _pool(cloud, subnets, image)
    report = sync()
    assert report.failed == []
    ec2_calls.clear()
    # When five fresh containers each serve a request
    records = [_launch_fresh(cloud, f"shared-{n}") for n in range(5)]
    # Then each launched, and none asked EC2 for subnets, images or instance types
    assert [r.status for r in records] == [RequestStatus.FULFILLED] * 5
    assert _describes(ec2_calls) == {}
    assert {i["SubnetId"] for i in cloud.managed_instances()} == {subnets["us-east-1a"]}


def test_the_sync_leaves_a_fresh_resolution_alone(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    _pool(cloud, subnets, image)
    sync()
    ec2_calls.clear()
    moto_capacity.advance_clock(60)
    # A minute later nothing changed: the resolution is kept, no Describe is made for it
    report = _resolve()
    assert report.kept == ["standard"]
    assert "DescribeImages" not in ec2_calls
    # Two minutes after, it is resolved again
    moto_capacity.advance_clock(60)
    assert _resolve().resolved == ["standard"]


def test_a_class_applied_since_is_not_served_the_older_resolution(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    # Given the sync's resolution of the class over us-east-1a
    _pool(cloud, subnets, image, "us-east-1a")
    sync()
    # When the class is applied again over us-east-1b, before the sync runs again
    _pool(cloud, subnets, image, "us-east-1b")
    ec2_calls.clear()
    record = _launch_fresh(cloud, "applied-since")
    # Then the container resolved the class as it is now, itself, and launched in us-east-1b
    assert record.status == RequestStatus.FULFILLED
    assert ec2_calls["DescribeSubnets"] >= 1
    assert {i["SubnetId"] for i in cloud.managed_instances()} == {subnets["us-east-1b"]}


def test_a_missing_resolution_falls_back_to_ec2(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    # Given no sync has run
    _pool(cloud, subnets, image)
    record = _launch_fresh(cloud, "no-sync")
    # Then the container asked EC2 itself, and launched
    assert record.status == RequestStatus.FULFILLED
    assert ec2_calls["DescribeSubnets"] >= 1
    assert ec2_calls["DescribeInstanceTypes"] >= 1


def test_a_resolution_past_its_bound_falls_back_to_ec2(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    _pool(cloud, subnets, image)
    sync()
    moto_capacity.advance_clock(MAX_AGE_SECONDS + 1)
    ec2_calls.clear()
    record = _launch_fresh(cloud, "too-old")
    assert record.status == RequestStatus.FULFILLED
    assert ec2_calls["DescribeSubnets"] >= 1


def test_a_deleted_subnet_is_not_shared_and_is_refused_loudly(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a class over a subnet of its own, resolved by the sync
    vpc = cloud.ec2.describe_subnets(SubnetIds=[subnets["us-east-1a"]])["Subnets"][0]["VpcId"]
    own = cloud.ec2.create_subnet(
        VpcId=vpc, CidrBlock="172.31.250.0/24", AvailabilityZone="us-east-1a"
    )["Subnet"]["SubnetId"]
    _pool(cloud, {"us-east-1a": own}, image)
    sync()
    # When the subnet is deleted and the sync resolves the class again
    cloud.ec2.delete_subnet(SubnetId=own)
    moto_capacity.advance_clock(121)
    report = _resolve()
    # Then the sync shares nothing for it, and a fresh container is refused by EC2, named
    assert "standard" in report.refused
    record = _launch_fresh(cloud, "subnet-gone")
    assert record.status == RequestStatus.FAILED
    assert record.launched == 0
    assert any("InvalidSubnetID" in e.code for e in record.errors), record.errors


def test_a_class_resolved_again_to_the_same_is_stored_alike_without_encoding_it_again(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the sync's container, which resolved the class
    _pool(cloud, subnets, image)
    resolutions = current().adapters().resolution_sync()
    assert resolutions.run(frozenset()).resolved == ["standard"]
    before = _stored("standard")
    encoded: list[Resolution] = []
    encode = shared_resolutions.encode
    monkeypatch.setattr(shared_resolutions, "encode", lambda r: encoded.append(r) or encode(r))
    # When it is due again, and EC2 says what it said
    moto_capacity.advance_clock(121)
    assert resolutions.run(frozenset()).resolved == ["standard"]
    # Then its document was not encoded again: the same parts, the head only stamped anew
    assert encoded == []
    after = _stored("standard")
    assert {k: v for k, v in after.items() if k != "Head"} == {
        k: v for k, v in before.items() if k != "Head"
    }
    changed = {k for k in after["Head"] if after["Head"][k] != before["Head"][k]}
    assert changed == {"resolvedAt"}
    # And once what it resolves to changes (an open reservation now), it is encoded again
    moto_capacity.advance_clock(1)
    opened = frozenset({("m5.large", "us-east-1a")})
    assert resolutions.run(opened).resolved == ["standard"]
    assert [r.open_reservations for r in encoded] == [opened]
    assert _stored("standard")["Head"]["digest"] != before["Head"]["digest"]
