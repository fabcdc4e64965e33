"""Which launch templates no NodeClass can use any more (issue 27, item 1).

The launcher creates one template per (NodeClass content, image, reservation target), named by
a hash of its content, and never changes one. EC2 holds at most 5,000 a Region, shared with the
rest of the account ("Restrictions for Amazon EC2 launch templates"), so the sync deletes those
nothing will launch from again:

- its NodeClass was deleted;
- its NodeClass's content or image changed: a newer basis (the template's data without its
  reservation part, tagged on the template) has been in use for `grace`;
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

from capacity_launcher.domain.tags import MAX_TAG_VALUE


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

    @property
    def reserved(self) -> bool:
        return self.target is not None


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
    current = _current_bases(templates, now, grace)
    found += [
        (t, Unusable.SUPERSEDED)
        for t in settled
        if t.node_class in classes
        and (t.basis is None or (t.node_class in current and t.basis != current[t.node_class]))
    ]
    named = {t.name for t, _ in found}
    found += [
        (t, Unusable.TARGET_GONE)
        for t in settled
        if t.reserved and t.target not in known_targets and t.name not in named
    ]
    return found


def _current_bases(
    templates: Sequence[ManagedTemplate], now: datetime, grace: timedelta
) -> dict[str, str]:
    """NodeClass -> the basis every launcher has used for at least `grace`: the one that
    appeared last (by its first template), once it is that old. A NodeClass whose newest basis
    is younger keeps every template for now."""
    first_seen: dict[str, dict[str, datetime]] = {}
    for t in templates:
        if t.node_class is None or t.basis is None:
            continue
        bases = first_seen.setdefault(t.node_class, {})
        bases[t.basis] = min(bases.get(t.basis, t.created_at), t.created_at)
    current: dict[str, str] = {}
    for node_class, bases in first_seen.items():
        basis, since = max(bases.items(), key=lambda item: (item[1], item[0]))
        if since <= now - grace:
            current[node_class] = basis
    return current
