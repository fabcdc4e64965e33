"""`get requests --field-selector`: kubectl's field selectors on a request's record (issue 40:
"team X's failed requests today" without jq)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_cli import main, request_commands
from capacity_launcher_cli.field_selectors import field_selector, selects
from capacity_launcher_cli.request_commands import LIST_LIMIT

pytestmark = pytest.mark.unit

FAILED = {
    "requestId": "r-1",
    "status": "Failed",
    "requester": "team-x",
    "nodePool": "general",
    "errors": [{"code": "QuotaExceeded", "message": "..."}],
}
FULFILLED = {**FAILED, "requestId": "r-2", "status": "Fulfilled", "errors": []}
OTHER_TEAM = {**FAILED, "requestId": "r-3", "requester": "team-y"}


def chosen(text: str) -> list[str]:
    wanted = field_selector(text)
    return [d["requestId"] for d in (FAILED, FULFILLED, OTHER_TEAM) if selects(d, wanted)]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("status=Failed,requester=team-x", ["r-1"]),
        ("status==Failed", ["r-1", "r-3"]),
        ("status!=Failed", ["r-2"]),
        ("requester!=team-x", ["r-3"]),
        ("errors.code=QuotaExceeded,requester=team-y", ["r-3"]),
        ("errors.code!=QuotaExceeded", ["r-2"]),
        ("nodePool=general, requestId=r-2", ["r-2"]),
    ],
)
def test_each_requirement_must_hold(text: str, ids: list[str]) -> None:
    assert chosen(text) == ids


@pytest.mark.parametrize(
    ("text", "words"),
    [("team=x", "'team' is not a field"), ("status", "expected field=value")],
)
def test_a_field_no_selector_can_name_is_a_usage_error_naming_the_fields(
    text: str, words: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=words) as refused:
        field_selector(text)
    if "not a field" in words:
        assert "status, requester, nodePool" in str(refused.value)


def test_the_cli_refuses_a_field_selector_on_another_type() -> None:
    args = main.parser().parse_args(["get", "nodepools", "--field-selector", "status=Failed"])
    assert main._refused(args) == "--field-selector selects requests, not nodepools"
    args = main.parser().parse_args(["get", "requests", "--field-selector", "status=Failed"])
    assert main._refused(args) is None


class _Listed:
    """The state table's newest records, as `get requests` reads them (list_records)."""

    def __init__(self, records: list[RequestRecord]) -> None:
        self.records = self
        self._listed = records

    def list_records(self, limit: int = 100) -> list[RequestRecord]:
        return self._listed[:limit]


def _record(number: int, status: RequestStatus) -> RequestRecord:
    received = datetime(2026, 11, 28, 12, tzinfo=UTC) - timedelta(minutes=number)
    return RequestRecord(
        request_id=f"r-{number}",
        node_pool="general",
        requester="team-x",
        status=status,
        requested=1,
        launched=1 if status is RequestStatus.FULFILLED else 0,
        received_at=received,
        finished_at=received + timedelta(seconds=5),
    )


def _get_requests(
    monkeypatch: pytest.MonkeyPatch, records: list[RequestRecord], selector: str
) -> None:
    monkeypatch.setattr(request_commands, "queries", lambda _deployment: _Listed(records))
    args = argparse.Namespace(
        resource="requests",
        names=[],
        field_selector=field_selector(selector),
        output="table",
        ignore_not_found=False,
    )
    request_commands.get_requests(args, deployment=None)  # type: ignore[arg-type]


def test_a_selector_over_a_cut_listing_says_older_requests_were_not_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`get requests` reads the newest 100 records; a selector filters those. When the listing
    was cut there, "team X's failed requests today" may miss older ones: stderr says so, where
    it printed only `No resources found` (or the rows) as if every request had been read."""
    newest = [_record(n, RequestStatus.FULFILLED) for n in range(LIST_LIMIT)]

    _get_requests(monkeypatch, newest, "status=Failed,requester=team-x")

    error = capsys.readouterr().err
    assert f"only the newest {LIST_LIMIT} requests were read" in error, error


def test_a_selector_over_the_whole_history_adds_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    few = [_record(1, RequestStatus.FAILED), _record(2, RequestStatus.FULFILLED)]

    _get_requests(monkeypatch, few, "status=Failed")

    captured = capsys.readouterr()
    assert "r-1" in captured.out and "r-2" not in captured.out
    assert "newest" not in captured.err
