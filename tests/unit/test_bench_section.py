"""`python -m benchmarks.section calls|scaling`: a part of docs/BENCHMARKS.md measured alone is
put in place of the last run's (its goals' rows where the first of them stood, its sections by
heading, a new one before the next it renders), and the page says which part was measured when."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import section
from benchmarks.section import Rendered, spliced

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md").read_text()

GOALS = [
    "| A warm on-demand request: new | 1 | **met** |",
    "| A warm request into a reservation: new | 2 | **met** |",
    "| A burst of 20 fresh containers: new | 3 | **met** |",
    "| The sync's calls follow what changed: new | 4 | **met** |",
]
PLOTTED = ["", "## AWS calls, plotted (new)", "", "![AWS calls](bench-calls.png)", ""]
ON_DEMAND = ["", "## AWS calls per warm on-demand request, against the offerings in its fleet "
             "(issue 38)", "", "new on-demand table", ""]  # fmt: skip
SYNC = ["", "## The reservation sync's calls per run", "", "new sync table", ""]


def _calls() -> Rendered:
    return Rendered(GOALS, [PLOTTED, ON_DEMAND, SYNC])


def test_the_calls_parts_rows_sections_and_note_replace_the_last_runs() -> None:
    page = spliced(PAGE, "calls", _calls(), "2026-11-29 10:00 UTC")
    lines = page.split("\n")
    # Its goals' rows, one run of lines where the first stood; none of the old ones left
    first = lines.index(GOALS[0])
    assert lines[first : first + len(GOALS)] == GOALS
    for start in section.PARTS["calls"].row_starts:
        assert [line for line in lines if line.startswith(start)] == [
            g for g in GOALS if g.startswith(start)
        ]
    # every other goal untouched
    assert "| Burst at 0 ms EC2 latency" in page and "| Items read per request" in page
    # its sections in place of the old, the new one before the next it renders
    assert "new on-demand table" in page and "new sync table" in page
    assert lines.index(PLOTTED[1]) < lines.index(ON_DEMAND[1])
    assert lines.count(ON_DEMAND[1]) == 1 and lines.count(SYNC[1]) == 1
    assert "`benchmarks/sync_calls.py`: one run" not in page  # the old sync paragraph
    # the sections around keep theirs
    assert "## Throughput and pool-limit conflicts" in page
    assert "## AWS calls per warm request into a reservation" in page
    # the note names this part and keeps the scaling part's
    [note] = [line for line in lines if line.startswith(section.ALONE)]
    assert "calls (2026-11-29 10:00 UTC)" in note and "scaling (" in note


def test_splicing_the_same_figures_again_changes_only_the_time() -> None:
    once = spliced(PAGE, "calls", _calls(), "2026-11-29 10:00 UTC")
    twice = spliced(once, "calls", _calls(), "2026-11-29 11:00 UTC")
    assert twice == once.replace("calls (2026-11-29 10:00 UTC)", "calls (2026-11-29 11:00 UTC)")


def test_a_page_without_the_parts_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="no row of the calls part"):
        spliced("# Benchmarks\n- date: now\n", "calls", _calls(), "now")


def test_an_unknown_part_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert section.main(["callz"]) == 2
    assert "no part named callz: one of scaling, calls" in capsys.readouterr().err
