"""Issue 35: an alias names an image per architecture and variant, as Karpenter's AMI families
read them (pkg/providers/amifamily), from AWS's public parameters
(https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html and
https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id-bottlerocket.html); each type
launches the variant built for it. Issue 34 item 5: Mac types are neither amd64 nor arm64."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.adapters.instance_types import instance_type_info
from capacity_launcher.domain.apis.karpenter.images import accelerated_parameters
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.capacity.image_architectures import (
    ImageArchitecture,
    ImageArchitectures,
)
from capacity_launcher.domain.capacity.requirements import (
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_NAME,
)

K8S = "/aws/service/eks/optimized-ami/1.33"


def _raw(name: str, architecture: str = "x86_64", **facts: Any) -> dict[str, Any]:
    """A DescribeInstanceTypes item with the facts read here."""
    return {
        "InstanceType": name,
        "ProcessorInfo": {"SupportedArchitectures": [architecture]},
        "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        **facts,
    }


def _gpus(maker: str = "NVIDIA") -> dict[str, Any]:
    return {"GpuInfo": {"Gpus": [{"Count": 1, "Manufacturer": maker, "Name": "A10G"}]}}


def _neuron(name: str) -> dict[str, Any]:
    return {"NeuronInfo": {"NeuronDevices": [{"Count": 1, "Name": name}]}}


TYPES = {
    "c5.large": instance_type_info(_raw("c5.large")),
    "m7g.large": instance_type_info(_raw("m7g.large", "arm64")),
    "g5.xlarge": instance_type_info(_raw("g5.xlarge", **_gpus())),
    "g5g.xlarge": instance_type_info(_raw("g5g.xlarge", "arm64", **_gpus())),
    "inf2.xlarge": instance_type_info(_raw("inf2.xlarge", **_neuron("Inferentia2"))),
    "trn1.2xlarge": instance_type_info(_raw("trn1.2xlarge", **_neuron("Trainium"))),
    "inf1.xlarge": instance_type_info(
        _raw(
            "inf1.xlarge",
            InferenceAcceleratorInfo={
                "Accelerators": [{"Count": 1, "Manufacturer": "AWS", "Name": "Inferentia"}]
            },
        )
    ),
    "mac1.metal": instance_type_info(_raw("mac1.metal", "x86_64_mac")),
    "mac2.metal": instance_type_info(_raw("mac2.metal", "arm64_mac")),
}
IMAGES = ImageArchitectures(
    (
        ImageArchitecture("ami-0000000000000x86", "x86_64", "standard"),
        ImageArchitecture("ami-0000000000000arm", "arm64", "standard"),
        ImageArchitecture("ami-00000000000nvx86", "x86_64", "nvidia"),
        ImageArchitecture("ami-00000000000nvarm", "arm64", "nvidia"),
        ImageArchitecture("ami-00000000000neuro", "x86_64", "neuron"),
    )
)


def test_al2023s_accelerated_parameters_are_awss_nvidia_and_neuron_paths() -> None:
    assert accelerated_parameters("al2023@latest") == [
        ("x86_64", "nvidia", f"{K8S}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"),
        ("arm64", "nvidia", f"{K8S}/amazon-linux-2023/arm64/nvidia/recommended/image_id"),
        ("x86_64", "neuron", f"{K8S}/amazon-linux-2023/x86_64/neuron/recommended/image_id"),
    ]
    (_, _, pinned) = accelerated_parameters("al2023@v20240625")[2]
    assert pinned == (
        f"{K8S}/amazon-linux-2023/x86_64/neuron/"
        "amazon-eks-node-al2023-x86_64-neuron-1.33-v20240625/image_id"
    )


def test_al2s_gpu_image_serves_both_and_bottlerocket_has_an_nvidia_image_per_architecture() -> None:
    gpu = f"{K8S}/amazon-linux-2-gpu/recommended/image_id"
    assert accelerated_parameters("al2@latest") == [
        ("x86_64", "nvidia", gpu),
        ("x86_64", "neuron", gpu),
    ]
    bottlerocket = "/aws/service/bottlerocket/aws-k8s-1.33"
    assert accelerated_parameters("bottlerocket@v1.20.0") == [
        ("x86_64", "nvidia", f"{bottlerocket}-nvidia/x86_64/1.20.0/image_id"),
        ("arm64", "nvidia", f"{bottlerocket}-nvidia/arm64/1.20.0/image_id"),
        ("x86_64", "neuron", f"{bottlerocket}/x86_64/1.20.0/image_id"),
    ]
    assert accelerated_parameters("windows2022@latest") == []


def test_an_alias_becomes_the_hubs_accelerated_image_parameters() -> None:
    document = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-0123456789abcdef0"}],
            "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef0"}],
        },
    }
    hub = REGISTRY.read(document).conversion.hub
    accelerated = hub.spec.accelerated_image_ssm_parameters
    assert accelerated is not None
    assert [(a.variant, a.ssm_parameter.split("/")[-4]) for a in accelerated] == [
        ("nvidia", "x86_64"),
        ("nvidia", "arm64"),
        ("neuron", "x86_64"),
    ]


@pytest.mark.parametrize(
    ("instance_type", "image_id"),
    [
        ("c5.large", "ami-0000000000000x86"),
        ("m7g.large", "ami-0000000000000arm"),
        ("g5.xlarge", "ami-00000000000nvx86"),
        ("g5g.xlarge", "ami-00000000000nvarm"),
        ("inf2.xlarge", "ami-00000000000neuro"),
        ("trn1.2xlarge", "ami-00000000000neuro"),
        ("inf1.xlarge", "ami-00000000000neuro"),
    ],
)
def test_each_type_launches_the_variant_built_for_it(instance_type: str, image_id: str) -> None:
    assert IMAGES.images_by_type([instance_type], TYPES) == {instance_type: image_id}


def test_a_neuron_type_carries_karpenters_accelerator_labels() -> None:
    labels = TYPES["trn1.2xlarge"].labels()
    assert labels[INSTANCE_ACCELERATOR_COUNT] == "1"
    assert labels[INSTANCE_ACCELERATOR_NAME] == "trainium"
    assert labels[INSTANCE_ACCELERATOR_MANUFACTURER] == "aws"
    assert INSTANCE_ACCELERATOR_COUNT not in TYPES["g5.xlarge"].labels()


def test_mac_types_run_no_x86_64_or_arm64_image() -> None:
    # DescribeInstanceTypes' x86_64_mac and arm64_mac are their own architectures
    # (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html)
    assert TYPES["mac1.metal"].architectures == ("x86_64_mac",)
    assert TYPES["mac2.metal"].architectures == ("arm64_mac",)
    for mac in ("mac1.metal", "mac2.metal"):
        assert not IMAGES.runs_on(TYPES[mac])
        assert not ImageArchitecture("ami-0000000000000x86", "x86_64").runs_on(TYPES[mac])
        assert not ImageArchitecture("ami-0000000000000arm", "arm64").runs_on(TYPES[mac])


def test_status_requirements_are_karpenters_per_variant() -> None:
    x86, _, nvidia, _, neuron = IMAGES.images
    gpu = "karpenter.k8s.aws/instance-gpu-count"
    arch = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    assert x86.requirements() == [
        arch,
        {"key": INSTANCE_ACCELERATOR_COUNT, "operator": "DoesNotExist"},
        {"key": gpu, "operator": "DoesNotExist"},
    ]
    assert nvidia.requirements() == [arch, {"key": gpu, "operator": "Exists"}]
    assert neuron.requirements() == [
        arch,
        {"key": INSTANCE_ACCELERATOR_COUNT, "operator": "Exists"},
    ]
    # An image named without variants: its architecture alone
    assert ImageArchitecture("ami-0000000000000x86", "x86_64").requirements() == [arch]
