"""Requirement keys, operators, and their algebra (intersect, match), in Karpenter's vocabulary.

Each key's constraint is held as Karpenter holds it: a value set that is either explicit ("only
these") or a complement ("anything but these"), optional integer bounds (Gt/Lt), and whether the
label may be absent. Several requirements on one key are ANDed by intersecting their constraints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
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

from capacity_launcher.domain.errors import RequirementsConflict

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
_CANONICAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")


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


def _as_int(value: str) -> int | None:
    """The integer a label value spells in canonical decimal form, else None ("04" is not 4)."""
    return int(value) if _CANONICAL_INTEGER.match(value) else None


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


def _sort_key(value: str) -> tuple[int, int, str]:
    number = _as_int(value)
    return (0, number, value) if number is not None else (1, 0, value)


def _sorted(values: Iterable[str]) -> list[str]:
    return sorted(values, key=_sort_key)


@dataclass(frozen=True)
class Constraint:
    """What one key admits: a value set or its complement, integer bounds, and absence."""

    values: frozenset[str] = frozenset()
    complement: bool = True
    gt: int | None = None
    lt: int | None = None
    absent_ok: bool = True

    @classmethod
    def of(cls, requirement: Requirement) -> Constraint:
        values = frozenset(requirement.values)
        match requirement.operator:
            case Operator.IN:
                return cls(values, complement=False, absent_ok=False)
            case Operator.NOT_IN:
                return cls(values, complement=True, absent_ok=True)
            case Operator.EXISTS:
                return cls(absent_ok=False)
            case Operator.DOES_NOT_EXIST:
                return cls(complement=False, absent_ok=True)
            case Operator.GT:
                return cls(gt=int(requirement.values[0]), absent_ok=False)._normalized()
            case Operator.LT:
                return cls(lt=int(requirement.values[0]), absent_ok=False)._normalized()
        raise AssertionError(requirement.operator)  # pragma: no cover - exhaustive match

    @property
    def bounded(self) -> bool:
        return self.gt is not None or self.lt is not None

    def _within_bounds(self, value: str) -> bool:
        if not self.bounded:
            return True
        number = _as_int(value)
        return (
            number is not None
            and (self.gt is None or number > self.gt)
            and (self.lt is None or number < self.lt)
        )

    def admits(self, value: str | None) -> bool:
        """Whether a label with this value (None: the label is absent) satisfies the constraint."""
        if value is None:
            return self.absent_ok
        return (value in self.values) != self.complement and self._within_bounds(value)

    def is_empty(self) -> bool:
        """Admits nothing at all, not even an absent label."""
        return not self.absent_ok and not self.complement and not self.values

    def is_unconstrained(self) -> bool:
        return self.absent_ok and self.complement and not self.values and not self.bounded

    def intersect(self, other: Constraint) -> Constraint:
        if not self.complement and not other.complement:
            values, complement = self.values & other.values, False
        elif not self.complement:
            values, complement = self.values - other.values, False
        elif not other.complement:
            values, complement = other.values - self.values, False
        else:
            values, complement = self.values | other.values, True
        return Constraint(
            values=values,
            complement=complement,
            gt=_pick(max, self.gt, other.gt),
            lt=_pick(min, self.lt, other.lt),
            absent_ok=self.absent_ok and other.absent_ok,
        )._normalized()

    def _normalized(self) -> Constraint:
        """One spelling per meaning: bounds folded into explicit sets, empty ranges made empty."""
        if not self.bounded:
            return self
        values = frozenset(value for value in self.values if self._within_bounds(value))
        if not self.complement:
            return Constraint(values, complement=False, absent_ok=False)
        if self.gt is not None and self.lt is not None:
            size = self.lt - self.gt - 1
            if size <= len(values) and all(
                str(number) in values for number in range(self.gt + 1, self.lt)
            ):
                return _EMPTY
        return Constraint(values, complement=True, gt=self.gt, lt=self.lt, absent_ok=False)

    def requirements(self, key: str) -> list[Requirement]:
        """The fewest requirements that spell this constraint, in a fixed order."""
        if self.is_empty():
            return [
                Requirement(key=key, operator=Operator.EXISTS),
                Requirement(key=key, operator=Operator.DOES_NOT_EXIST),
            ]
        if not self.complement:
            if not self.values:
                return [Requirement(key=key, operator=Operator.DOES_NOT_EXIST)]
            return [Requirement(key=key, operator=Operator.IN, values=tuple(_sorted(self.values)))]
        terms: list[Requirement] = []
        if not self.absent_ok and not self.bounded:
            terms.append(Requirement(key=key, operator=Operator.EXISTS))
        if self.values:
            terms.append(
                Requirement(key=key, operator=Operator.NOT_IN, values=tuple(_sorted(self.values)))
            )
        if self.gt is not None:
            terms.append(Requirement(key=key, operator=Operator.GT, values=(str(self.gt),)))
        if self.lt is not None:
            terms.append(Requirement(key=key, operator=Operator.LT, values=(str(self.lt),)))
        return terms

    def describe(self) -> str:
        """Human words for messages: "[on-demand, reserved]", "any value except [spot]"."""
        if self.is_empty():
            return "no value"
        if not self.complement:
            if not self.values:
                return "no value (the label must be absent)"
            return "[" + ", ".join(_sorted(self.values)) + "]"
        parts = ["any value" if not self.bounded else "values"]
        if self.gt is not None:
            parts.append(f"> {self.gt}")
        if self.lt is not None:
            parts.append(f"{'and ' if self.gt is not None else ''}< {self.lt}")
        if self.values:
            parts.append("except [" + ", ".join(_sorted(self.values)) + "]")
        if self.absent_ok:
            parts.append("or none")
        return " ".join(parts)


def _pick(choose: Any, first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    result: int = choose(first, second)
    return result


_EMPTY = Constraint(complement=False, absent_ok=False)
_UNCONSTRAINED = Constraint()


class Requirements:
    """An immutable set of requirements, ANDed; keys without a requirement admit anything."""

    __slots__ = ("_constraints", "_min_values")

    def __init__(
        self,
        constraints: Mapping[str, Constraint] | None = None,
        min_values: Mapping[str, int] | None = None,
    ) -> None:
        kept = {
            key: constraint
            for key, constraint in (constraints or {}).items()
            if not constraint.is_unconstrained()
        }
        self._constraints: Mapping[str, Constraint] = dict(sorted(kept.items()))
        # Flexibility asked per key; only keys that are constrained can carry it.
        self._min_values: Mapping[str, int] = {
            key: n for key, n in sorted((min_values or {}).items()) if key in self._constraints
        }

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> Requirements:
        constraints: dict[str, Constraint] = {}
        min_values: dict[str, int] = {}
        for requirement in requirements:
            constraint = Constraint.of(requirement)
            existing = constraints.get(requirement.key)
            constraints[requirement.key] = (
                constraint if existing is None else existing.intersect(constraint)
            )
            if requirement.min_values is not None:
                min_values[requirement.key] = max(
                    requirement.min_values, min_values.get(requirement.key, 0)
                )
        return cls(constraints, min_values)

    def constraint(self, key: str) -> Constraint:
        return self._constraints.get(key, _UNCONSTRAINED)

    def min_values(self) -> Mapping[str, int]:
        """Per key, how many distinct values whatever is launched must be chosen among."""
        return self._min_values

    def intersect(self, other: Requirements) -> Requirements:
        merged = dict(self._constraints)
        for key, constraint in other._constraints.items():
            merged[key] = constraint if key not in merged else merged[key].intersect(constraint)
        min_values = dict(self._min_values)
        for key, n in other._min_values.items():
            min_values[key] = max(n, min_values.get(key, 0))
        return Requirements(merged, min_values)

    def without(self, *keys: str) -> Requirements:
        """The same requirements with ``keys`` left unconstrained."""
        return Requirements(
            {k: c for k, c in self._constraints.items() if k not in keys}, self._min_values
        )

    def __and__(self, other: Requirements) -> Requirements:
        return self.intersect(other)

    def allows(self, key: str, value: str | None) -> bool:
        """Whether ``key`` may have ``value``; None asks whether the label may be absent."""
        if value is not None:
            value = canonical_value(key, value)
        return self.constraint(key).admits(value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(self.allows(key, labels.get(key)) for key in self._constraints)

    def allowed_values(self, key: str, candidates: Iterable[str]) -> list[str]:
        return [candidate for candidate in candidates if self.allows(key, candidate)]

    def empty_keys(self) -> list[str]:
        return [key for key, constraint in self._constraints.items() if constraint.is_empty()]

    def keys(self) -> frozenset[str]:
        return frozenset(self._constraints)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is constrained at all."""
        return key in self._constraints

    def describe(self, key: str) -> str:
        return self.constraint(key).describe()

    def to_list(self) -> list[Requirement]:
        """Canonical form: keys sorted, each key spelled by the fewest requirements."""
        spelled: list[Requirement] = []
        for key, constraint in self._constraints.items():
            terms = constraint.requirements(key)
            if key in self._min_values:
                terms[0] = terms[0].model_copy(update={"min_values": self._min_values[key]})
            spelled += terms
        return spelled

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.to_list())

    def __len__(self) -> int:
        return len(self._constraints)

    def __bool__(self) -> bool:
        return bool(self._constraints)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._constraints == other._constraints and self._min_values == other._min_values

    def __hash__(self) -> int:
        return hash((frozenset(self._constraints.items()), frozenset(self._min_values.items())))

    def __repr__(self) -> str:
        terms = ", ".join(
            f"{r.key} {r.operator}{' ' + str(list(r.values)) if r.values else ''}"
            for r in self.to_list()
        )
        return f"Requirements({terms})"


