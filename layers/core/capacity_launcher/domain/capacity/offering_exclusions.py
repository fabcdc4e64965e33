"""Which requirements leave a pool no offering at all: the words of a NoOffering rejection.

An offering is an (instance type, zone, capacity type) the pool could ask for. When the pool's
requirements, narrowed by the request's, admit none, the keys to blame are those that alone
admit no offering (`kubernetes.io/os In [windows]` on Linux types); when each key alone admits
some, the keys without which some offering would match, which exclude everything together.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.requirements import ARCH, INSTANCE_TYPE

# At most this many of the values the offerings have are named in a message.
MAX_NAMED_VALUES = 10


@dataclass(frozen=True)
class Place:
    """One offering: an instance type in a zone, as one capacity type."""

    info: InstanceTypeInfo
    zone: str
    capacity_type: str

    def admitted_by(self, requirements: Requirements) -> bool:
        return self.info.matches(requirements, self.zone, self.capacity_type)

    def values(self, key: str) -> list[str]:
        """The label values an instance launched here would have for `key` (every arch)."""
        if key == ARCH:
            return list(self.info.architectures or ("amd64",))
        value = self.info.labels(self.zone, self.capacity_type).get(key)
        return [] if value is None else [value]


def places(
    instance_types: Sequence[InstanceTypeInfo],
    zones: Collection[str],
    capacity_types: Sequence[str],
) -> list[Place]:
    """Every offering of these types in these zones, as each capacity type."""
    return [
        Place(info, zone, capacity_type)
        for info in instance_types
        for zone in sorted(info.zones & frozenset(zones))
        for capacity_type in capacity_types
    ]


@dataclass(frozen=True)
class Exclusion:
    """The keys that leave no offering; `together`: only in combination (each alone admits
    some)."""

    keys: tuple[str, ...]
    together: bool = False


def excluding_keys(requirements: Requirements, offered: Sequence[Place]) -> Exclusion | None:
    """The requirement keys to blame when none of `offered` matches; None when something does
    match, or nothing is offered and no instance type is asked for."""
    if not offered:
        return Exclusion((INSTANCE_TYPE,)) if INSTANCE_TYPE in requirements else None
    if _any(requirements, offered):
        return None
    keys = sorted(requirements.keys())
    alone = [key for key in keys if not _any(_only(requirements, key), offered)]
    if alone:
        return Exclusion(tuple(alone))
    without = [key for key in keys if _any(requirements.without(key), offered)]
    return Exclusion(tuple(without or keys), together=True)


def exclusion_words(
    requirements: Requirements, exclusion: Exclusion, offered: Sequence[Place]
) -> str:
    """The rule broken, naming each key and what it allows against what is offered."""
    if not offered:
        return (
            f"requirements[{INSTANCE_TYPE}]: allows {requirements.describe(INSTANCE_TYPE)}, "
            "none of which is offered in the node class's zones"
        )
    if exclusion.together:
        named = ", ".join(f"{key} ({requirements.describe(key)})" for key in exclusion.keys)
        return f"requirements on {named} admit no offering together, though each alone admits some"
    return "; ".join(
        f"requirements[{key}]: allows {requirements.describe(key)}, but the pool's offerings "
        f"have {_offered_values(key, offered)}"
        for key in exclusion.keys
    )


def _offered_values(key: str, offered: Sequence[Place]) -> str:
    values = sorted({value for place in offered for value in place.values(key)}, key=_by_number)
    if not values:
        return "no such label"
    named = values[:MAX_NAMED_VALUES]
    more = f" and {len(values) - len(named)} more" if len(values) > len(named) else ""
    return "[" + ", ".join(named) + "]" + more


def _by_number(value: str) -> tuple[bool, int, str]:
    """Numbers in order ("2" before "16"), then words."""
    digits = value.removeprefix("-")
    return (not digits.isdigit(), int(value) if digits.isdigit() else 0, value)


def _only(requirements: Requirements, key: str) -> Requirements:
    return Requirements({key: requirements.constraint(key)})


def _any(requirements: Requirements, offered: Sequence[Place]) -> bool:
    return any(place.admitted_by(requirements) for place in offered)
