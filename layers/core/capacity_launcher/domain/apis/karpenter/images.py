"""amiSelectorTerms aliases (``family@version``) to the public SSM parameters that name the image.

The same parameters Karpenter's AMI families read (pkg/providers/amifamily): the EKS optimized
images for a Kubernetes version, in their standard variant, one per architecture (x86_64, and
arm64 for every family but Windows's), and their accelerated variants (`accelerated_parameters`):
the NVIDIA image GPU types launch and the Neuron image Inferentia and Trainium types launch, where
the family publishes them. capacity-launcher has no
cluster to ask for its Kubernetes version: it is the EC2NodeClass annotation
``capacity-launcher/kubernetes-version``, else DEFAULT_KUBERNETES_VERSION (docs/karpenter.md).
"""

from __future__ import annotations

import re

DEFAULT_KUBERNETES_VERSION = "1.33"
KUBERNETES_VERSION_ANNOTATION = "capacity-launcher/kubernetes-version"
ARCHITECTURE = "x86_64"
ARM64 = "arm64"
# The variants of an EKS optimized image (Karpenter's amifamily Variant), by the instance types
# they are built for: no GPU and no AWS accelerator, NVIDIA GPUs, AWS Neuron devices.
STANDARD = "standard"
NVIDIA = "nvidia"
NEURON = "neuron"
VARIANTS = (STANDARD, NVIDIA, NEURON)
ACCELERATED = (NVIDIA, NEURON)
LATEST = "latest"
FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")
# v1beta1's amiFamily with no amiSelectorTerms: that family's latest image.
FAMILY_ALIASES = {
    family: family.lower()
    for family in ("AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022")
}
_ALIAS = re.compile(r"^([a-zA-Z0-9]+)@(.+)$")
_KUBERNETES_VERSION = re.compile(r"^1\.[0-9]{1,3}$")
_VERSION = re.compile(r"^v?[0-9A-Za-z._-]{1,24}$")


def check_alias(alias: str) -> str:
    """Karpenter's alias rules; ValueError with the rule."""
    match = _ALIAS.match(alias)
    if not match or len(alias) > 30:
        raise ValueError("must be 'family@version' (at most 30 characters), e.g. al2023@latest")
    family, version = match.groups()
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}")
    if family.startswith("windows") and version != LATEST:
        raise ValueError("windows families may only use version 'latest'")
    if not _VERSION.match(version):
        raise ValueError("version must be 'latest' or a release such as v20240625")
    return alias


def check_kubernetes_version(version: str) -> str:
    if not _KUBERNETES_VERSION.match(version):
        raise ValueError("must be a Kubernetes minor version such as 1.33")
    return version


def alias_parameter(alias: str, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> str:
    """The SSM parameter whose value is the x86_64 image an alias names (standard variant)."""
    return alias_parameters(alias, kubernetes_version)[ARCHITECTURE]


def alias_parameters(
    alias: str, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
) -> dict[str, str]:
    """Architecture (as DescribeImages spells it) -> the SSM parameter of the image the alias
    names for it: x86_64 for every family, arm64 for all but the Windows ones."""
    family, version = check_alias(alias).split("@", 1)
    k8s = kubernetes_version
    latest = version == LATEST
    if family == "al2023":
        return {arch: _al2023(k8s, arch, version, latest) for arch in (ARCHITECTURE, ARM64)}
    if family == "al2":
        return {arch: _al2(k8s, arch, version, latest) for arch in (ARCHITECTURE, ARM64)}
    if family == "bottlerocket":
        release = LATEST if latest else version.lstrip("v")
        return {
            arch: f"/aws/service/bottlerocket/aws-k8s-{k8s}/{arch}/{release}/image_id"
            for arch in (ARCHITECTURE, ARM64)
        }
    windows = family.removeprefix("windows")
    return {
        ARCHITECTURE: f"/aws/service/ami-windows-latest/Windows_Server-{windows}-English-Core-"
        f"EKS_Optimized-{k8s}/image_id"
    }


def accelerated_parameters(
    alias: str, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
) -> list[tuple[str, str, str]]:
    """(architecture, variant, SSM parameter) of the accelerated images an alias names, as
    Karpenter reads them: AL2023 publishes an NVIDIA image for x86_64 and arm64 and a Neuron one
    for x86_64; AL2 one GPU image (x86_64) for both; Bottlerocket an NVIDIA image per
    architecture, and its standard x86_64 image serves Neuron types too. Windows has none. A
    parameter AWS does not publish in a Region is left out when read (as an arm64 one is)."""
    family, version = check_alias(alias).split("@", 1)
    k8s = kubernetes_version
    latest = version == LATEST
    if family == "al2023":
        return [
            (ARCHITECTURE, NVIDIA, _al2023(k8s, ARCHITECTURE, version, latest, NVIDIA)),
            (ARM64, NVIDIA, _al2023(k8s, ARM64, version, latest, NVIDIA)),
            (ARCHITECTURE, NEURON, _al2023(k8s, ARCHITECTURE, version, latest, NEURON)),
        ]
    if family == "al2":
        name = "recommended" if latest else f"amazon-eks-gpu-node-{k8s}-{version}"
        gpu = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2-gpu/{name}/image_id"
        return [(ARCHITECTURE, NVIDIA, gpu), (ARCHITECTURE, NEURON, gpu)]
    if family == "bottlerocket":
        release = LATEST if latest else version.lstrip("v")
        nvidia = [
            (
                arch,
                NVIDIA,
                f"/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/{arch}/{release}/image_id",
            )
            for arch in (ARCHITECTURE, ARM64)
        ]
        return [*nvidia, (ARCHITECTURE, NEURON, alias_parameters(alias, k8s)[ARCHITECTURE])]
    return []


def _al2023(k8s: str, arch: str, version: str, latest: bool, variant: str = STANDARD) -> str:
    name = "recommended" if latest else f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}"
    return (
        f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{name}/image_id"
    )


def _al2(k8s: str, arch: str, version: str, latest: bool) -> str:
    # AL2's arm64 images have their own path and release names (amazon-linux-2-arm64,
    # amazon-eks-arm64-node-...); the x86_64 ones have no architecture in either.
    path, node = (
        ("amazon-linux-2", "node")
        if arch == ARCHITECTURE
        else ("amazon-linux-2-arm64", "arm64-node")
    )
    name = "recommended" if latest else f"amazon-eks-{node}-{k8s}-{version}"
    return f"/aws/service/eks/optimized-ami/{k8s}/{path}/{name}/image_id"
