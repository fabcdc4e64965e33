"""A part of docs/BENCHMARKS.md measured again alone, without the whole `make bench` (minutes
rather than a quarter of an hour): its curves, their goals' rows and its plot, rendered by the
report's own functions and put in place of the last run's; every other section keeps the figures
of the last whole run, and the page says which part was measured when.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.section [scaling|calls]

`scaling` (the default): items read per request and per sync run as reservations, pools and
history grow. `calls`: AWS calls per warm request (against offerings and usable reservations),
per sync run (against selected reservations) and for a burst of fresh containers, each beside
its baseline revision.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
ALONE = "- measured alone since the whole run:"


@dataclass(frozen=True)
class Rendered:
    goals: list[str]  # the part's goals' rows, one run of lines in the page's goals table
    sections: list[list[str]]  # each of its sections, from its `## ` heading


@dataclass(frozen=True)
class Part:
    row_starts: tuple[str, ...]  # how each of its goals' rows begins
    measure: Callable[[], Rendered]


def _scaling() -> Rendered:
    from benchmarks import plots, report, scaling

    points, syncs = scaling.run()
    names = plots.items_read(points, syncs, PAGE.parent)
    return Rendered(
        report.scaling_goals(points, syncs), [report.scaling_section(points, syncs, names)]
    )


def _calls() -> Rendered:
    from benchmarks import fresh_burst, offering_calls, plots, report, reservation_calls, sync_calls

    syncs = sync_calls.run()
    offerings = offering_calls.run()
    reservations = reservation_calls.run()
    burst = fresh_burst.run()
    names = plots.calls(offerings, reservations, syncs, burst, PAGE.parent)
    return Rendered(
        report.calls_goals(offerings, reservations, burst, syncs),
        [
            report.calls_plotted(names),
            offering_calls.section(offerings),
            reservation_calls.section(reservations),
            fresh_burst.section(burst),
            report.sync_calls_section(syncs),
        ],
    )


PARTS = {
    "scaling": Part(("| Items read per request", "| The sync's reads follow live work"), _scaling),
    "calls": Part(
        (
            "| A warm on-demand request",
            "| A warm request into a reservation",
            "| A burst of ",
            "| The sync's calls follow what changed",
        ),
        _calls,
    ),
}


def spliced(page: str, part: str, rendered: Rendered, when: str) -> str:
    """`page` with `part`'s goals' rows (put where the first of them was) and sections replaced,
    and the note of when.

    A section the page does not have yet goes before the next section the part renders (or at
    the end); the notes of the parts measured alone keep one line, each part named once."""
    lines = page.split("\n")
    rows = [n for n, line in enumerate(lines) if line.startswith(PARTS[part].row_starts)]
    if not rows:
        raise ValueError(f"the page's goals table has no row of the {part} part")
    # Where the first stood (a row an earlier run put elsewhere joins the others).
    lines = [
        *lines[: rows[0]],
        *rendered.goals,
        *(line for n, line in enumerate(lines) if n > rows[0] and n not in rows),
    ]
    for n, section in reversed(list(enumerate(rendered.sections))):
        lines = _with_section(lines, section, rendered.sections[n + 1 :])
    return "\n".join(_noted(lines, part, when))


def _with_section(lines: list[str], section: list[str], later: Sequence[list[str]]) -> list[str]:
    """`lines` with `section` in place of the one of its heading, or, new, before the first of
    the `later` sections the page has; one blank line after it either way."""
    heading = _heading(section)
    body = section[section.index(heading) :]
    while body and not body[-1]:
        body = body[:-1]
    start = _heading_at(lines, heading)
    if start is None:
        after = [_heading_at(lines, _heading(s)) for s in later]
        start = end = next((at for at in after if at is not None), len(lines))
    else:
        end = next(
            (n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines)
        )
    return [*lines[:start], *body, "", *lines[end:]]


def _heading(section: list[str]) -> str:
    return next(line for line in section if line.startswith("## "))


def _heading_at(lines: list[str], heading: str) -> int | None:
    return next((n for n, line in enumerate(lines) if line == heading), None)


def _noted(lines: list[str], part: str, when: str) -> list[str]:
    earlier = next((line for line in lines if line.startswith(ALONE)), None)
    parts = {}
    if earlier is not None:
        for note in earlier.removeprefix(ALONE).split(";"):
            name, _, said = note.strip().partition(" (")
            if name in PARTS and said:
                parts[name] = said.removesuffix(")")
    parts[part] = when
    said = "; ".join(f"{name} ({at})" for name, at in parts.items())
    note = f"{ALONE} {said}; `python -m benchmarks.section {{{'|'.join(PARTS)}}}`"
    kept = [line for line in lines if not line.startswith(ALONE)]
    at = next(n for n, line in enumerate(kept) if line.startswith("- date:")) + 1
    return [*kept[:at], note, *kept[at:]]


def main(argv: Sequence[str] = ()) -> int:
    names = list(argv) or ["scaling"]
    unknown = [n for n in names if n not in PARTS]
    if unknown:
        print(f"no part named {', '.join(unknown)}: one of {', '.join(PARTS)}", file=sys.stderr)
        return 2
    for name in names:
        rendered = PARTS[name].measure()
        when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
        PAGE.write_text(spliced(PAGE.read_text(), name, rendered, when))
        print("\n".join(rendered.goals + [line for s in rendered.sections for line in s]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
