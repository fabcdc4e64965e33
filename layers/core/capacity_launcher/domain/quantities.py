"""CPU and memory quantities ("500m", "16Ti"), resource sums, and a NodePool's limits.

Quantities follow Kubernetes: CPU in cores or millicores, memory in bytes with binary (Ki..Ei) or
decimal (K..E) suffixes. Memory is held in MiB, the unit of the instance-memory label.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from decimal import Decimal, localcontext
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    field_serializer,
    field_validator,
)

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
INSTANCES = "instances"
DIMENSIONS: tuple[str, ...] = (CPU, MEMORY, GPU, INSTANCES)

MIB = 1024 * 1024
_MEMORY_UNITS: dict[str, int] = {
    "": 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
    "K": 1000,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "E": 1000**6,
}
_NUMBER = r"(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})"
_CPU_PATTERN = re.compile(rf"^({_NUMBER})(m?)$")
_MEMORY_PATTERN = re.compile(rf"^({_NUMBER})(Ki|Mi|Gi|Ti|Pi|Ei|K|k|M|G|T|P|E)?$")
_COUNT_PATTERN = re.compile(r"^[0-9]{1,18}$")
_MILLI = Decimal("0.001")
# Enough digits that parsing never rounds: 30 digits each side of the point times 1024**6.
_EXACT_DIGITS = 100

# The largest quantities accepted. Far beyond any fleet, and small enough that sums of them stay
# exact in DynamoDB's 38 digits: a trillion cores (15 digits with the millicores), 1Ei of memory
# (13 digits of MiB), and counts of at most 18 digits.
MAX_CPU_CORES = Decimal(10**12)
MAX_MEMORY_BYTES = 1024**6
MAX_COUNT_DIGITS = 18

CPU_RULE = (
    "must be a non-negative number of cores or millicores, at most 1000000000000 cores, "
    "e.g. '2', '1.5' or '500m'"
)
MEMORY_RULE = (
    "must be a non-negative number of bytes with an optional suffix "
    "Ki, Mi, Gi, Ti, Pi, Ei, K, M, G, T, P or E, at most 1Ei, e.g. '16Ti'"
)
COUNT_RULE = f"must be a non-negative whole number of at most {MAX_COUNT_DIGITS} digits"
CPU_BOUND_RULE = "must be at most 1000000000000 cores (1e12)"
MEMORY_BOUND_RULE = "must be at most 1Ei (1152921504606846976 bytes)"


def _text(value: object, rule: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(rule)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError(rule)
    return value.strip() if isinstance(value, str) else str(value)


def parse_cpu(value: str | int | float | Decimal) -> Decimal:
    """Cores as a Decimal: "500m" -> 0.5, "2048" -> 2048; finer than a millicore is refused."""
    match = _CPU_PATTERN.match(_text(value, CPU_RULE))
    if not match:
        raise ValueError(CPU_RULE)
    with localcontext(prec=_EXACT_DIGITS):
        number = Decimal(match.group(1))
        cores = number * _MILLI if match.group(2) else number
        if cores > MAX_CPU_CORES:
            raise ValueError(CPU_BOUND_RULE)
        if cores != cores.quantize(_MILLI):
            raise ValueError(
                "must be a whole number of millicores (at most 3 decimal places of cores)"
            )
        return _plain(cores)


def parse_memory_mib(value: str | int) -> int:
    """MiB, rounded down so a limit never grows: "16Ti" -> 16777216, "1Gi" -> 1024, 512 -> 0."""
    match = _MEMORY_PATTERN.match(_text(value, MEMORY_RULE))
    if not match:
        raise ValueError(MEMORY_RULE)
    with localcontext(prec=_EXACT_DIGITS):
        total = Decimal(match.group(1)) * _MEMORY_UNITS[match.group(2) or ""]
        if total > MAX_MEMORY_BYTES:
            raise ValueError(MEMORY_BOUND_RULE)
        return int(total // MIB)


def parse_count(value: str | int) -> int:
    """A whole number of GPUs or instances, given as a number or a string of digits."""
    text = _text(value, COUNT_RULE)
    if isinstance(value, float) or not _COUNT_PATTERN.match(text):
        raise ValueError(COUNT_RULE)
    return int(text)


def format_cpu(cores: Decimal) -> str:
    """The document spelling of cores: "2048", or millicores when fractional ("1500m")."""
    if cores == cores.to_integral_value():
        return str(int(cores))
    return f"{int(cores * 1000)}m"


def format_memory(mib: int) -> str:
    """The largest binary unit that spells ``mib`` exactly: 16777216 -> "16Ti"."""
    for suffix, factor in (("Pi", 1024**3), ("Ti", 1024**2), ("Gi", 1024), ("Mi", 1)):
        if mib and mib % factor == 0:
            return f"{mib // factor}{suffix}"
    return "0"


def _plain(number: Decimal) -> Decimal:
    """Drop exponent noise so equal amounts print alike ("2E+3" -> "2000")."""
    return (
        number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize()
    )


@dataclass(frozen=True)
class Resources:
    """An amount of each limited dimension: what instances use, or what a pool has used."""

    cpu: Decimal = Decimal(0)
    memory_mib: int = 0
    gpu: int = 0
    instances: int = 0

    ZERO: ClassVar[Resources]

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu + other.cpu,
            self.memory_mib + other.memory_mib,
            self.gpu + other.gpu,
            self.instances + other.instances,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu - other.cpu,
            self.memory_mib - other.memory_mib,
            self.gpu - other.gpu,
            self.instances - other.instances,
        )

    def __mul__(self, times: int) -> Resources:
        if isinstance(times, bool) or not isinstance(times, int):
            return NotImplemented
        return Resources(
            self.cpu * times, self.memory_mib * times, self.gpu * times, self.instances * times
        )

    __rmul__ = __mul__

    def amount(self, dimension: str) -> Decimal:
        """The amount of one dimension by its document name (cpu, memory, nvidia.com/gpu, ...)."""
        return self.amounts()[dimension]

    def amounts(self) -> dict[str, Decimal]:
        """Every dimension by document name, as Decimals (DynamoDB's number type)."""
        return {
            CPU: self.cpu,
            MEMORY: Decimal(self.memory_mib),
            GPU: Decimal(self.gpu),
            INSTANCES: Decimal(self.instances),
        }

    @classmethod
    def from_amounts(cls, amounts: dict[str, Any]) -> Resources:
        """The inverse of ``amounts``; missing dimensions are zero."""
        return cls(
            cpu=_plain(Decimal(str(amounts.get(CPU, 0)))),
            memory_mib=int(amounts.get(MEMORY, 0)),
            gpu=int(amounts.get(GPU, 0)),
            instances=int(amounts.get(INSTANCES, 0)),
        )

    def fits_within(self, limit: PoolLimits) -> list[str]:
        """Names of the dimensions where these resources exceed the limit (empty: it fits)."""
        exceeded = []
        for dimension, amount in self.amounts().items():
            bound = limit.limit_for(dimension)
            if bound is not None and amount > bound:
                exceeded.append(dimension)
        return exceeded

    def is_zero(self) -> bool:
        return all(getattr(self, f.name) == 0 for f in fields(self))


Resources.ZERO = Resources()


def _unready(value: int | str) -> int | str:
    parse_unready(value)
    return value


# `limits.unready` as written: a count of instances, or a percentage of the pool's ("20%").
Unready = Annotated[StrictInt | str, AfterValidator(_unready)]


class PoolLimits(BaseModel):
    """A NodePool's ``limits``: each dimension optional (absent: unlimited), given as strings
    or numbers in the document and stored parsed (cores, MiB, counts)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    cpu: Decimal | None = None
    memory: int | None = Field(default=None, description="MiB")
    gpu: int | None = Field(default=None, alias="nvidia.com/gpu")
    instances: int | None = None
    # Not a dimension: how many of the pool's instances may be unready before it launches no
    # more (a count, or "20%" of its instances); docs/provisioner.md, "limits.unready".
    # Left out of every dump when unset, so the limits token of a pool without it is spelled as
    # before it existed (stored pools' tokens still match the leases' checks).
    unready: Unready | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("cpu", mode="before")
    @classmethod
    def _parse_cpu(cls, value: Any) -> Decimal | None:
        return None if value is None else parse_cpu(value)

    @field_validator("memory", mode="before")
    @classmethod
    def _parse_memory(cls, value: Any) -> int | None:
        return None if value is None else parse_memory_mib(value)

    @field_validator("gpu", "instances", mode="before")
    @classmethod
    def _parse_count(cls, value: Any) -> int | None:
        return None if value is None else parse_count(value)

    @field_serializer("cpu")
    def _cpu_text(self, cpu: Decimal | None) -> str | None:
        return None if cpu is None else format_cpu(cpu)

    @field_serializer("memory")
    def _memory_text(self, memory: int | None) -> str | None:
        return None if memory is None else format_memory(memory)

    @field_serializer("gpu", "instances")
    def _count_text(self, count: int | None) -> str | None:
        return None if count is None else str(count)

    def limit_for(self, dimension: str) -> Decimal | None:
        """The limit of one dimension by its document name; None means unlimited."""
        value: Decimal | int | None = {
            CPU: self.cpu,
            MEMORY: self.memory,
            GPU: self.gpu,
            INSTANCES: self.instances,
        }[dimension]
        return None if value is None else Decimal(value)

    def is_unlimited(self) -> bool:
        return all(self.limit_for(dimension) is None for dimension in DIMENSIONS)

    def unready_allowed(self, instances: int) -> int | None:
        """How many unready instances the pool may have and still launch, given how many it
        has (launching or counted); None when `unready` is not set."""
        if self.unready is None:
            return None
        amount, percentage = parse_unready(self.unready)
        return instances * amount // 100 if percentage else amount

    def as_resources(self) -> Resources:
        """The limits as Resources, for arithmetic; an unlimited dimension reads as zero here,
        so check ``limit_for`` (None) before relying on a dimension."""
        return Resources(
            cpu=self.cpu or Decimal(0),
            memory_mib=self.memory or 0,
            gpu=self.gpu or 0,
            instances=self.instances or 0,
        )

    def headroom(self, used: Resources, each: Resources) -> int | None:
        """How many more of ``each`` fit beside ``used``; None when nothing limits them."""
        tightest = self.tightest(used, each)
        return None if tightest is None else tightest[1]

    def tightest(self, used: Resources, each: Resources) -> tuple[str, int] | None:
        """The dimension that admits the fewest more of ``each`` beside ``used``, and how many
        (the first in DIMENSIONS' order on a tie); None when nothing limits them."""
        most: tuple[str, int] | None = None
        for dimension in DIMENSIONS:
            bound, need = self.limit_for(dimension), each.amount(dimension)
            if bound is None or need <= 0:
                continue
            fit = max(0, int((bound - used.amount(dimension)) // need))
            if most is None or fit < most[1]:
                most = (dimension, fit)
        return most

    def to_document(self) -> dict[str, str]:
        dumped: dict[str, str] = self.model_dump(by_alias=True, exclude_none=True)
        return dumped


UNREADY_RULE = "must be a whole number of instances (20) or a percentage of the pool's ('20%')"
_PERCENT = re.compile(r"^(\d{1,3})%$")


def parse_unready(value: object) -> tuple[int, bool]:
    """(amount, is a percentage) of `limits.unready`; ValueError with the rule otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1_000_000:
        return value, False
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) > 100:
        raise ValueError(UNREADY_RULE)
    return int(match.group(1)), True


def limits_token(limits: PoolLimits | None) -> str:
    """One spelling of a pool's limits, stored beside the pool and checked by every lease, so a
    lease decided on a stale copy of the pool cannot succeed."""
    dumped = None if limits is None else limits.model_dump(mode="json", by_alias=True)
    return json.dumps(dumped, sort_keys=True)
