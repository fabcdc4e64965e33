"""Requirement keys, operators and the Requirement a document writes, in Karpenter's vocabulary.

Their algebra (domain/capacity/constraints.py) holds each key's constraint as Karpenter holds it:
a value set that is either explicit ("only these") or a complement ("anything but these"),
optional integer bounds (Gt/Lt), and whether the label may be absent. Several requirements on one
key are ANDed by intersecting their constraints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
)

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
# AWS's own accelerators (Inferentia, Trainium: DescribeInstanceTypes NeuronInfo, else
# InferenceAcceleratorInfo), labelled as Karpenter labels them; absent on other types.
INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
# The instance store's total size in GB, on types whose instance store is NVMe (Karpenter's).
INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
# Karpenter's labels of reserved capacity: an ODCR (`default`) or a Capacity Block, and whether
# its owner may reclaim it (an interruptible reservation). Absent on on-demand and spot.
CAPACITY_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"

WELL_KNOWN_KEYS: frozenset[str] = frozenset(
    {
        INSTANCE_TYPE,
        ZONE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_SIZE,
        INSTANCE_GENERATION,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_LOCAL_NVME,
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
    }
)
INTEGER_KEYS: frozenset[str] = frozenset(
    {
        INSTANCE_GENERATION,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_GPU_COUNT,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_LOCAL_NVME,
    }
)

ARCHITECTURES: tuple[str, ...] = ("amd64", "arm64")
RESERVED = "reserved"
ON_DEMAND = "on-demand"
SPOT = "spot"
CAPACITY_TYPES: tuple[str, ...] = (RESERVED, ON_DEMAND, SPOT)
RESERVATION_TYPE_DEFAULT = "default"
RESERVATION_TYPE_CAPACITY_BLOCK = "capacity-block"
CAPACITY_RESERVATION_TYPES: tuple[str, ...] = (
    RESERVATION_TYPE_DEFAULT,
    RESERVATION_TYPE_CAPACITY_BLOCK,
)
BOOLEANS: tuple[str, ...] = ("true", "false")
# Keys whose values come from a closed set; anything else is refused at validation.
ALLOWED_VALUES: Mapping[str, tuple[str, ...]] = {
    ARCH: ARCHITECTURES,
    CAPACITY_TYPE: CAPACITY_TYPES,
    CAPACITY_RESERVATION_TYPE: CAPACITY_RESERVATION_TYPES,
    CAPACITY_RESERVATION_INTERRUPTIBLE: BOOLEANS,
}

# Karpenter bounds each value's length, not how many values a requirement holds; a NodePool's
# requirements are bounded in bytes as stored (config_base.MAX_POOL_REQUIREMENTS_BYTES), a
# request's by its body (launch_request.MAX_BODY_BYTES).
MAX_VALUE_LENGTH = 63
# Karpenter's bound on minValues (flexibility asked of one key).
MAX_MIN_VALUES = 50

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_INTEGER = re.compile(r"^[+-]?[0-9]{1,18}$")


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


_NEEDS_VALUES = (Operator.IN, Operator.NOT_IN)
_NO_VALUES = (Operator.EXISTS, Operator.DOES_NOT_EXIST)
_BOUNDS = (Operator.GT, Operator.LT)


def canonical_value(key: str, value: str) -> str:
    """Integer keys compare as integers: "08" and "+8" are spelled "8"."""
    if key in INTEGER_KEYS and _INTEGER.match(value):
        return str(int(value))
    return value


class Requirement(BaseModel):
    """One ``{key, operator, values, minValues}`` term, validated on its own.

    ``minValues`` asks for flexibility, as in Karpenter: whatever is launched for the request must
    be chosen among at least that many distinct values of the key.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", coerce_numbers_to_str=True, populate_by_name=True
    )

    key: str
    operator: Operator
    values: tuple[str, ...] = Field(default=(), validate_default=True)
    min_values: int | None = Field(default=None, alias="minValues", ge=1, le=MAX_MIN_VALUES)

    @field_validator("key")
    @classmethod
    def _well_known(cls, key: str) -> str:
        if key not in WELL_KNOWN_KEYS:
            raise ValueError(
                f"must be a well-known key: one of {', '.join(sorted(WELL_KNOWN_KEYS))}"
            )
        return key

    @field_validator("values")
    @classmethod
    def _values_fit_key_and_operator(
        cls, values: tuple[str, ...], info: ValidationInfo
    ) -> tuple[str, ...]:
        _check_value_shapes(values)
        key: str | None = info.data.get("key")
        operator: Operator | None = info.data.get("operator")
        _check_value_count_for_operator(key, operator, values)
        if key in INTEGER_KEYS or operator in _BOUNDS:
            values = _canonical_integers(key, values)
        _check_allowed_values(key, values)
        return tuple(dict.fromkeys(values))

    @field_validator("min_values")
    @classmethod
    def _min_values_can_be_met(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        operator: Operator | None = info.data.get("operator")
        values: tuple[str, ...] = info.data.get("values", ())
        if min_values is None:
            return None
        if operator is Operator.DOES_NOT_EXIST:
            raise ValueError("operator DoesNotExist leaves no values to choose among")
        if operator is Operator.IN and len(values) < min_values:
            raise ValueError(f"{min_values} exceeds the {len(values)} values operator In allows")
        return min_values

    @model_serializer(mode="wrap")
    def _without_absent_min_values(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        if isinstance(dumped, dict) and self.min_values is None:
            dumped.pop("minValues", None)
            dumped.pop("min_values", None)
        return dumped


def _check_value_shapes(values: tuple[str, ...]) -> None:
    for value in values:
        if not value or len(value) > MAX_VALUE_LENGTH or _CONTROL.search(value):
            raise ValueError(
                f"each value must be 1 to {MAX_VALUE_LENGTH} characters without control characters"
            )


def _check_value_count_for_operator(
    key: str | None, operator: Operator | None, values: tuple[str, ...]
) -> None:
    if operator in _NEEDS_VALUES and not values:
        raise ValueError(f"operator {operator} requires at least one value")
    if operator in _NO_VALUES and values:
        raise ValueError(f"operator {operator} takes no values")
    if operator in _BOUNDS:
        if len(values) != 1:
            raise ValueError(f"operator {operator} requires exactly one integer value")
        if key is not None and key not in INTEGER_KEYS:
            raise ValueError(
                f"operator {operator} applies only to integer keys: "
                f"{', '.join(sorted(INTEGER_KEYS))}"
            )


def _canonical_integers(key: str | None, values: tuple[str, ...]) -> tuple[str, ...]:
    if not all(_INTEGER.match(value) for value in values):
        raise ValueError(f"values of {key or 'this key'} must be integers of at most 18 digits")
    return tuple(str(int(value)) for value in values)


def _check_allowed_values(key: str | None, values: tuple[str, ...]) -> None:
    if key is not None and key in ALLOWED_VALUES:
        allowed = ALLOWED_VALUES[key]
        if any(value not in allowed for value in values):
            raise ValueError(f"values of {key} must be among {', '.join(allowed)}")
