"""Which launch templates no NodeClass can use any more (issue 27, item 1).

The launcher creates one template per (NodeClass content, image, reservation target), named by
a hash of its content, and never changes one. EC2 holds at most 5,000 a Region, shared with the
rest of the account ("Restrictions for Amazon EC2 launch templates"), so the sync deletes those
nothing will launch from again:

- its NodeClass was deleted;
- its NodeClass's content or image changed: no launch has used its basis (the template's data
  without its reservation part, tagged on the template) for `grace`, and another basis of the
  class has been used since. A launcher marks a template used when it finds it (at most every
  few minutes, `used_at`), so a NodeClass reverted to earlier content reuses that content's
  template, which stays, and the one it replaced for a while goes;
- the reservation it targets has ended, or the group it targets is named by no NodeClass;
- it carries no basis tag (made before templates had a lifecycle): the launcher creates the
  ones it still needs again, tagged. A quota filled before this existed drains this way.

Each rule waits `grace` after the template was created (or the newer basis first appeared), so
a launcher still holding yesterday's configuration for a few seconds is not raced; a launcher
that still meets a deleted template gets a retryable error and creates it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from capacity_launcher.domain.records.tags import MAX_TAG_VALUE


class Unusable(StrEnum):
    NODE_CLASS_DELETED = "NodeClassDeleted"
    SUPERSEDED = "Superseded"
    TARGET_GONE = "ReservationGone"


@dataclass(frozen=True)
class ManagedTemplate:
    """A template the service created, as DescribeLaunchTemplates lists it with its tags."""

    name: str
    created_at: datetime
    node_class: str | None  # its capacity-launcher:node-class tag
    basis: str | None = None  # TEMPLATE_BASIS; None on templates made before the lifecycle
    target: str | None = None  # RESERVATION_TARGET (`target_tag` of the id or ARN), if reserved
    used_at: datetime | None = None  # TEMPLATE_USED_AT: when a launcher last found it

    @property
    def reserved(self) -> bool:
        return self.target is not None

    @property
    def last_used(self) -> datetime:
        """When a launcher last made or found it."""
        return max(self.created_at, self.used_at or self.created_at)


def target_tag(name: str) -> str:
    """A reservation id or group ARN as a tag value (a hash when longer than a tag holds)."""
    if len(name) <= MAX_TAG_VALUE:
        return name
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()[:32]


def unusable(
    templates: Sequence[ManagedTemplate],
    node_classes: Iterable[str],
    targets: Iterable[str],
    now: datetime,
    grace: timedelta,
) -> list[tuple[ManagedTemplate, Unusable]]:
    """The templates to delete and why, deleted NodeClasses first, then superseded content,
    then gone targets (what frees most quota for the least doubt goes first)."""
    classes, known_targets = set(node_classes), {target_tag(t) for t in targets}
    settled = [t for t in templates if t.created_at <= now - grace]
    found: list[tuple[ManagedTemplate, Unusable]] = [
        (t, Unusable.NODE_CLASS_DELETED) for t in settled if t.node_class not in classes
    ]
    uses = _bases_last_used(templates)
    found += [
        (t, Unusable.SUPERSEDED)
        for t in settled
        if t.node_class in classes and (t.basis is None or _superseded(t, uses, now, grace))
    ]
    named = {t.name for t, _ in found}
    found += [
        (t, Unusable.TARGET_GONE)
        for t in settled
        if t.reserved and t.target not in known_targets and t.name not in named
    ]
    return found


@dataclass(frozen=True)
class _Use:
    """A basis's templates: when the first was made, and when a launcher last made or found one."""

    first_seen: datetime
    last_used: datetime


def _bases_last_used(templates: Sequence[ManagedTemplate]) -> dict[str, dict[str, _Use]]:
    """NodeClass -> basis -> its use."""
    uses: dict[str, dict[str, _Use]] = {}
    for t in templates:
        if t.node_class is None or t.basis is None:
            continue
        bases = uses.setdefault(t.node_class, {})
        seen = bases.get(t.basis)
        bases[t.basis] = (
            _Use(t.created_at, t.last_used)
            if seen is None
            else _Use(min(seen.first_seen, t.created_at), max(seen.last_used, t.last_used))
        )
    return uses


def _superseded(
    template: ManagedTemplate,
    uses: dict[str, dict[str, _Use]],
    now: datetime,
    grace: timedelta,
) -> bool:
    """No launcher has used its basis for `grace`, and another basis of its NodeClass, there
    for `grace` too, has been used since: the class's content moved on for good (a basis used
    again, a revert, is kept; the newer one goes once unused for `grace`)."""
    bases = uses.get(template.node_class or "", {})
    mine = bases.get(template.basis or "")
    settled = now - grace
    if mine is None or mine.last_used > settled:
        return False
    return any(
        basis != template.basis and use.last_used > mine.last_used and use.first_seen <= settled
        for basis, use in bases.items()
    )
