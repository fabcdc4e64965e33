"""Listings on a pipe: plain kubectl-like columns, never a box, colour or cut; `-o wide`."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

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
