"""What an apply or a delete of a PriorityClass decides, from what it read: Kubernetes' rules
(`priority_classes.py`) against the stored classes, apart from the loop that retries it
(service/configuration.py) and the store that reads and writes the items
(adapters/priority_class_store.py).

Every apply or delete reads the classes' version first (`PriorityClassesRead`), and writes
conditioned on it, bumping it: two applies that are fine alone but not together (two global
defaults) cannot both succeed. A delete also reads the quotas' generation before the
reservations (every reservation apply that changes one bumps it), and is conditioned on it: a
reservation applied naming the class meanwhile sends the delete back to be decided again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
    check_change,
    check_global_default,
)
from capacity_launcher.domain.errors import ConfigConflict, NotFound


@dataclass(frozen=True)
class PriorityClassesRead:
    """The classes' version, read first (any apply or delete after it bumps it), then every
    stored class that parses."""

    version: int
    classes: tuple[PriorityClass, ...] = ()

    def stored(self, name: str) -> PriorityClass | None:
        return next((c for c in self.classes if c.name == name), None)


@dataclass(frozen=True)
class PriorityClassPut:
    """The write of an apply: the class, conditioned on the classes' version `seen`."""

    applied: PriorityClass
    seen: int


@dataclass(frozen=True)
class PriorityClassDeleteRead:
    """What a delete reads: the quotas' generation first, then the classes' version, whether
    the class is stored, and the class each stored reservation names (None: it names none)."""

    quota_generation: int
    version: int
    stored: bool
    named_by: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PriorityClassDelete:
    """The write of a delete: the class deleted while both versions are as read."""

    name: str
    quota_generation: int
    version: int


def plan_apply(applied: PriorityClass, read: PriorityClassesRead) -> PriorityClassPut:
    """The write of `applied`, or ConfigConflict naming the field: its value may not change
    once applied, and at most one class is the global default."""
    check_change(read.stored(applied.name), applied)
    check_global_default(read.classes, applied)
    return PriorityClassPut(applied, read.version)


def plan_delete(name: str, read: PriorityClassDeleteRead) -> PriorityClassDelete:
    """The write of class `name`'s delete; NotFound when it is not stored, ConfigConflict
    naming the reservations that name it (their priority is its value: it stays while named)."""
    if not read.stored:
        raise NotFound(PRIORITY_CLASS, name)
    users = sorted(quota for quota, named in read.named_by.items() if named == name)
    if users:
        raise ConfigConflict(
            f"PriorityClass {name} is named by reservation(s) {', '.join(users)} "
            "(spec.priorityClassName); delete them or name another class first"
        )
    return PriorityClassDelete(name, read.quota_generation, read.version)
