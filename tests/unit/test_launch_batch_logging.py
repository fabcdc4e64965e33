"""Groups are served side by side: each thread's log lines name its own requests."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.domain.records.claims import Claim, ClaimState
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.service.telemetry import LaunchTelemetry
from capacity_launcher.startup import system_clock


class _Claims:
    def claim(self, payload: Any, remaining_ms: Any = None) -> Claim:
        return Claim(ClaimState.CLAIMED)

    def release(self, payload: Any) -> None: ...


class _Records:
    """Every requestId is bound to the body it arrives with (no other body under it)."""

    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]:
        return body_hash, True


class _Prepared:
    def __init__(self, request: Any) -> None:
        self.request = request
        self.coalescing_key = (request.node_pool,)


class _Launcher:
    """Each group waits until both are being served, then fails naming its own request."""

    def __init__(self) -> None:
        self.both_serving = threading.Barrier(2, timeout=10)

    def prepare(self, request: Any, received_at: datetime, origin: Any = None) -> _Prepared:
        return _Prepared(request)

    def serve(self, group: list[_Prepared], first: Any = ()) -> Any:
        self.both_serving.wait()
        raise RuntimeError(f"failed for {group[0].request.request_id}")


def test_each_group_logs_its_own_request_ids(log_lines: io.StringIO) -> None:
    # Given two requests for two pools, served by two threads at the same time
    batch = LaunchBatch(
        _Launcher(),  # type: ignore[arg-type]
        publish=lambda *events: None,
        records=_Records(),  # type: ignore[arg-type]
        claims=_Claims(),  # type: ignore[arg-type]
        telemetry=LaunchTelemetry(),
        clock=system_clock,
    )
    now = datetime.now(UTC)
    messages = [
        Message(
            f"m-{n}", json.dumps({"requestId": f"r-{n}", "nodePool": f"p-{n}", "count": 1}), now
        )
        for n in (1, 2)
    ]
    # When both fail while the other is still being served
    assert sorted(batch.process(messages)) == ["m-1", "m-2"]
    # Then each error line carries the request ids of the group that failed, not the other's
    lines = [json.loads(line) for line in log_lines.getvalue().splitlines() if line]
    errors = [line for line in lines if line.get("level") == "ERROR"]
    assert len(errors) == 2
    for line in errors:
        (request_id,) = line["request_ids"]
        assert f"failed for {request_id}" in line["exception"], line
