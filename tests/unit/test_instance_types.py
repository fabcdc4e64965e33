"""Instance-type facts: names, labels, resources and matching requirements."""

from dataclasses import replace
from decimal import Decimal

import pytest

from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.requirements import (
    ARCH,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    INSTANCE_CATEGORY,
    INSTANCE_CPU,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_NAME,
    INSTANCE_MEMORY,
    INSTANCE_SIZE,
    INSTANCE_TYPE,
    OS,
    ZONE,
    Operator,
    Requirement,
)
from capacity_launcher.domain.quantities import Resources

P5 = InstanceTypeInfo(
    name="p5.48xlarge",
    architectures=("x86_64",),
    vcpu=192,
    memory_mib=2097152,
    gpu_count=8,
    gpu_name="H100",
    gpu_manufacturer="NVIDIA",
    zones=frozenset({"us-east-1a", "us-east-1b"}),
)
M7GD = InstanceTypeInfo(name="m7gd.large", architectures=("arm64",), vcpu=2, memory_mib=8192)
# A type of two architectures, listed as EC2 spells them (one twice).
DUAL = InstanceTypeInfo(
    name="dual.metal", architectures=("arm64", "x86_64", "arm64"), vcpu=12, memory_mib=16384
)
# A Mac type: DescribeInstanceTypes lists arm64_mac alone, which no arm64 image runs on.
MAC = InstanceTypeInfo(name="mac2.metal", architectures=("arm64_mac",), vcpu=12, memory_mib=16384)
CR = "cr-0123456789abcdef0"


def reqs(*terms: tuple[str, str, tuple[str, ...]]) -> Requirements:
    return Requirements.of(
        Requirement(key=key, operator=Operator(op), values=values) for key, op, values in terms
    )


@pytest.mark.parametrize(
    ("name", "family", "size", "generation"),
    [
        ("p5.48xlarge", "p5", "48xlarge", 5),
        ("m7gd.large", "m7gd", "large", 7),
        ("p4d.24xlarge", "p4d", "24xlarge", 4),
        ("u-6tb1.metal", "u-6tb1", "metal", 1),
        ("u7i-12tb.224xlarge", "u7i-12tb", "224xlarge", 7),
        ("mac2-m2pro.metal", "mac2-m2pro", "metal", 2),
        ("x2iezn.12xlarge", "x2iezn", "12xlarge", 2),
        ("trn1n.32xlarge", "trn1n", "32xlarge", 1),
        ("odd", "odd", None, None),
        ("odd.", "odd", None, None),
    ],
)
def test_name_parts(name: str, family: str, size: str | None, generation: int | None) -> None:
    info = InstanceTypeInfo(name=name, architectures=("amd64",), vcpu=1, memory_mib=1024)

    assert (info.family, info.size, info.generation) == (family, size, generation)


def test_ec2_architectures_are_spelled_as_labels() -> None:
    assert P5.architectures == ("amd64",)
    assert DUAL.architectures == ("arm64", "amd64")
    assert DUAL.architecture == "arm64"
    # A Mac type keeps its own architecture: it is neither amd64 nor arm64
    assert MAC.architectures == ("arm64_mac",)
    assert not MAC.matches(reqs((ARCH, "In", ("arm64",))))


def test_zones_are_a_frozenset() -> None:
    info = InstanceTypeInfo("m5.large", ("amd64",), 2, 8192, zones=["a", "b"])  # type: ignore[arg-type]

    assert info.zones == frozenset({"a", "b"})


@pytest.mark.parametrize("info", [P5, M7GD, DUAL, MAC], ids=lambda i: i.name)
def test_a_type_in_other_zones_is_what_replace_makes_of_it(info: InstanceTypeInfo) -> None:
    zones = ["us-east-1c", "us-east-1a"]

    moved = info.in_zones(zones)

    assert moved == replace(info, zones=frozenset(zones))
    assert moved.zones == frozenset(zones) and moved.architectures == info.architectures
    assert hash(moved) == hash(replace(info, zones=frozenset(zones)))
    assert info.in_zones(info.zones) == info
    # and the type it was made from is as it was
    assert info.zones != moved.zones


def test_architectures_given_as_a_list_are_spelled_as_labels_too() -> None:
    info = InstanceTypeInfo("m5.large", ["x86_64", "amd64"], 2, 8192)  # type: ignore[arg-type]

    assert info.architectures == ("amd64",)


def test_resources_scale_with_count() -> None:
    assert P5.resources() == Resources(Decimal(192), 2097152, 8, 1)
    assert P5.resources(4) == Resources(Decimal(768), 8388608, 32, 4)
    assert M7GD.resources(0) == Resources.ZERO


def test_labels_of_a_gpu_type() -> None:
    assert P5.labels("us-east-1a", "reserved", CR) == {
        INSTANCE_TYPE: "p5.48xlarge",
        ARCH: "amd64",
        OS: "linux",
        INSTANCE_CATEGORY: "p",
        INSTANCE_FAMILY: "p5",
        INSTANCE_SIZE: "48xlarge",
        INSTANCE_GENERATION: "5",
        INSTANCE_CPU: "192",
        INSTANCE_MEMORY: "2097152",
        INSTANCE_GPU_COUNT: "8",
        INSTANCE_GPU_NAME: "h100",
        INSTANCE_GPU_MANUFACTURER: "nvidia",
        ZONE: "us-east-1a",
        CAPACITY_TYPE: "reserved",
        CAPACITY_RESERVATION_ID: CR,
    }


def test_gpu_labels_are_lowercase_kebab_case() -> None:
    radeon = InstanceTypeInfo(
        "g4ad.xlarge", ("x86_64",), 4, 16384, 1, gpu_name="Radeon Pro V520", gpu_manufacturer="AMD"
    )

    assert radeon.labels()[INSTANCE_GPU_NAME] == "radeon-pro-v520"
    assert radeon.labels()[INSTANCE_GPU_MANUFACTURER] == "amd"


