"""A rejection is stamped by the launcher's clock (the local cloud's, when it moves it), and a
record never ends before it was received."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.launch import LaunchBatch, Message

RECEIVED = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class _Records:
    def __init__(self) -> None:
        self.stored: list[RequestRecord] = []

    def bind_body(self, request_id: str, body_hash: str) -> str:
        return body_hash  # the first body: bound to it

    def put_record_if_absent(self, record: RequestRecord) -> bool:
        self.stored.append(record)
        return True


class _Counts:
    def rejected(self) -> None:
        pass


@pytest.mark.parametrize(
    ("clock", "finished"),
    [
        (RECEIVED + timedelta(hours=3), RECEIVED + timedelta(hours=3)),  # the clock moved on
        (RECEIVED - timedelta(seconds=2), RECEIVED),  # a clock behind the queue's
    ],
    ids=["moved-on", "behind"],
)
def test_a_rejection_is_stamped_by_the_launchers_clock(clock: datetime, finished: datetime) -> None:
    records = _Records()
    published: list[Any] = []
    batch = LaunchBatch(
        None,  # type: ignore[arg-type]  # an invalid body never reaches the launcher
        publish=lambda *events: published.extend(events),
        records=records,  # type: ignore[arg-type]
        claims=None,  # type: ignore[arg-type]  # nor idempotency
        telemetry=_Counts(),  # type: ignore[arg-type]
        clock=lambda: clock,
    )

    body = json.dumps({"requestId": "r-1", "nodePool": "general", "count": 0})
    assert batch.process([Message("m-1", body, RECEIVED)]) == []

    [record] = records.stored
    assert record.received_at == RECEIVED
    assert record.finished_at == finished
    assert len(published) == 1
