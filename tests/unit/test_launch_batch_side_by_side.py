"""A batch's DynamoDB writes for distinct requests go side by side (issue 38: a batch of 10 at
least 4x ten batches of one, at 10 ms per DynamoDB call): each message's claim and binding.
Each is a write of its own requestId's items, so nothing orders them; messages that share a
requestId still go in turn, in the batch's order, so its first delivery in the batch is the one
that claims it. Requests that finished together write nothing more to their claims: each one's
final record, stored before its outcome is published, is the claim's completion.

The fakes meet at a barrier: written one after another, the first write waits for the others
until the barrier's timeout, and the batch fails."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.claims import Claim, ClaimState
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.service.launch.progress import LaunchReport

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# Long enough for ten threads to meet on a loaded machine; a sequential batch fails after it.
MEETING_SECONDS = 20.0


class _Claims:
    """Idempotency claims; `claim` waits at `claim_meeting` when it is set. `complete` (the
    write a claim was marked done with before issue 38) is noted, never expected."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[str, str] = {}  # requestId -> the message id that claimed it
        self.claimed_in_turn: list[str] = []
        self.completed: list[str] = []
        self.claim_meeting: threading.Barrier | None = None

    def claim(self, payload: Mapping[str, Any], remaining_ms: int | None = None) -> Claim:
        request_id = str(payload["requestId"])
        first_of_its_id = request_id not in self.held and request_id not in self.claimed_in_turn
        if self.claim_meeting is not None and first_of_its_id:
            self.claim_meeting.wait()
        with self.lock:
            self.claimed_in_turn.append(request_id)
            if request_id in self.held:
                return Claim(ClaimState.IN_PROGRESS)
            self.held[request_id] = request_id
            return Claim(ClaimState.CLAIMED)

    def complete(self, payload: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        with self.lock:
            self.completed.append(str(payload["requestId"]))

    def release(self, payload: Mapping[str, Any]) -> None:
        with self.lock:
            self.held.pop(str(payload["requestId"]), None)


class _Records:
    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]:
        return body_hash, True


@dataclass
class _Prepared:
    request: LaunchRequest
    received_at: datetime
    coalescing_key: tuple[str, ...]


class _Launcher:
    """Every request resolves into one group (`together`) or a group of its own; each ends
    Rejected (the launch itself is not what is tested)."""

    def __init__(self, together: bool) -> None:
        self.together = together
        self.served: list[list[str]] = []

    def prepare(self, request: LaunchRequest, received_at: datetime, origin: Any) -> _Prepared:
        key = ("all",) if self.together else (request.request_id,)
        return _Prepared(request, received_at, key)

    def serve(self, group: Sequence[_Prepared], first: Sequence[str] = ()) -> LaunchReport:
        self.served.append([p.request.request_id for p in group])
        records = {
            p.request.request_id: RequestRecord.rejected(
                p.request.request_id, [], received_at=p.received_at, finished_at=NOW
            )
            for p in group
        }
        return LaunchReport(records=records)


class _Telemetry:
    def served(self, report: LaunchReport, waiting_already: Any = ()) -> None:
        pass


def _batch(claims: _Claims, launcher: _Launcher) -> tuple[LaunchBatch, list[Any]]:
    published: list[Any] = []
    batch = LaunchBatch(
        launcher,  # type: ignore[arg-type]
        publish=lambda *events: published.extend(events),
        records=_Records(),  # type: ignore[arg-type]
        claims=claims,  # type: ignore[arg-type]
        telemetry=_Telemetry(),  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    return batch, published


def _message(message_id: str, request_id: str) -> Message:
    body = {"requestId": request_id, "nodePool": "default", "count": 1}
    return Message(message_id, body, NOW)


def _messages(count: int) -> list[Message]:
    """Messages m-0... carrying requests r-0..., one each."""
    return [_message(f"m-{n}", f"r-{n}") for n in range(count)]


def test_distinct_requests_are_claimed_side_by_side_and_one_id_in_turn() -> None:
    claims = _Claims()
    # Nine requestIds: each one's first claim waits until all nine are being claimed at once;
    # a second delivery of r-3 comes in the same batch, after the first one.
    claims.claim_meeting = threading.Barrier(9, timeout=MEETING_SECONDS)
    messages = [*_messages(9), _message("m-9", "r-3")]
    launcher = _Launcher(together=False)
    batch, _ = _batch(claims, launcher)

    handed_back = batch.process(messages)

    # The first delivery of r-3 claimed it; the second found it in progress and goes back.
    assert handed_back == ["m-9"]
    assert claims.claimed_in_turn.count("r-3") == 2
    assert sorted(request_id for group in launcher.served for request_id in group) == sorted(
        f"r-{n}" for n in range(9)
    )


def test_requests_that_finished_together_write_nothing_more_to_their_claims() -> None:
    claims = _Claims()
    launcher = _Launcher(together=True)
    batch, published = _batch(claims, launcher)

    handed_back = batch.process(_messages(10))

    assert handed_back == []
    assert launcher.served == [[f"r-{n}" for n in range(10)]]  # one group, in the batch's order
    # Each outcome published; no claim completed nor released: the records complete them
    assert len(published) == 10
    assert claims.completed == []
    assert sorted(claims.held) == sorted(f"r-{n}" for n in range(10))
