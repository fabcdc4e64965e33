"""Karpenter's `examples/v1/multiple-arch.yaml` applied as written on the local cloud: its
EC2NodeClass's `al2023@latest` resolves to the x86_64 and the arm64 image (Karpenter's AL2023
family reads both public parameters), so its arm64 pool launches arm64 types with the arm64
image, and a pool allowing both architectures launches whichever types the fleet picks, each
with the image of its architecture, from one CreateFleet with a LaunchTemplateConfig per image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.domain.records.tags import TEMPLATE_BASIS
from capacity_launcher_cli.config_commands import read_documents, validate_steps
from tests.support.cloud import (
    Cloud,
    launch_request,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "karpenter" / "v1" / "multiple-arch.yaml"
# A pool of Karpenter's own shape that allows both architectures, on the example's class.
BOTH_ARCHITECTURES = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "any-arch"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["c5.large", "c6g.large", "m5.large", "m6g.large"],
                    },
                ],
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
            }
        }
    },
}


@pytest.fixture
def fleet_inputs(karpenter_cloud: Cloud) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    aws.client("ec2").meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: seen.append(params)
    )
    return seen


def _apply(cloud: Cloud, path: Path) -> None:
    configuration = cloud.adapters().configuration()
    for step in validate_steps(read_documents([str(path)])):
        configuration.apply(step.document, step.kept)


# The public parameters of the EKS optimized AL2023 images, one per architecture
# (https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html).
AL2023 = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/{}/standard/recommended/image_id"
# The arm64 ones of the other families Karpenter's aliases name (the same page, and
# https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id-bottlerocket.html).
ARM64_PARAMETERS = (
    AL2023.format("arm64"),
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-arm64/recommended/image_id",
    "/aws/service/bottlerocket/aws-k8s-1.33/arm64/latest/image_id",
)


def _alias_images() -> dict[str, str]:
    """Architecture -> the image al2023@latest's public parameter names in the local cloud."""
    ssm = aws.client("ssm")
    return {
        arch: ssm.get_parameter(Name=AL2023.format(arch))["Parameter"]["Value"]
        for arch in ("x86_64", "arm64")
    }


def test_the_local_cloud_serves_the_arm64_public_parameters_naming_arm64_amazon_images(
    karpenter_cloud: Cloud,
) -> None:
    ssm = aws.client("ssm")
    for name in ARM64_PARAMETERS:
        image_id = ssm.get_parameter(Name=name)["Parameter"]["Value"]
        (image,) = karpenter_cloud.ec2.describe_images(Owners=["amazon"], ImageIds=[image_id])[
            "Images"
        ]
        assert image["Architecture"] == "arm64", name
    x86 = ssm.get_parameter(Name=AL2023.format("x86_64"))["Parameter"]["Value"]
    (image,) = karpenter_cloud.ec2.describe_images(ImageIds=[x86])["Images"]
    assert image["Architecture"] == "x86_64"


def _launched(cloud: Cloud, request_id: str) -> list[dict[str, Any]]:
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    ids = [i.instance_id for i in record.instances]
    described = cloud.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return [i for r in described for i in r["Instances"]]


def _architecture(cloud: Cloud, instance_type: str) -> str:
    (info,) = cloud.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
    architectures = info["ProcessorInfo"]["SupportedArchitectures"]
    return "arm64" if "arm64" in architectures else "x86_64"


def test_the_arm64_pool_of_karpenters_multiple_arch_example_lands_arm64_types_with_the_arm64_image(
    karpenter_cloud: Cloud,
) -> None:
    cloud = karpenter_cloud
    # Given Karpenter's multiple-arch example, as written
    _apply(cloud, EXAMPLE)
    images = _alias_images()
    assert images["x86_64"] != images["arm64"]

    # When a request for each of its pools arrives
    assert cloud.send(launch_request("arm", nodePool="arm64", count=2)) == []
    assert cloud.send(launch_request("amd", nodePool="amd64", count=2)) == []

    # Then the arm64 pool's instances are arm64 types running the arm64 image
    for instance in _launched(cloud, "arm"):
        assert _architecture(cloud, instance["InstanceType"]) == "arm64", instance
        assert instance["ImageId"] == images["arm64"]
    # And the amd64 pool's are x86_64 types running the x86_64 image
    for instance in _launched(cloud, "amd"):
        assert _architecture(cloud, instance["InstanceType"]) == "x86_64", instance
        assert instance["ImageId"] == images["x86_64"]


def test_a_pool_allowing_both_architectures_launches_each_type_with_its_image(
    karpenter_cloud: Cloud, fleet_inputs: list[dict[str, Any]]
) -> None:
    cloud = karpenter_cloud
    # Given the example's class and a pool allowing amd64 and arm64 types
    _apply(cloud, EXAMPLE)
    applied = REGISTRY.read(BOTH_ARCHITECTURES)
    cloud.adapters().configuration().apply(applied.conversion.hub, applied.conversion.kept or None)
    images = _alias_images()

    # When a request for it arrives
    assert cloud.send(launch_request("any", nodePool="any-arch", count=4)) == []

    # Then one CreateFleet offered both architectures, a LaunchTemplateConfig per image
    (sent,) = fleet_inputs
    configs = sent["LaunchTemplateConfigs"]
    assert len(configs) == 2
    by_template = {
        c["LaunchTemplateSpecification"]["LaunchTemplateName"]: {
            o["InstanceType"] for o in c["Overrides"]
        }
        for c in configs
    }
    assert sorted(by_template.values(), key=sorted) == [
        {"c5.large", "m5.large"},
        {"c6g.large", "m6g.large"},
    ]
    for name, types in by_template.items():
        (version,) = cloud.ec2.describe_launch_template_versions(LaunchTemplateName=name)[
            "LaunchTemplateVersions"
        ]
        architecture = {_architecture(cloud, t) for t in types}
        assert version["LaunchTemplateData"]["ImageId"] == images[architecture.pop()]
    # And both templates carry the class's one lifecycle basis: the sweep supersedes neither
    listed = cloud.ec2.describe_launch_templates(LaunchTemplateNames=sorted(by_template))
    bases = {
        t["LaunchTemplateName"]: {x["Key"]: x["Value"] for x in t["Tags"]}[TEMPLATE_BASIS]
        for t in listed["LaunchTemplates"]
    }
    assert len(bases) == 2 and len(set(bases.values())) == 1
    # And every instance runs the image of its type's architecture
    launched = _launched(cloud, "any")
    assert len(launched) == 4
    for instance in launched:
        assert instance["ImageId"] == images[_architecture(cloud, instance["InstanceType"])]
