"""Bodies without a valid requestId: nothing can be keyed on them, so they are dropped (deleted,
never retried), logged, and counted as LaunchDropped; no record, no event, no LaunchRejected."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.service.launch import LaunchBatch, Message


class _Counts:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def rejected(self) -> None:
        self.calls.append("rejected")

    def dropped(self) -> None:
        self.calls.append("dropped")


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "[]",
        json.dumps({"count": 1}),
        json.dumps({"requestId": "-bad id", "count": 1}),
        json.dumps({"requestId": "x" * 200, "count": 1}),
    ],
    ids=["not-json", "array", "missing", "bad-pattern", "too-long"],
)
def test_a_body_without_a_valid_request_id_is_dropped_and_counted(body: str) -> None:
    published: list[Any] = []
    counts = _Counts()
    batch = LaunchBatch(
        None,  # type: ignore[arg-type]  # nothing reaches the launcher
        publish=lambda *events: published.extend(events),
        records=None,  # type: ignore[arg-type]  # nor the records
        claims=None,  # type: ignore[arg-type]  # nor idempotency
        telemetry=counts,  # type: ignore[arg-type]
    )

    handed_back = batch.process([Message("m-1", body, datetime.now(UTC))])

    assert handed_back == []
    assert published == []
    assert counts.calls == ["dropped"]
