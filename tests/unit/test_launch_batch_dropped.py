"""Bodies without a valid requestId: nothing can be keyed on them, so they are dropped (deleted,
never retried), logged, and counted as LaunchDropped; no record, no event, no LaunchRejected.

A hostile body that has a valid requestId is keyed like every invalid body (issue 24, defect 5):
a Rejected record (stored and published) names the rule it breaks, within the record's size
policy, and the launcher's log says what was wrong without repeating the payload."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.domain.launch_request import TOO_DEEP
from capacity_launcher.domain.records.detail_limits import MAX_DETAIL_BYTES, serialized_size
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.startup import system_clock


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
        clock=system_clock,
    )

    handed_back = batch.process([Message("m-1", body, datetime.now(UTC))])

    assert handed_back == []
    assert published == []
    assert counts.calls == ["dropped"]


class _Records:
    def __init__(self) -> None:
        self.stored: dict[str, RequestRecord] = {}

    def bind_body(self, request_id: str, body_hash: str) -> str:
        return body_hash  # the first body: bound to it

    def put_record_if_absent(self, record: RequestRecord) -> bool:
        if record.request_id in self.stored:
            return False
        # As the state table stores it: the detail, read back.
        self.stored[record.request_id] = RequestRecord.from_detail(record.to_detail())
        return True


def _deep_body(levels: int) -> str:
    nested = "[" * levels + "]" * levels
    return '{"requestId": "deep-1", "count": 2, "tags": ' + nested + ', "x": ' + nested + "}"


def test_a_body_nested_thousands_deep_with_a_request_id_gets_a_rejected_record(
    log_lines: io.StringIO,
) -> None:
    # Given a body of 250 KB nested 60,000 deep twice, with a valid requestId
    body = _deep_body(60_000)
    assert len(body) > 200_000
    published: list[Any] = []
    counts = _Counts()
    records = _Records()
    batch = LaunchBatch(
        None,  # type: ignore[arg-type]  # nothing reaches the launcher
        publish=lambda *events: published.extend(events),
        records=records,  # type: ignore[arg-type]
        claims=None,  # type: ignore[arg-type]  # nor idempotency
        telemetry=counts,  # type: ignore[arg-type]
        clock=system_clock,
    )

    # When it is delivered
    handed_back = batch.process([Message("m-1", body, datetime.now(UTC))])

    # Then it is Rejected, recorded and published (not dropped), naming each field and the rule
    assert handed_back == []
    assert counts.calls == ["rejected"]
    record = records.stored["deep-1"]
    assert record.status is RequestStatus.REJECTED
    assert record.requested == 2
    assert [(e.code, e.message) for e in record.errors] == [
        ("InvalidLaunchRequest", f"tags: {TOO_DEEP}"),
        ("InvalidLaunchRequest", f"x: {TOO_DEEP}"),
    ]
    (event,) = published
    assert event.detail_type == "Launch Rejected"
    assert event.detail == record.to_detail()
    assert serialized_size(event.detail) <= MAX_DETAIL_BYTES
    # And the log line names the message, the key and the rules, but repeats none of the body
    logged = log_lines.getvalue()
    (line,) = [json.loads(x) for x in logged.splitlines() if "rejected" in x]
    assert line["requestId"] == "deep-1" and line["messageId"] == "m-1"
    assert line["errors"] == [f"tags: {TOO_DEEP}", f"x: {TOO_DEEP}"]
    assert "[[" not in logged and len(logged) < 2_000
