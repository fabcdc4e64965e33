"""The scaling section of docs/BENCHMARKS.md measured again alone, without the whole `make bench`
(minutes rather than a quarter of an hour): its curves, their goals' rows and the plot, rendered
by the report's own functions and put in place of the last run's; every other section keeps the
figures of the last whole run, and the page says which section was measured when.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.section
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import plots, report, scaling

PAGE = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
HEADING = "## Scaling: items read"
# The goals' rows the scaling curves render (report.scaling_goals), by how each begins.
ROW_STARTS = ("| Items read per request", "| The sync's reads follow live work")
ALONE = "- measured alone since the whole run:"


def spliced(page: str, goals: list[str], section: list[str], when: str) -> str:
    """`page` with the scaling goals' rows and section replaced, and the note of when."""
    lines = page.split("\n")
    rows = [n for n, line in enumerate(lines) if line.startswith(ROW_STARTS)]
    if not rows or rows != list(range(rows[0], rows[-1] + 1)):
        raise ValueError("the scaling goals' rows are not one run of lines in the page")
    lines[rows[0] : rows[-1] + 1] = goals
    start = next(n for n, line in enumerate(lines) if line.startswith(HEADING))
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith("## "))
    lines[start:end] = section
    note = f"{ALONE} scaling ({when}; `python -m benchmarks.section`)"
    kept = [line for line in lines if not line.startswith(ALONE)]
    at = next(n for n, line in enumerate(kept) if line.startswith("- date:")) + 1
    return "\n".join([*kept[:at], note, *kept[at:]])


def main() -> int:
    points, syncs = scaling.run()
    names = plots.items_read(points, syncs, PAGE.parent)
    goals = report.scaling_goals(points, syncs)
    section = report.scaling_section(points, syncs, names)
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    PAGE.write_text(spliced(PAGE.read_text(), goals, section, when))
    print("\n".join(goals + section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
