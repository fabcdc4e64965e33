"""`describe TYPE NAME`'s page, as kubectl describe lays one out: `Field:  value` lines, nested
fields indented two spaces, and tables (conditions, usage, instances) as plain columns. Pure
formatting: the commands (describe_commands.py) gather what it shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NONE = "<none>"


@dataclass(frozen=True)
class Rows:
    """A table in a page: a header and its rows (a missing value shows as `-`)."""

    header: tuple[str, ...]
    rows: Sequence[Sequence[object]]


def _cell(value: object) -> str:
    return "-" if value in (None, "", [], {}) else str(value)


def columns(table: Rows, indent: int) -> list[str]:
    cells = [list(table.header), *([_cell(v) for v in row] for row in table.rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.header))]
    pad = " " * indent
    return [
        pad + "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]


def _lines(fields: Sequence[tuple[str, Any]] | Mapping[str, Any], indent: int) -> list[str]:
    items = list(fields.items()) if isinstance(fields, Mapping) else list(fields)
    scalars = [k for k, v in items if not isinstance(v, Mapping | Rows | list) or not v]
    width = max((len(k) for k in scalars), default=0) + 3  # "Key:" and two spaces
    pad = " " * indent
    out: list[str] = []
    for key, value in items:
        if isinstance(value, Rows):
            out.append(f"{pad}{key}:")
            out += columns(value, indent + 2) if value.rows else [f"{pad}  {NONE}"]
        elif isinstance(value, Mapping) and value:
            out.append(f"{pad}{key}:")
            out += _lines(value, indent + 2)
        elif isinstance(value, list) and value:
            out.append(f"{pad}{key}:")
            out += _list(value, indent + 2)
        else:
            shown = NONE if value in (None, "", [], {}) else value
            out.append(f"{pad}{(key + ':').ljust(width)}{shown}")
    return out


def _list(values: list[Any], indent: int) -> list[str]:
    out: list[str] = []
    for value in values:
        if isinstance(value, Mapping):
            nested = _lines(value, indent + 2)
            out += [" " * indent + "- " + nested[0].lstrip(), *nested[1:]]
        else:
            out.append(f"{' ' * indent}- {value}")
    return out


def page(fields: Sequence[tuple[str, Any]]) -> str:
    """The page of ``fields`` in order: scalars, mappings (nested), lists, or Rows (tables)."""
    return "\n".join(_lines(fields, 0)) + "\n"


def conditions(found: Sequence[Mapping[str, Any]]) -> Rows:
    return Rows(
        ("TYPE", "STATUS", "REASON", "MESSAGE"),
        [(c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in found],
    )


def against(limits: Mapping[str, Any], used: Mapping[str, Any], header: str = "LIMIT") -> Rows:
    """Each resource that is limited or used: its limit (`∞` when none) and what is used."""
    names = [*limits, *(n for n in used if n not in limits)]
    return Rows(
        ("RESOURCE", header, "USED"), [(n, limits.get(n, "∞"), used.get(n, "0")) for n in names]
    )
