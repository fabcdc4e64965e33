"""How the extension patches moto: each hook and each copied member is applied once, however
often `install()` runs, and is marked so a second install recognises it."""

from collections.abc import Callable
from typing import Any

_MARK = "__moto_capacity__"


def hook(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """Replace owner.name by make(original), unless this extension already did."""
    original = owner.__dict__.get(name) or getattr(owner, name)
    if getattr(original, _MARK, False):
        return
    replacement = make(original)
    setattr(replacement, _MARK, True)
    setattr(owner, name, replacement)


def hook_property(owner: Any, name: str, make: Callable[[Any], Callable[[Any], Any]]) -> None:
    """Replace the property owner.name by one whose getter is make(original property), unless
    this extension already did."""
    original = owner.__dict__[name]
    if getattr(original.fget, _MARK, False):
        return
    getter = make(original)
    setattr(getter, _MARK, True)
    setattr(owner, name, property(getter))


def copy_members(source: type, target: type) -> None:
    """Put the members `source` defines onto `target` (moto's response or model class)."""
    for name, member in vars(source).items():
        if name.startswith("__"):
            continue
        if getattr(target.__dict__.get(name), _MARK, False):
            continue
        target_member = member.fget if isinstance(member, property) else member
        setattr(target_member, _MARK, True)
        setattr(target, name, member)
