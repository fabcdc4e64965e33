"""Listings on a pipe: plain kubectl-like columns, never a box, colour or cut; `-o wide`."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console
from rich.text import Text

from capacity_launcher.domain.records.status import ErrorDetail, RequestRecord, RequestStatus
from capacity_launcher_cli import views

LONG = "x" * 400
AT = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)
FAILED = ErrorDetail(code="InsufficientInstanceCapacity", message=LONG)
RECORD = RequestRecord(
    request_id="web-[1]", node_pool="general", requester="team-ml",
    status=RequestStatus.FAILED, requested=2, launched=0, errors=[FAILED],
    received_at=AT, finished_at=AT + timedelta(minutes=1),
)  # fmt: skip


def test_plain_columns_are_padded_and_carry_no_markup_or_box() -> None:
    lines = views.plain(views.requests([RECORD])).splitlines()
    assert lines[0].split() == ["REQUEST", "POOL", "STATUS", "LAUNCHED", "CAPACITY", "ERRORS"]
    # markup of the status and escaped brackets are plain text; nothing is cut to a width
    assert lines[1].startswith("web-[1]   general   Failed   0/2        -          ")
    text = "\n".join(lines)
    assert not any(box in text for box in "│┃─━┏┗")
    assert "[red]" not in text and "[/]" not in text
    # the cell is as long as the table made it (errors cut at 200 without -o wide)
    assert lines[1].endswith("InsufficientInstanceCapacity: " + "x" * 170)


def test_wide_adds_who_and_when_and_does_not_cut_errors() -> None:
    header, row = views.plain(views.requests([RECORD], wide=True)).splitlines()
    assert header.split()[-3:] == ["REQUESTER", "RECEIVED", "FINISHED"]
    assert LONG in row
    assert row.split()[-5:] == ["team-ml", "2026-11-24", "11:30", "2026-11-24", "11:31"]


def test_show_prints_plain_columns_to_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    views.show(views.requests([RECORD]))
    assert out.getvalue() == views.plain(views.requests([RECORD]))
    assert "Requests" not in out.getvalue()  # no title either


def _terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> io.StringIO:
    """`views.console()` as a terminal of `width` columns, writing to the returned buffer."""
    out = io.StringIO()
    terminal = Console(file=out, width=width, force_terminal=True, highlight=False)
    monkeypatch.setattr(views, "console", lambda stderr=False: terminal)
    return out


WORDY = ErrorDetail(
    code="InsufficientInstanceCapacity",
    message="We currently do not have sufficient m5.24xlarge capacity in the Availability "
    "Zone you requested (us-east-1b). Our system will be working on provisioning additional "
    "capacity.",
)


def test_a_table_too_wide_for_a_100_column_terminal_folds_no_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a 100-column terminal and a listing whose cells are wider than it
    out = _terminal(monkeypatch, 100)
    record = RECORD.model_copy(update={"request_id": "training-gpu-2026-11-24", "errors": [WORDY]})

    # When it is listed
    views.show(views.requests([record], wide=True))

    # Then every word of every cell is printed whole (kubectl's plain columns), none folded
    printed = Text.from_ansi(out.getvalue()).plain
    words = set(printed.split())
    for word in [record.request_id, "InsufficientInstanceCapacity:", *WORDY.message.split()]:
        assert word in words, f"{word!r} was cut: {printed}"
    assert printed == views.plain(views.requests([record], wide=True))


def test_a_table_that_fits_the_terminal_keeps_its_box(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _terminal(monkeypatch, 100)
    record = RECORD.model_copy(update={"errors": []})

    views.show(views.requests([record]))

    printed = Text.from_ansi(out.getvalue()).plain
    assert "┃" in printed and "Requests" in printed  # the box and its title
    assert max(len(line) for line in printed.splitlines()) <= 100
