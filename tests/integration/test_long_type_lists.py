"""Issue 35: a NodePool may pin as many instance types as Karpenter accepts (any number of values),
and every call it leads to stays within what EC2 accepts: `DescribeInstanceTypes` takes at most
100 `InstanceTypes` a call (EC2 API Reference, DescribeInstanceTypes:
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html), so more are
asked for in several calls. The session's recorder (tests/conftest.py) fails any test one of
whose calls goes over a maximum of the API; these tests make sure the long lists are exercised."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import Cloud, launch_request


def offered_types(cloud: Cloud, count: int, including: str = "m5.large") -> tuple[str, ...]:
    """`count` instance types offered in ZONE, `including` one of them."""
    pages = cloud.ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "location", "Values": [ZONE]}]
    )
    names = sorted({o["InstanceType"] for p in pages for o in p["InstanceTypeOfferings"]})
    chosen = [including, *[n for n in names if n != including][: count - 1]]
    assert len(chosen) == count, f"the emulator offers {len(names)} types in {ZONE}"
    return tuple(chosen)


def type_lookups(cloud: Cloud) -> list[dict[str, Any]]:
    """Every DescribeInstanceTypes input the service sends from now on."""
    seen: list[dict[str, Any]] = []
    aws.client("ec2").meta.events.register(
        "provide-client-params.ec2.DescribeInstanceTypes",
        lambda params, **_: seen.append(dict(params)),
    )
    return seen


def test_a_pool_of_800_instance_types_stores_and_launches_with_chunked_lookups(
    cloud, subnets, image
):
    # Given a pool pinning 800 instance types (Karpenter takes any number of values)
    types = offered_types(cloud, 800)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=types)
    lookups = type_lookups(cloud)
    # When a request names the pool
    cloud.send(launch_request("r-800-types", nodePool="general"))
    # Then it launches, its types' facts asked for at most 100 names a call, all 800 asked
    record = cloud.record("r-800-types")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    asked = [len(call.get("InstanceTypes", [])) for call in lookups]
    assert asked and max(asked) <= 100, asked
    assert sum(asked) == 800


def test_a_request_narrowing_to_more_than_100_types_launches(cloud, subnets, image):
    # Given a pool of 150 types and a request pinning 120 of them
    types = offered_types(cloud, 150)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=types)
    requirement = {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": list(types[:120]),
    }
    # When it is launched
    cloud.send(launch_request("r-120-types", nodePool="general", requirements=[requirement]))
    # Then it is fulfilled (no call EC2 would refuse: the recorder fails the test otherwise)
    record = cloud.record("r-120-types")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
