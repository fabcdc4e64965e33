"""`submit --wait` and `status --wait` say what the request is doing while they wait: a line per
state change when stderr is not a terminal (a spinner when it is)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.status import RequestRecord, RequestStatus
from capacity_launcher_cli import request_commands
from capacity_launcher_cli.request_commands import wait_for
from capacity_launcher_cli.views import WaitProgress

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _record(status: RequestStatus, **fields: Any) -> RequestRecord:
    return RequestRecord(
        request_id="r-1", status=status, requested=2, launched=0, received_at=NOW,
        finished_at=NOW, **fields,
    )  # fmt: skip


class _Records:
    """The record as successive polls find it."""

    def __init__(self, *seen: RequestRecord | None) -> None:
        self._seen = list(seen)

    def bound_body(self, request_id: str) -> str | None:
        return None

    def get_record(self, request_id: str) -> RequestRecord | None:
        return self._seen.pop(0) if len(self._seen) > 1 else self._seen[0]


def test_each_state_change_is_one_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(request_commands, "POLL_SECONDS", 0)
    waiting = _record(
        RequestStatus.WAITING,
        wait_for_capacity_until=NOW + timedelta(hours=2),
        waiting_for=[{"capacityReservationId": "cr-0block", "state": "scheduled",
                      "capacityReservationType": "capacity-block",
                      "startDate": "2026-11-26T13:00:00Z"}],
    )  # fmt: skip
    done = _record(RequestStatus.FULFILLED).model_copy(update={"launched": 2})
    records = _Records(None, None, waiting, waiting, done)
    # When a request is waited on through four polls and three states
    with WaitProgress("r-1") as progress:
        record = wait_for(records, "r-1", 60, progress=progress)  # type: ignore[arg-type]
    # Then each state is told once, in order, and the final record is returned
    assert record == done
    lines = [line.rsplit(" (", 1)[0] for line in capsys.readouterr().err.splitlines()]
    assert lines == [
        "r-1: no record yet: queued, or being served",
        "r-1: Waiting for cr-0block until 2026-11-26T14:00:00.000Z",
        "r-1: Fulfilled (2/2 launched)",
    ]
