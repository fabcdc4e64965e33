"""Kubernetes' scheduling.k8s.io/v1 PriorityClass: the number an OME reservation's
``priorityClassName`` stands for (docs/ome.md, "Priority classes").

A PriorityClass is its own hub (stored as written). The rules are Kubernetes' own: ``value`` is an
int32 of at most 1,000,000,000 (higher is reserved for system classes), a name may not begin with
``system-``, ``value`` never changes once applied, at most one class is the ``globalDefault``.
A reservation naming a class gets its value when applied; naming none, the global default's value,
else 0; naming a class that is not applied, it is stored waiting for the class, whose apply gives
it the value (docs/ome.md, "Applied in any order").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from capacity_launcher.domain.apis.api_versions import ServedVersion, validated
from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, Name, _Document
from capacity_launcher.domain.apis.hub_kinds import own_hub
from capacity_launcher.domain.apis.kept_fields import Kept
from capacity_launcher.domain.errors import ConfigConflict

PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
PRIORITY_CLASS = "PriorityClass"
# Kubernetes: user classes go from int32's least up to a billion; above is for system classes.
MIN_CLASS_VALUE, MAX_CLASS_VALUE = -(2**31), 1_000_000_000
# Where an OME reservation names its class, in the kept fields of its apply.
PRIORITY_CLASS_NAME_PATH = "spec.priorityClassName"


class PriorityClassMetadata(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: Name
    labels: dict[str, str] | None = Field(default=None, max_length=64)
    annotations: dict[str, str] | None = Field(default=None, max_length=64)

    @field_validator("name")
    @classmethod
    def _not_system(cls, name: str) -> str:
        if name.startswith("system-"):
            raise ValueError("must not begin with 'system-' (reserved for Kubernetes' own classes)")
        return name


class PriorityClass(_Document):
    """A PriorityClass as written: its value is a reservation's priority in the quota hub."""

    model_config = BUILT_ON_FIRST_USE

    api_version: Literal["scheduling.k8s.io/v1"]
    kind: Literal["PriorityClass"]
    metadata: PriorityClassMetadata
    value: StrictInt = Field(ge=MIN_CLASS_VALUE, le=MAX_CLASS_VALUE)
    global_default: StrictBool | None = None
    description: str | None = Field(default=None, max_length=1024)
    # Kept as written: a reservation is not a Pod; nothing here preempts by class.
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name


def parse_priority_class(data: Mapping[str, Any]) -> PriorityClass:
    return validated(PriorityClass, data)


def priority_class_kept(priority_class: PriorityClass) -> Kept:
    """What an apply reports: ``preemptionPolicy`` is kept but acts on nothing here."""
    unacted = ("preemptionPolicy",) if priority_class.preemption_policy is not None else ()
    return Kept(PRIORITY_CLASS_API_VERSION, PRIORITY_CLASS, {}, unacted)


@dataclass(frozen=True)
class PriorityTable:
    """The applied classes' values by name, and the global default's name (if one is)."""

    values: Mapping[str, int] = field(default_factory=dict)
    global_default: str | None = None

    @property
    def default_value(self) -> int:
        return self.values[self.global_default] if self.global_default is not None else 0


def priority_table(classes: Iterable[PriorityClass]) -> PriorityTable:
    listed = list(classes)
    defaults = [c.name for c in listed if c.global_default]
    return PriorityTable({c.name: c.value for c in listed}, defaults[0] if defaults else None)


def check_change(stored: PriorityClass | None, applied: PriorityClass) -> None:
    """Kubernetes forbids changing a class's value: refused naming ``value``."""
    if stored is not None and stored.value != applied.value:
        raise ConfigConflict(
            f"PriorityClass {applied.name}: value: may not change once applied "
            f"(is {stored.value}, not {applied.value}); delete the class and apply it again"
        )


def check_global_default(others: Iterable[PriorityClass], applied: PriorityClass) -> None:
    """At most one class is the global default: refused naming ``globalDefault``."""
    if not applied.global_default:
        return
    taken = sorted(c.name for c in others if c.global_default and c.name != applied.name)
    if taken:
        raise ConfigConflict(
            f"PriorityClass {applied.name}: globalDefault: at most one class may be the global "
            f"default, and PriorityClass {taken[0]} is"
        )


def named_class(kept: Kept | None) -> str | None:
    """The class a stored reservation named when applied (from its kept fields)."""
    if kept is None:
        return None
    name = kept.fields.get(PRIORITY_CLASS_NAME_PATH)
    return name if isinstance(name, str) else None


def priority_class_version() -> ServedVersion:
    """scheduling.k8s.io/v1 PriorityClass, served as its own hub (stored as written)."""
    return own_hub(
        PRIORITY_CLASS_API_VERSION,
        PRIORITY_CLASS,
        PriorityClass,
        parse_priority_class,
        priority_class_kept,
    )
