"""`get requests --field-selector SELECTOR`: kubectl's field selectors on a request's record.

`field=value` (or `field==value`) and `field!=value`, joined by commas, all of which must hold,
on the fields below (the record's JSON names). As kubectl, only these fields are selectable, and
another is a usage error naming the ones there are. `errors.code` holds when any of the record's
errors has that code (`errors.code!=X`: none has). It filters what `get requests` lists (the newest
records, docs/cli.md), so it answers "team X's failed requests today" without jq. Standard
library only: the parser checks selectors.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The record's fields a selector may name, and how each is read from its JSON detail.
FIELDS: Mapping[str, Callable[[Mapping[str, Any]], set[str]]] = {
    "requestId": lambda d: {str(d.get("requestId"))},
    "status": lambda d: {str(d.get("status"))},
    "requester": lambda d: {str(d.get("requester"))},
    "nodePool": lambda d: {str(d.get("nodePool"))},
    "errors.code": lambda d: {str(e.get("code")) for e in d.get("errors") or []},
}
SELECTABLE = ("requests",)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def holds(self, detail: Mapping[str, Any]) -> bool:
        found = self.value in FIELDS[self.field](detail)
        return found if self.equal else not found


def _requirement(term: str) -> FieldRequirement:
    for spelled, equal in (("!=", False), ("==", True), ("=", True)):
        if spelled in term:
            field, value = (part.strip() for part in term.split(spelled, 1))
            if field not in FIELDS:
                raise argparse.ArgumentTypeError(
                    f"{term!r}: {field!r} is not a field of a request a selector can name "
                    f"(one of {', '.join(FIELDS)})"
                )
            return FieldRequirement(field, equal, value)
    raise argparse.ArgumentTypeError(f"{term!r}: expected field=value or field!=value")


def field_selector(text: str) -> tuple[FieldRequirement, ...]:
    """argparse `type` of `get --field-selector`."""
    return tuple(_requirement(term.strip()) for term in text.split(",") if term.strip())


def selects(detail: Mapping[str, Any], requirements: tuple[FieldRequirement, ...]) -> bool:
    return all(r.holds(detail) for r in requirements)
