"""How deep a JSON document nests, read without recursion, so that hostile nesting is a rule a
body breaks (and its fields can still be read) rather than a RecursionError.

A body nested thousands deep would make ``json.loads`` (and any recursive walk) fail before its
``requestId`` could be read. ``shallow`` replaces every array or object opened deeper than the
limit by a placeholder string, in one pass over the text and without parsing it, so the rest
loads at a bounded depth; ``deep_fields`` then names the top-level fields that held one (or, for
a body handed over already parsed, that nest deeper than the limit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# What stands where a too deep array or object was: a string no JSON encoder writes unescaped.
PLACEHOLDER = "\x00nested too deep"
_PLACEHOLDER_JSON = b'"\\u0000nested too deep"'
# The bytes that matter for depth: quotes and escapes (strings), brackets outside strings. In
# UTF-8 no byte of a multi-byte character is one of these, so the text is read as bytes.
_STRUCTURE = re.compile(rb'["\\\[\]{}]')
_OPENING = frozenset(b"[{")


def may_nest_deeper(raw: bytes, limit: int) -> bool:
    """False when the text has too few brackets to nest deeper than `limit` (a cheap look)."""
    return raw.count(b"[") + raw.count(b"{") > limit


def shallow(raw: bytes, limit: int) -> tuple[bytes, bool]:
    """The text with each array or object opened at a depth over `limit` replaced by the
    placeholder, and whether any was. Malformed text stays malformed (loading it fails)."""
    parts: list[bytes] = []
    depth, kept_from, deep_from, in_string, escaped_at = 0, 0, -1, False, -1
    for found in _STRUCTURE.finditer(raw):
        at, char = found.start(), raw[found.start()]
        if at == escaped_at:
            continue
        if char == ord("\\"):
            escaped_at = at + 1 if in_string else escaped_at
        elif char == ord('"'):
            in_string = not in_string
        elif not in_string:
            depth += 1 if char in _OPENING else -1
            if depth == limit + 1 and char in _OPENING:
                parts.append(raw[kept_from:at])
                deep_from = at
            elif depth == limit and deep_from >= 0 and char not in _OPENING:
                parts.append(_PLACEHOLDER_JSON)
                kept_from, deep_from = at + 1, -1
    if not parts:
        return raw, False
    parts.append(raw[kept_from:] if deep_from < 0 else b"")
    return b"".join(parts), True


def deep_fields(body: Mapping[Any, Any], limit: int) -> list[Any]:
    """The keys of `body` whose values nest deeper than `limit` levels below the body (a value
    `shallow` replaced counts as too deep), in the body's order."""
    return [key for key, value in body.items() if _deeper_than(value, limit - 1)]


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` opens arrays or objects more than `limit` levels deep (no recursion)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        current, depth = pending.pop()
        if isinstance(current, str) and current == PLACEHOLDER:
            return True
        if isinstance(current, Mapping | list | tuple):
            if depth + 1 > limit:
                return True
            children = current.values() if isinstance(current, Mapping) else current
            pending.extend((child, depth + 1) for child in children)
    return False
