"""How large a status record may grow: the one policy every carrier of a record relies on.

A record (docs/contracts.md, Status) is stored in the state table (DynamoDB: 400 KB an item), kept
as the idempotency item's result (the same limit) and published as an event's detail (EventBridge:
256 KB an entry). Some of its lists grow with what the request meets, not with what it asked for: a
broad pool over a large ICE cache lists thousands of unavailable offerings, EC2's messages have no
stated length, errors pile up over attempts and pools. So a detail is held to ``MAX_DETAIL_BYTES``
of its serialized JSON (sorted keys, as every carrier writes it), which leaves room for each
carrier's other attributes.

The rules, in order, used only when the whole detail does not fit:

- ``instances`` are never shortened: a launched instance is always named by its record. A
  request launches at most 500 (the contract's ``count``): about 185 KB at their longest, so they
  always fit, with room left for diagnostics (a test holds this).
- every text in the diagnostic lists is cut to ``MAX_TEXT_CHARS``, saying how much was cut;
- the diagnostic lists keep as many entries as fit, from the first, in the order of
  ``DIAGNOSTIC_LISTS`` (what went wrong first, then what a wait waits for, then the offerings);
- what was left out is counted in ``detailTruncated`` (per list: ``total`` and ``kept``), and
  one ``errors`` entry with code ``DetailTruncated`` says so in words.

``candidatesLeftOut`` (the offerings a CreateFleet could not send) is bounded when it is made:
two counts and at most ``MAX_LEFT_OUT_NAMED`` instance type names, under 2 KB, so it is never
shortened.

A detail that already fits is left as it is, so a stored record read back and written again (or
re-published) is unchanged. Nothing left out is kept elsewhere: the lists shortened are
diagnostics whose answers expire within minutes (the ICE cache's lifetime).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

DETAIL_TRUNCATED = "DetailTruncated"
# The detail's budget: 16 KB under EventBridge's 256 KB entry (for its Source, DetailType and
# Resources), 160 KB under DynamoDB's 400 KB item (the record's other attributes, Powertools').
MAX_DETAIL_BYTES = 240 * 1024
# Each text of a diagnostic entry (an EC2 message, a reason) once the detail must shrink.
MAX_TEXT_CHARS = 2048
# The lists that may be shortened, in the order they keep their room.
DIAGNOSTIC_LISTS: tuple[str, ...] = ("errors", "waitingFor", "unavailableOfferings")
# The instance types a record's candidatesLeftOut names at most (the rest are only counted).
MAX_LEFT_OUT_NAMED = 20
# The field that counts what was left out (additive to the record's contract).
TRUNCATED_FIELD = "detailTruncated"
# Each entry of a list costs its JSON and the ", " that separates it from the next.
_SEPARATOR = 2


def serialized_size(value: Any) -> int:
    """Bytes of the JSON every carrier writes (sorted keys, ASCII: an upper bound of UTF-8)."""
    return len(json.dumps(value, sort_keys=True, default=str).encode())


def fit_detail(detail: Mapping[str, Any], budget: int = MAX_DETAIL_BYTES) -> dict[str, Any]:
    """The detail within `budget` bytes by the rules above; unchanged when it fits already."""
    if serialized_size(detail) <= budget:
        return dict(detail)
    base = _without_marker(detail)
    lists = {name: [_short(e) for e in _entries(base, name)] for name in DIAGNOSTIC_LISTS}
    totals = _totals(detail, lists)
    # The room left once the rest, the counts and the note are there (at their largest).
    worst = _shaped(base, {n: [] for n in lists}, totals, budget=budget, worst=True)
    room = budget - serialized_size(worst)
    kept: dict[str, list[Any]] = {}
    for name, entries in lists.items():
        kept[name], room = _prefix(entries, room)
    return _shaped(base, kept, totals, budget=budget)


def fit_entries(entries: Sequence[Any], budget: int) -> list[Any]:
    """A list of diagnostics (``{code, message}`` entries, as a launch intent keeps EC2's fleet
    errors) held to `budget` bytes by the same rules: texts cut, the first entries that fit,
    then a DetailTruncated entry saying how many were left out."""
    fitted = fit_detail({"errors": list(entries)}, budget)
    return list(fitted["errors"])


def shorten_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`text` cut to about `limit` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _entries(detail: Mapping[str, Any], name: str) -> list[Any]:
    value = detail.get(name)
    return list(value) if isinstance(value, list) else []


def _without_marker(detail: Mapping[str, Any]) -> dict[str, Any]:
    """The detail without a DetailTruncated note of an earlier fit (counted again below)."""
    base = dict(detail)
    if isinstance(base.get("errors"), list):
        base["errors"] = [e for e in base["errors"] if not _is_marker(e)]
    return base


def _is_marker(entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("code") == DETAIL_TRUNCATED


def _short(entry: Any) -> Any:
    if isinstance(entry, str):
        return shorten_text(entry)
    if isinstance(entry, Mapping):
        return {k: shorten_text(v) if isinstance(v, str) else v for k, v in entry.items()}
    return entry


def _totals(detail: Mapping[str, Any], lists: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """Each list's whole length: what it holds now and what an earlier fit left out of it."""
    earlier = detail.get(TRUNCATED_FIELD)
    earlier = earlier if isinstance(earlier, Mapping) else {}
    totals = {}
    for name, entries in lists.items():
        counts = earlier.get(name)
        left_out = 0
        if isinstance(counts, Mapping):
            left_out = max(int(counts.get("total", 0)) - int(counts.get("kept", 0)), 0)
        totals[name] = len(entries) + left_out
    return totals


def _prefix(entries: Sequence[Any], room: int) -> tuple[list[Any], int]:
    """The longest first part of `entries` whose JSON fits in `room` bytes, and the room left."""
    kept: list[Any] = []
    for entry in entries:
        cost = serialized_size(entry) + _SEPARATOR
        if cost > room:
            break
        kept.append(entry)
        room -= cost
    return kept, room


def _shaped(
    base: Mapping[str, Any],
    lists: Mapping[str, list[Any]],
    totals: Mapping[str, int],
    *,
    budget: int,
    worst: bool = False,
) -> dict[str, Any]:
    """The detail with these lists, the counts of those shortened and the DetailTruncated note;
    `worst`: the counts and note at their largest (every list named), to reserve their room."""
    counts = {
        n: {"total": totals[n], "kept": totals[n] if worst else len(v)}
        for n, v in lists.items()
        if worst or len(v) < totals[n]
    }
    shaped = {**base, **{n: v for n, v in lists.items() if n in base or v}}
    shaped[TRUNCATED_FIELD] = counts
    # At its largest the note says every entry was left out (its widest numbers), while the
    # counts say every entry was kept (theirs).
    said = {n: {"total": c["total"], "kept": 0} for n, c in counts.items()} if worst else counts
    note = {"code": DETAIL_TRUNCATED, "message": _note(said, budget)}
    shaped["errors"] = [*shaped.get("errors", []), note]
    return shaped


def _note(counts: Mapping[str, Mapping[str, int]], budget: int) -> str:
    left = "".join(
        f"; {c['total'] - c['kept']} of {c['total']} {n} left out" for n, c in counts.items()
    )
    return (
        f"shortened to stay within {budget} bytes (DynamoDB's 400 KB item, "
        f"EventBridge's 256 KB event): texts over {MAX_TEXT_CHARS} characters cut{left}; "
        "every instance is kept"
    )
