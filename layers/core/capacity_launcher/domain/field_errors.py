"""Field errors: one broken rule of a document or request, named by its path in the document's own
(camelCase) field names, and pydantic's errors translated into them, bounded against hostile input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps pydantic out of the import path
    from pydantic import ValidationError


@dataclass(frozen=True)
class FieldError:
    """One broken rule: ``field`` is a dotted path in the document's own (camelCase) names."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule}


def joined(errors: Iterable[FieldError]) -> str:
    return "; ".join(str(error) for error in errors)


MAX_FIELD_ERRORS = 50
_MAX_PATH_PART = 64


def field_errors(
    error: ValidationError,
    root: str = "",
    rules: Mapping[str, str] | None = None,
    limit: int = MAX_FIELD_ERRORS,
) -> list[FieldError]:
    """Translate pydantic's errors into FieldErrors named by the document's own field names.

    ``rules`` replaces pydantic's wording by error type (e.g. ``extra_forbidden``); at most
    ``limit`` errors are kept, so hostile input cannot make an unbounded message.
    """
    details = error.errors(include_url=False, include_input=False, include_context=False)
    found = [
        FieldError(
            field_path(detail["loc"], root),
            (rules or {}).get(detail["type"]) or _rule(detail["type"], detail["msg"]),
        )
        for detail in details[:limit]
    ]
    return bounded(found, limit, total=len(details), field=root or "body")


def bounded(
    errors: Sequence[FieldError],
    limit: int = MAX_FIELD_ERRORS,
    *,
    total: int | None = None,
    field: str = "body",
) -> list[FieldError]:
    """At most ``limit`` errors, then one saying how many more there were."""
    total = len(errors) if total is None else total
    kept = list(errors[:limit])
    if total > limit:
        kept.append(FieldError(field, f"and {total - limit} more errors"))
    return kept


def field_path(loc: Sequence[int | str], root: str = "") -> str:
    """("spec", "requirements", 0, "key") -> "spec.requirements[0].key"; odd keys go in brackets."""
    path = root
    for part in loc:
        if isinstance(part, str) and len(part) > _MAX_PATH_PART:
            part = part[:_MAX_PATH_PART] + "..."
        if part == "[key]":  # pydantic's marker for "the key of the dict entry above"
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        elif not path:
            path = part
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{part}]"
    return path or "body"


_RULES_BY_TYPE = {
    "missing": "is required",
    "extra_forbidden": "is not an allowed field",
    "frozen_instance": "cannot be changed",
}


def _rule(error_type: str, message: str) -> str:
    if error_type in _RULES_BY_TYPE:
        return _RULES_BY_TYPE[error_type]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message[:1].lower() + message[1:]
