"""`submit --wait` and `status --wait` say what the request is doing while they wait: a line per
state change when stderr is not a terminal (a spinner when it is)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_cli.views import WaitProgress
from capacity_launcher_client.client import Progress

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _record(status: RequestStatus, **fields: Any) -> RequestRecord:
    return RequestRecord(
        request_id="r-1", status=status, requested=2, launched=0, received_at=NOW,
        finished_at=NOW, **fields,
    )  # fmt: skip


def test_each_state_change_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    waiting = _record(
        RequestStatus.WAITING,
        wait_for_capacity_until=NOW + timedelta(hours=2),
        waiting_for=[{"capacityReservationId": "cr-0block", "state": "scheduled",
                      "capacityReservationType": "capacity-block",
                      "startDate": "2026-11-26T13:00:00Z"}],
    )  # fmt: skip
    done = _record(RequestStatus.FULFILLED).model_copy(update={"launched": 2})
    # When a wait looks five times and sees three states
    with WaitProgress("r-1") as progress:
        for seconds, record in enumerate([None, None, waiting, waiting, done]):
            progress(Progress("r-1", record, seconds * 1.0))
    # Then each state is told once, in order, with the time waited so far
    assert capsys.readouterr().err.splitlines() == [
        "r-1: no record yet: queued, or being served (0s)",
        "r-1: Waiting for cr-0block until 2026-11-26T14:00:00.000Z (2s)",
        "r-1: Fulfilled (2/2 launched) (4s)",
    ]
