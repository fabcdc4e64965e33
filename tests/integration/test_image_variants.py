"""Issue 35: an `al2023@latest` EC2NodeClass launches each instance type with the image variant
built for it, as Karpenter resolves an alias: NVIDIA GPU types (g5, p5) the NVIDIA image,
Inferentia and Trainium types (inf2, trn1) the Neuron image, the others (c5; m7g on arm64) the
standard image of their architecture. Its status lists each image with its requirements.

The public parameters are AWS's (https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html:
`/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<standard|nvidia|neuron>/
recommended/image_id`), served by the local cloud (local_cloud/karpenter.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.startup import system_clock
from tests.integration.test_multiple_architectures import _apply, _launched
from tests.support.cloud import Cloud, launch_request

EXAMPLE = Path(__file__).parents[2] / "examples" / "karpenter" / "v1" / "multiple-arch.yaml"
AL2023 = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/{}/{}/recommended/image_id"
# Instance type -> (architecture, variant) of the image Karpenter launches it with.
EXPECTED = {
    "g5.xlarge": ("x86_64", "nvidia"),
    "p5.48xlarge": ("x86_64", "nvidia"),
    "inf2.xlarge": ("x86_64", "neuron"),
    "trn1.2xlarge": ("x86_64", "neuron"),
    "c5.large": ("x86_64", "standard"),
    "m7g.large": ("arm64", "standard"),
    "g5g.xlarge": ("arm64", "nvidia"),
}


def _pool(name: str, instance_type: str) -> dict[str, Any]:
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "requirements": requirements,
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                }
            }
        },
    }


def _variant_images() -> dict[tuple[str, str], str]:
    ssm = aws.client("ssm")
    return {
        key: ssm.get_parameter(Name=AL2023.format(*key))["Parameter"]["Value"]
        for key in set(EXPECTED.values())
    }


def test_the_local_cloud_serves_each_al2023_variant_as_a_distinct_image_of_its_architecture(
    karpenter_cloud: Cloud,
) -> None:
    images = _variant_images()
    # The standard and NVIDIA images of both architectures, the Neuron one of x86_64
    assert len(set(images.values())) == len(images) == 5
    for (architecture, _), image_id in images.items():
        (image,) = karpenter_cloud.ec2.describe_images(ImageIds=[image_id])["Images"]
        assert image["Architecture"] == architecture


@pytest.mark.parametrize("instance_type", sorted(EXPECTED))
def test_an_al2023_alias_launches_each_type_with_the_variant_built_for_it(
    karpenter_cloud: Cloud, instance_type: str
) -> None:
    cloud = karpenter_cloud
    # Given Karpenter's example EC2NodeClass (al2023@latest) and a pool of one type
    _apply(cloud, EXAMPLE)
    applied = REGISTRY.read(_pool("one-type", instance_type))
    cloud.adapters().configuration().apply(applied.conversion.hub, applied.conversion.kept or None)
    # When a request for it arrives
    assert cloud.send(launch_request("variant", nodePool="one-type")) == []
    # Then the instance runs the image of its type's architecture and variant
    (instance,) = _launched(cloud, "variant")
    assert instance["InstanceType"] == instance_type
    assert instance["ImageId"] == _variant_images()[EXPECTED[instance_type]], instance_type
    record = cloud.record("variant")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert record.errors == []


def test_the_ec2nodeclass_status_lists_each_variant_with_its_requirements(
    karpenter_cloud: Cloud,
) -> None:
    from capacity_launcher.adapters.launch_templates import LaunchTemplates
    from capacity_launcher.domain.apis.karpenter.status import (
        Resolved,
        ResolvedNodeClass,
        ec2nodeclass_status,
    )

    cloud = karpenter_cloud
    _apply(cloud, EXAMPLE)
    (node_class,) = [
        c for c in cloud.adapters().config_store().node_classes() if c.name == "default"
    ]
    assert isinstance(node_class, NodeClass)
    images = LaunchTemplates(cloud.ec2, aws.client("ssm"), clock=system_clock).image_architectures(
        node_class
    )
    assert images is not None
    status = ec2nodeclass_status(
        ResolvedNodeClass(images=Resolved([(i, "") for i in images.images])), "now"
    )
    by_id = {
        (a["id"], a["requirements"][-1]["key"], a["requirements"][-1]["operator"]): a
        for a in status["amis"]
    }
    found = _variant_images()
    gpu, accelerator = (
        "karpenter.k8s.aws/instance-gpu-count",
        "karpenter.k8s.aws/instance-accelerator-count",
    )
    assert {
        (found[("x86_64", "standard")], gpu, "DoesNotExist"),
        (found[("arm64", "standard")], gpu, "DoesNotExist"),
        (found[("x86_64", "nvidia")], gpu, "Exists"),
        (found[("arm64", "nvidia")], gpu, "Exists"),
        (found[("x86_64", "neuron")], accelerator, "Exists"),
    } == set(by_id)
    standard = by_id[(found[("arm64", "standard")], gpu, "DoesNotExist")]
    assert standard["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        {"key": accelerator, "operator": "DoesNotExist"},
        {"key": gpu, "operator": "DoesNotExist"},
    ]
