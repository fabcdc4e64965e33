"""Which instance types can run a NodeClass's image: EC2 launches an AMI only on a type whose
ProcessorInfo.SupportedArchitectures include the AMI's Architecture (DescribeImages); CreateFleet
refuses every other override with InvalidParameterValue. Karpenter derives `kubernetes.io/arch`
from the AMI the same way.

A NodeClass may have one image per architecture (an alias: `imageSsmParameter` and
`arm64ImageSsmParameter`), and accelerated variants (`acceleratedImageSsmParameters`): then, as
Karpenter resolves an alias, each image also carries its variant's requirements (the standard
images serve types with neither a GPU nor an AWS accelerator, the NVIDIA ones GPU types, the
Neuron ones Inferentia and Trainium types). Each instance type launches the first image it can run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.requirements import (
    ARCH,
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_GPU_COUNT,
)

# The error code a request record shows when no type its pool allows can run the image.
ARCHITECTURE_MISMATCH = "ImageArchitectureMismatch"
# DescribeImages Architecture -> the kubernetes.io/arch label of the types that run it. Mac
# images (x86_64_mac, arm64_mac) run only on Mac hosts, which this launcher does not launch.
_LABELS: dict[str, str] = {"x86_64": "amd64", "arm64": "arm64"}
# The variants of an image (domain/apis/karpenter/images.py) and the requirements Karpenter lists
# for each in an EC2NodeClass's status.amis, with whether an instance type meets them.
STANDARD = "standard"
_VARIANT_REQUIREMENTS: dict[str, tuple[tuple[str, str], ...]] = {
    STANDARD: ((INSTANCE_ACCELERATOR_COUNT, "DoesNotExist"), (INSTANCE_GPU_COUNT, "DoesNotExist")),
    "nvidia": ((INSTANCE_GPU_COUNT, "Exists"),),
    "neuron": ((INSTANCE_ACCELERATOR_COUNT, "Exists"),),
}


def _serves(variant: str | None, info: InstanceTypeInfo) -> bool:
    if variant is None:
        return True
    if variant == STANDARD:
        return not info.gpu_count and not info.accelerator_count
    return bool(info.gpu_count if variant == "nvidia" else info.accelerator_count)


@dataclass(frozen=True)
class ImageArchitecture:
    """The architecture EC2 reports for the image a NodeClass launches."""

    image_id: str
    architecture: str  # as DescribeImages spells it: x86_64, arm64, i386, x86_64_mac, arm64_mac
    # standard, nvidia or neuron when the class names its images by variant (an alias); None:
    # any type of its architecture runs it.
    variant: str | None = None

    @property
    def label(self) -> str | None:
        """The kubernetes.io/arch value of the types that run it; None when none can."""
        return _LABELS.get(self.architecture)

    def runs_on(self, info: InstanceTypeInfo) -> bool:
        return (
            self.label is not None
            and self.label in info.architectures
            and _serves(self.variant, info)
        )

    def requirements(self) -> list[dict[str, Any]]:
        """What a type must be to launch it, as Karpenter lists it in status.amis."""
        found: list[dict[str, Any]] = [
            {"key": ARCH, "operator": "In", "values": [self.label or self.architecture]}
        ]
        for key, operator in _VARIANT_REQUIREMENTS.get(self.variant or "", ()):
            found.append({"key": key, "operator": operator})
        return found

    @property
    def described(self) -> str:
        """`ami-... (x86_64)`, with the variant when it has one: `ami-... (x86_64, nvidia)`."""
        kind = f"{self.architecture}, {self.variant}" if self.variant else self.architecture
        return f"{self.image_id} ({kind})"

    def refusal(
        self, node_class: NodeClass, pool: str, excluded: Iterable[InstanceTypeInfo]
    ) -> str:
        """Why no instance type of `pool` can launch the NodeClass's image."""
        spec = node_class.spec
        image = (
            f"spec.imageId {self.image_id}"
            if spec.image_id
            else f"image {self.image_id} of spec.imageSsmParameter {spec.image_ssm_parameter}"
            if spec.image_ssm_parameter
            else f"image {self.image_id} of spec.imageSelectorTerms"
        )
        types = ", ".join(f"{i.name} ({'/'.join(i.architectures)})" for i in excluded)
        hint = (
            f"allow types whose kubernetes.io/arch is {self.label}"
            if self.label
            else "this launcher launches no instance type for that architecture"
        )
        return (
            f"NodeClass {node_class.metadata.name}: {image} is built for {self.architecture} "
            f"(DescribeImages Architecture), and none of the instance types node pool {pool} "
            f"allows can run it ({types}); {hint}"
        )


@dataclass(frozen=True)
class ImageArchitectures:
    """The images a NodeClass launches, its main one (imageId, imageSsmParameter or
    imageSelectorTerms) first, each with the architecture DescribeImages reports."""

    images: tuple[ImageArchitecture, ...]

    def image_for(self, info: InstanceTypeInfo) -> ImageArchitecture | None:
        """The image an instance type launches: the first it can run; None when none."""
        return next((image for image in self.images if image.runs_on(info)), None)

    def runs_on(self, info: InstanceTypeInfo) -> bool:
        return self.image_for(info) is not None

    def images_by_type(
        self, instance_types: Iterable[str], infos: Mapping[str, InstanceTypeInfo]
    ) -> dict[str, str]:
        """Instance type -> the image id it launches, for the types some image runs on."""
        found: dict[str, str] = {}
        for name in instance_types:
            info = infos.get(name)
            image = self.image_for(info) if info is not None else None
            if image is not None:
                found[name] = image.image_id
        return found

    def refusal(
        self, node_class: NodeClass, pool: str, excluded: Iterable[InstanceTypeInfo]
    ) -> str:
        """Why no instance type of `pool` can launch any of the NodeClass's images."""
        if len(self.images) == 1 and self.images[0].variant is None:
            return self.images[0].refusal(node_class, pool, excluded)
        spec = node_class.spec
        images = _and([i.described for i in self.images])
        labels = sorted({i.label for i in self.images if i.label})
        types = ", ".join(f"{i.name} ({'/'.join(i.architectures)})" for i in excluded)
        fields = [f"spec.imageSsmParameter {spec.image_ssm_parameter}"]
        if spec.arm64_image_ssm_parameter:
            fields.append(f"spec.arm64ImageSsmParameter {spec.arm64_image_ssm_parameter}")
        if spec.accelerated_image_ssm_parameters:
            fields.append("spec.acceleratedImageSsmParameters")
        variants = " and their variants' requirements" if self.images[0].variant else ""
        return (
            f"NodeClass {node_class.metadata.name}: the images {images} of {_and(fields)} "
            f"(DescribeImages Architecture{variants}) run on none of the "
            f"instance types node pool {pool} allows ({types}); allow types whose "
            f"kubernetes.io/arch is {' or '.join(labels)}"
        )


def _and(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def known(images: Sequence[ImageArchitecture | None]) -> ImageArchitectures | None:
    """The images whose architecture EC2 reports; None when the main (first) one is unknown
    (nothing is left out then: CreateFleet says why it cannot launch)."""
    if not images or images[0] is None:
        return None
    return ImageArchitectures(tuple(i for i in images if i is not None))
