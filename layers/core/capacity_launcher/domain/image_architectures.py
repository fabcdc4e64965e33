"""Which instance types can run a NodeClass's image: EC2 launches an AMI only on a type whose
ProcessorInfo.SupportedArchitectures include the AMI's Architecture (DescribeImages); CreateFleet
refuses every other override with InvalidParameterValue. Karpenter derives `kubernetes.io/arch`
from the AMI the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from capacity_launcher.domain.config import NodeClass
from capacity_launcher.domain.instance_types import InstanceTypeInfo

# The error code a request record shows when no type its pool allows can run the image.
ARCHITECTURE_MISMATCH = "ImageArchitectureMismatch"
# DescribeImages Architecture -> the kubernetes.io/arch label of the types that run it. Mac
# images (x86_64_mac, arm64_mac) run only on Mac hosts, which this launcher does not launch.
_LABELS: dict[str, str] = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True)
class ImageArchitecture:
    """The architecture EC2 reports for the image a NodeClass launches."""

    image_id: str
    architecture: str  # as DescribeImages spells it: x86_64, arm64, i386, x86_64_mac, arm64_mac

    @property
    def label(self) -> str | None:
        """The kubernetes.io/arch value of the types that run it; None when none can."""
        return _LABELS.get(self.architecture)

    def runs_on(self, info: InstanceTypeInfo) -> bool:
        return self.label is not None and self.label in info.architectures

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