def test_labels_without_gpu_zone_or_capacity_type_leave_those_keys_out() -> None:
    labels = M7GD.labels()

    for key in (
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        ZONE,
        CAPACITY_TYPE,
        CAPACITY_RESERVATION_ID,
    ):
        assert key not in labels
    assert labels[ARCH] == "arm64"


def test_matches_by_family_gpu_and_capacity_type() -> None:
    pool = reqs(
        (INSTANCE_FAMILY, "In", ("p5", "p4d")),
        (INSTANCE_GPU_COUNT, "Gt", ("0",)),
        (CAPACITY_TYPE, "In", ("reserved", "on-demand")),
    )

    assert P5.matches(pool, "us-east-1a", "on-demand")
    assert not P5.matches(pool, "us-east-1a", "spot")
    assert not M7GD.matches(pool, None, "on-demand")


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("p5.48xlarge", "p"),
        ("m7gd.large", "m"),
        ("inf2.xlarge", "inf"),
        ("trn1n.32xlarge", "trn"),
        ("u-6tb1.metal", "u"),
        ("mac2-m2pro.metal", "mac"),
        ("x2iezn.12xlarge", "x"),
    ],
)
def test_category_is_the_family_letters(name: str, category: str) -> None:
    info = InstanceTypeInfo(name=name, architectures=("amd64",), vcpu=1, memory_mib=1024)

    assert info.category == category
    assert info.labels()[INSTANCE_CATEGORY] == category


def test_matches_by_category_as_karpenter_users_write_it() -> None:
    accelerated = reqs((INSTANCE_CATEGORY, "In", ("p", "g")))
    not_general = reqs((INSTANCE_CATEGORY, "NotIn", ("m", "t")))

    assert P5.matches(accelerated)
    assert not M7GD.matches(accelerated)
    assert P5.matches(not_general)
    assert not M7GD.matches(not_general)


def test_gpu_count_does_not_exist_picks_types_without_gpus() -> None:
    no_gpu = reqs((INSTANCE_GPU_COUNT, "DoesNotExist", ()))

    assert M7GD.matches(no_gpu)
    assert not P5.matches(no_gpu)


def test_every_architecture_of_a_type_is_tried() -> None:
    assert DUAL.matches(reqs((ARCH, "In", ("amd64",))))
    assert DUAL.matches(reqs((ARCH, "In", ("arm64",))))
    assert not P5.matches(reqs((ARCH, "In", ("arm64",))))
    assert DUAL.allowed_architectures(reqs((ARCH, "NotIn", ("arm64",)))) == ["amd64"]


def test_unknown_zone_and_capacity_type_are_not_judged() -> None:
    pinned = reqs((ZONE, "In", ("us-east-1b",)), (CAPACITY_TYPE, "In", ("spot",)))

    assert P5.matches(pinned)
    assert P5.matches(pinned, zone="us-east-1b")
    assert not P5.matches(pinned, zone="us-east-1a")
    assert not P5.matches(pinned, capacity_type="on-demand")


def test_a_zone_the_type_is_not_offered_in_never_matches() -> None:
    assert not P5.matches(Requirements(), zone="us-west-2a")
    assert M7GD.matches(Requirements(), zone="anywhere")  # zones unknown: not judged


def test_reservation_id_is_left_to_the_caller_for_reserved_offerings() -> None:
    pinned = reqs((CAPACITY_RESERVATION_ID, "In", (CR,)))

    assert P5.matches(pinned, "us-east-1a", "reserved")
    assert P5.matches(pinned, "us-east-1a", "reserved", CR)
    assert not P5.matches(pinned, "us-east-1a", "reserved", "cr-00000000000000000")
    assert not P5.matches(pinned, "us-east-1a", "on-demand")


def test_reservation_kind_labels_exist_only_on_reserved_capacity_as_in_karpenter() -> None:
    blocks_only = reqs((CAPACITY_RESERVATION_TYPE, "In", ("capacity-block",)))
    no_interruptible = reqs((CAPACITY_RESERVATION_INTERRUPTIBLE, "NotIn", ("true",)))

    # Reserved, kind unknown to the caller: left to the caller, like the reservation id.
    assert P5.matches(blocks_only, "us-east-1a", "reserved")
    assert P5.matches(blocks_only, "us-east-1a", "reserved", CR, "capacity-block", False)
    assert not P5.matches(blocks_only, "us-east-1a", "reserved", CR, "default", False)
    assert not P5.matches(blocks_only, "us-east-1a", "on-demand")
    assert not P5.matches(no_interruptible, "us-east-1a", "reserved", CR, "default", True)
    assert P5.matches(no_interruptible, "us-east-1a", "reserved", CR, "default", False)
    assert P5.matches(no_interruptible, "us-east-1a", "spot")


def test_labels_of_a_reserved_instance_carry_its_reservation_kind() -> None:
    labels = P5.labels("us-east-1a", "reserved", CR, "capacity-block", False)

    assert labels[CAPACITY_RESERVATION_TYPE] == "capacity-block"
    assert labels[CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert CAPACITY_RESERVATION_TYPE not in P5.labels("us-east-1a", "on-demand")


def test_integer_requirements_on_cpu_and_memory() -> None:
    small = reqs((INSTANCE_CPU, "Lt", ("8",)), (INSTANCE_MEMORY, "Gt", ("4096",)))

    assert M7GD.matches(small)
    assert not P5.matches(small)


def test_generation_requirements() -> None:
    recent = reqs((INSTANCE_GENERATION, "Gt", ("6",)))

    assert M7GD.matches(recent)
    assert not P5.matches(recent)
