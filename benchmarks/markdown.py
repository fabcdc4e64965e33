"""The shapes a benchmark's section of docs/BENCHMARKS.md is written in: a table, and a section
(its heading, then its paragraphs and tables, each followed by a blank line), one writer for
every benchmark that renders its own section (`offering_calls`, `reservation_calls`,
`fresh_burst`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table: the header of `columns`, its rule, then a line a row (each cell as
    `str` writes it; an empty one `| |`)."""
    return [_line(columns), "|" + "---|" * len(columns), *map(_line, rows)]


def _line(cells: Sequence[object]) -> str:
    return "|" + "".join(f" {cell} |" if str(cell) else " |" for cell in cells)


def section(heading: str, *blocks: str | Sequence[str]) -> list[str]:
    """A section of the report: a blank line, `## heading`, then each block (a paragraph, or a
    table's or a list's lines) followed by a blank line."""
    lines = ["", f"## {heading}", ""]
    for block in blocks:
        lines += [block] if isinstance(block, str) else list(block)
        lines.append("")
    return lines
