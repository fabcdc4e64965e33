"""Instance-type facts (from DescribeInstanceTypes) and the well-known labels they carry.

Labels follow Karpenter's: GPU labels exist only on types with GPUs, so ``gpu-count Gt 0`` picks
GPU types and ``gpu-count DoesNotExist`` picks the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.requirements import (
    ARCH,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_CATEGORY,
    INSTANCE_CPU,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_NAME,
    INSTANCE_LOCAL_NVME,
    INSTANCE_MEMORY,
    INSTANCE_SIZE,
    INSTANCE_TYPE,
    OS,
    RESERVED,
    ZONE,
)
from capacity_launcher.domain.quantities import Resources

LINUX = "linux"
# EC2's ProcessorInfo.SupportedArchitectures spelled as the kubernetes.io/arch label spells them.
# Mac types (x86_64_mac, arm64_mac) keep EC2's spelling, as Karpenter's labels do: an x86_64 or
# arm64 image does not run on them (EC2 refuses it), so they are neither amd64 nor arm64.
EC2_ARCHITECTURES: dict[str, str] = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "arm64": "arm64",
    "x86_64_mac": "x86_64_mac",
    "arm64_mac": "arm64_mac",
}
# "p5" -> 5, "m7gd" -> 7, "u-6tb1" -> 1 (the memory size is not the generation), "u7i-12tb" -> 7.
_GENERATION = re.compile(r"^[a-z]+(?:-[0-9]+tb)?([0-9]+)")
# The category is the family's leading letters: "m7gd" -> "m", "inf2" -> "inf", "u-6tb1" -> "u".
_CATEGORY = re.compile(r"^([a-z]+)")


@lru_cache(maxsize=256)
def _canonical(architectures: tuple[str, ...]) -> tuple[str, ...]:
    """EC2's spelling accepted too, each once, the first-listed first (a region's types list a
    handful of distinct tuples: each is worked out once)."""
    return tuple(dict.fromkeys(EC2_ARCHITECTURES.get(arch, arch) for arch in architectures))


def _kebab(text: str | None) -> str | None:
    """GPU names as Karpenter labels them: "Radeon Pro V520" -> "radeon-pro-v520"."""
    return "-".join(text.lower().split()) if text else None


@dataclass(frozen=True)
class InstanceTypeInfo:
    name: str
    architectures: tuple[str, ...]
    vcpu: int
    memory_mib: int
    gpu_count: int = 0
    gpu_name: str | None = None
    gpu_manufacturer: str | None = None
    zones: frozenset[str] = field(default_factory=frozenset)
    # GB of NVMe instance store (DescribeInstanceTypes InstanceStorageInfo); None without one.
    local_nvme_gb: int | None = None
    # AWS accelerators (Inferentia, Trainium): NeuronInfo, else InferenceAcceleratorInfo.
    accelerator_count: int = 0
    accelerator_name: str | None = None
    accelerator_manufacturer: str | None = None

    def __post_init__(self) -> None:
        # Accept EC2's spelling too, and keep the first-listed architecture first.
        object.__setattr__(self, "architectures", _canonical(tuple(self.architectures)))
        object.__setattr__(self, "zones", frozenset(self.zones))

    def in_zones(self, zones: Iterable[str]) -> InstanceTypeInfo:
        """These facts offered in `zones` instead (as `dataclasses.replace` would make them,
        without normalizing again what `__post_init__` already did: a catalog does this for each
        of a region's types)."""
        where = frozenset(zones)
        if where == self.zones:
            return self
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__["zones"] = where
        return copy

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def size(self) -> str | None:
        _, dot, size = self.name.partition(".")
        return size if dot and size else None

    @property
    def category(self) -> str | None:
        match = _CATEGORY.match(self.family)
        return match.group(1) if match else None

    @property
    def generation(self) -> int | None:
        match = _GENERATION.match(self.family)
        return int(match.group(1)) if match else None

    @property
    def architecture(self) -> str:
        """The label an instance of this type carries: the first architecture EC2 lists."""
        return self.architectures[0] if self.architectures else "amd64"

    def resources(self, count: int = 1) -> Resources:
        return (
            Resources(
                cpu=Decimal(self.vcpu), memory_mib=self.memory_mib, gpu=self.gpu_count, instances=1
            )
            * count
        )

    def labels(
        self,
        zone: str | None = None,
        capacity_type: str | None = None,
        capacity_reservation_id: str | None = None,
        capacity_reservation_type: str | None = None,
        capacity_reservation_interruptible: bool | None = None,
    ) -> dict[str, str]:
        """The well-known labels of an instance of this type launched as described."""
        labels = {
            INSTANCE_TYPE: self.name,
            ARCH: self.architecture,
            OS: LINUX,
            INSTANCE_FAMILY: self.family,
            INSTANCE_CPU: str(self.vcpu),
            INSTANCE_MEMORY: str(self.memory_mib),
        }
        optional = {
            INSTANCE_CATEGORY: self.category,
            INSTANCE_SIZE: self.size,
            INSTANCE_GENERATION: None if self.generation is None else str(self.generation),
            INSTANCE_GPU_COUNT: str(self.gpu_count) if self.gpu_count else None,
            INSTANCE_GPU_NAME: _kebab(self.gpu_name) if self.gpu_count else None,
            INSTANCE_GPU_MANUFACTURER: _kebab(self.gpu_manufacturer) if self.gpu_count else None,
            INSTANCE_ACCELERATOR_COUNT: str(self.accelerator_count)
            if self.accelerator_count
            else None,
            INSTANCE_ACCELERATOR_NAME: _kebab(self.accelerator_name)
            if self.accelerator_count
            else None,
            INSTANCE_ACCELERATOR_MANUFACTURER: _kebab(self.accelerator_manufacturer)
            if self.accelerator_count
            else None,
            INSTANCE_LOCAL_NVME: None if self.local_nvme_gb is None else str(self.local_nvme_gb),
            ZONE: zone,
            CAPACITY_TYPE: capacity_type,
            CAPACITY_RESERVATION_ID: capacity_reservation_id,
            CAPACITY_RESERVATION_TYPE: capacity_reservation_type,
            CAPACITY_RESERVATION_INTERRUPTIBLE: None
            if capacity_reservation_interruptible is None
            else str(capacity_reservation_interruptible).lower(),
        }
        labels.update({key: value for key, value in optional.items() if value is not None})
        return labels

    def allowed_architectures(self, requirements: Requirements) -> list[str]:
        """The architectures of this type the requirements admit, in EC2's order."""
        return requirements.allowed_values(ARCH, self.architectures)

    def matches(
        self,
        requirements: Requirements,
        zone: str | None = None,
        capacity_type: str | None = None,
        capacity_reservation_id: str | None = None,
        capacity_reservation_type: str | None = None,
        capacity_reservation_interruptible: bool | None = None,
    ) -> bool:
        """Whether an instance of this type, launched as described, satisfies the requirements.

        A None argument is not judged (any zone, any capacity type); a reserved offering without
        a reservation id, type or interruptibility leaves those keys to the caller. Every
        architecture of the type is tried: an arm64-and-amd64 type matches a requirement on
        either. On-demand and spot carry no reservation labels, as in Karpenter.
        """
        if zone is not None and self.zones and zone not in self.zones:
            return False
        unjudged = [
            key for key, value in ((ZONE, zone), (CAPACITY_TYPE, capacity_type)) if value is None
        ]
        if capacity_type in (None, RESERVED):
            reservation_labels = (
                (CAPACITY_RESERVATION_ID, capacity_reservation_id),
                (CAPACITY_RESERVATION_TYPE, capacity_reservation_type),
                (CAPACITY_RESERVATION_INTERRUPTIBLE, capacity_reservation_interruptible),
            )
            unjudged += [key for key, value in reservation_labels if value is None]
        judged = requirements.without(*unjudged)
        labels = self.labels(
            zone,
            capacity_type,
            capacity_reservation_id,
            capacity_reservation_type,
            capacity_reservation_interruptible,
        )
        return any(
            judged.matches(labels | {ARCH: arch}) for arch in self.architectures or ("amd64",)
        )
