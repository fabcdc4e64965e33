"""`get -l SELECTOR`: kubectl's equality-based label selectors on documents' metadata.labels.

`key=value` (or `key==value`), `key!=value`, `key` (has the label), `!key` (has not), joined by
commas, all of which must hold. Capacity-launcher's own documents carry no labels; Karpenter's and
OME's keep theirs as written (`Kept`, the fields the hub has no place for). Set-based selectors
(`key in (a,b)`) are not read. Standard library only: the parser checks selectors.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.documents import StoredDocument

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABELLED = (
    "nodepools",
    "nodeclasses",
    "ec2nodeclasses",
    "capacityquotas",
    "capacityreservations",
    "clustercapacityreservations",
    "nodeclaims",
)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "exists", "!exists"
    value: str = ""

    def holds(self, labels: Mapping[str, Any]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!exists":
            return self.key not in labels
        equal = self.key in labels and str(labels[self.key]) == self.value
        # kubectl: `key!=value` also selects what has no such label
        return equal if self.operator == "=" else not equal


def _requirement(term: str) -> Requirement:
    for operator, spelled in (("!=", "!="), ("=", "=="), ("=", "=")):
        if spelled in term:
            key, value = (part.strip() for part in term.split(spelled, 1))
            return Requirement(_key(key, term), operator, value)
    if term.startswith("!"):
        return Requirement(_key(term[1:].strip(), term), "!exists")
    return Requirement(_key(term, term), "exists")


def _key(key: str, term: str) -> str:
    if not _KEY.match(key):
        raise argparse.ArgumentTypeError(
            f"{term!r}: expected key=value, key!=value, key or !key (a label key, no sets)"
        )
    return key


def selector(text: str) -> tuple[Requirement, ...]:
    """argparse `type` of `get -l`."""
    return tuple(_requirement(term.strip()) for term in text.split(",") if term.strip())


def matches(labels: Mapping[str, Any] | None, requirements: tuple[Requirement, ...]) -> bool:
    return all(r.holds(labels or {}) for r in requirements)


def stored_labels(stored: StoredDocument) -> Mapping[str, Any]:
    """A stored document's labels, as its apply kept them (none for the hub's own documents)."""
    if stored.kept is None:
        return {}
    labels = stored.kept.fields.get("metadata.labels")
    return labels if isinstance(labels, Mapping) else {}


def selected_names(store: Any, kind: str, requirements: tuple[Requirement, ...]) -> set[str] | None:
    """The names of ``kind``'s stored documents the selector selects; None without a selector
    (everything is listed)."""
    if not requirements:
        return None
    return {
        s.document.name for s in store.stored_all(kind) if matches(stored_labels(s), requirements)
    }


def requirements_of(args: argparse.Namespace) -> tuple[Requirement, ...]:
    return tuple(getattr(args, "selector", None) or ())
