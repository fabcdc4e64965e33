"""Red team 2 F7: the image's architecture narrows the instance types a pool may launch.

EC2 API Reference: an AMI (Image.Architecture) runs only on a type whose
ProcessorInfo.SupportedArchitectures include it; CreateFleet refuses every other override with
InvalidParameterValue. Karpenter derives `kubernetes.io/arch` from the AMI the same way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import moto_capacity
from capacity_launcher.domain.capacity.image_architectures import ARCHITECTURE_MISMATCH
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, capacity_type, instance_type, launch_request, node_pool


def _arm64_image() -> str:
    return moto_capacity.register_image("us-east-1", "Linux/UNIX", architecture="arm64")


def test_an_arm64_image_lands_on_the_arm64_type_its_pool_allows(
    cloud: Cloud, subnets: dict[str, str], ec2_calls: Counter[str]
) -> None:
    # Given a pool allowing x86_64-only c5.large and arm64 m6g.large, and an arm64 image
    image = _arm64_image()
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large", "m6g.large")
    )
    # When two requests arrive, one after the other
    assert cloud.send(launch_request("arm-1", nodePool="general")) == []
    assert cloud.send(launch_request("arm-2", nodePool="general")) == []
    # Then both run on m6g.large, with no error on their records
    for request_id in ("arm-1", "arm-2"):
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED, record
        assert [i.instance_type for i in record.instances] == ["m6g.large"]
        assert record.errors == []
    # And the image was described once for both (a warm container keeps its architecture)
    assert ec2_calls["DescribeImages"] == 1


def test_an_arm64_image_in_a_pool_of_x86_types_fails_naming_the_image_and_architecture(
    cloud: Cloud, subnets: dict[str, str]
) -> None:
    # Given a pool allowing only x86_64 types, and an arm64 image
    image = _arm64_image()
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large", "m5.large"))
    # When a request arrives
    handed_back = cloud.send(launch_request("arm-x86", nodePool="general"))
    # Then it ends now, Failed, naming the image, its architecture and the types; nothing runs
    assert handed_back == []
    record = cloud.record("arm-x86")
    assert record is not None and record.status is RequestStatus.FAILED, record
    (error,) = record.errors
    assert error.code == ARCHITECTURE_MISMATCH
    assert f"NodeClass standard: spec.imageId {image} is built for arm64" in error.message
    assert "c5.large (amd64), m5.large (amd64)" in error.message
    assert "kubernetes.io/arch is arm64" in error.message
    assert cloud.managed_instances() == []


def test_a_request_naming_no_pool_passes_over_a_pool_whose_image_its_types_cannot_run(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a heavier pool of x86 types whose NodeClass's image is arm64, and a lighter pool
    # (an x86_64 image) that can serve
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool="fallback", klass="x86")
    setup_pool(
        cloud, subnets, _arm64_image(), capacity_types=("on-demand",), pool="arm", klass="arm"
    )
    requirements = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("arm", "arm", weight=10, requirements=requirements))
    # When a request naming no pool arrives
    assert cloud.send(launch_request("arch-no-pool")) == []
    # Then the next pool serves it, and its record says why the first passed it over
    record = cloud.record("arch-no-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "fallback"
    [passed] = [e for e in record.errors if e.code == "NodePoolPassedOver"]
    assert passed.message.startswith("nodePool arm: NodeClass arm: spec.imageId"), passed


def test_a_mac_type_is_left_out_as_unable_to_run_an_x86_64_image(
    cloud: Cloud, subnets: dict[str, str], image: str, fleet_inputs: list[dict[str, Any]]
) -> None:
    """Issue 34 item 5: DescribeInstanceTypes lists mac2.metal's architecture as arm64_mac
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html), on which
    EC2 runs only Mac images; a Mac type was taken for amd64 (its architecture left out) and
    CreateFleet was asked to launch it with an x86_64 image."""
    # Given a pool allowing only the Mac type, and an x86_64 image
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("mac2.metal",))
    # When a request arrives
    assert cloud.send(launch_request("mac", nodePool="general")) == []
    # Then it fails naming the type's own architecture, and no CreateFleet was sent
    record = cloud.record("mac")
    assert record is not None and record.status is RequestStatus.FAILED, record
    (error,) = record.errors
    assert error.code == ARCHITECTURE_MISMATCH
    assert "mac2.metal (arm64_mac)" in error.message
    assert fleet_inputs == []


def test_a_broad_pool_launches_beside_its_mac_types_without_offering_them(
    cloud: Cloud, subnets: dict[str, str], image: str, fleet_inputs: list[dict[str, Any]]
) -> None:
    # Given a pool allowing a Mac type and an x86 type, and an x86_64 image
    types = ("mac2.metal", "m5.large")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=types)
    # When a request arrives
    assert cloud.send(launch_request("beside-mac", nodePool="general")) == []
    # Then it runs on m5.large, no error on its record, and the fleet never offered the Mac type
    record = cloud.record("beside-mac")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert [i.instance_type for i in record.instances] == ["m5.large"]
    assert record.errors == []
    offered = {
        o["InstanceType"]
        for sent in fleet_inputs
        for c in sent["LaunchTemplateConfigs"]
        for o in c["Overrides"]
    }
    assert offered == {"m5.large"}