def narrow(pool: Requirements, request: Requirements, *, strict: bool = False) -> Requirements:
    """The pool's requirements narrowed by a request's; a key left with no value is a conflict.

    With ``strict``, a request that names values (In) the pool does not allow is refused too,
    even when some of its values remain: it tried to widen the pool.
    """
    narrowed = pool.intersect(request)
    conflicts: list[str] = []
    keys: list[str] = []
    for key in sorted(request.keys()):
        pool_constraint, request_constraint = pool.constraint(key), request.constraint(key)
        emptied = narrowed.constraint(key).is_empty()
        widened = (
            strict
            and not request_constraint.complement
            and any(not pool_constraint.admits(value) for value in request_constraint.values)
        )
        if not (emptied or widened):
            continue
        keys.append(key)
        if request_constraint.is_empty():
            conflicts.append(
                f"requirements[{key}]: request allows no value: "
                "its requirements on this key contradict each other"
            )
        elif pool_constraint.is_empty():
            conflicts.append(f"requirements[{key}]: node pool allows no value for this key")
        else:
            conflicts.append(
                f"requirements[{key}]: request allows {request_constraint.describe()} "
                f"but node pool allows only {pool_constraint.describe()}: "
                "requirements can only narrow a node pool"
            )
    for key, wanted in narrowed.min_values().items():
        constraint = narrowed.constraint(key)
        if not constraint.complement and len(constraint.values) < wanted and key not in keys:
            keys.append(key)
            conflicts.append(
                f"requirements[{key}]: minValues={wanted} needs at least {wanted} values "
                f"but only {constraint.describe()} remain"
            )
    if conflicts:
        raise RequirementsConflict("; ".join(conflicts), keys=keys)
    return narrowed
