"""LaunchClient.wait's patience: a timeout, or (timeout=None) as long as a Waiting request may
wait for scheduled capacity; what each look reports; a reused requestId's refusal."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_client import Deployment, LaunchClient, LaunchRequest, WaitTimedOut
from capacity_launcher_client.client import WAIT_BACKSTOP

NOW = datetime.now(UTC)
DEPLOYMENT = Deployment(
    region="us-east-1", event_bus="bus", launch_queue_url="q", dead_letter_queue_url="dlq",
    state_table="state", unavailable_offerings_table="ice", idempotency_table="idem",
)  # fmt: skip


def record(status: RequestStatus, until: datetime | None = None) -> RequestRecord:
    return RequestRecord(
        request_id="r-1", status=status, requested=1, launched=0, received_at=NOW,
        finished_at=NOW, wait_for_capacity_until=until,
    )  # fmt: skip


class Script:
    """The records a table shows on successive looks, and a clock that moves a minute a look."""

    def __init__(self, looks: list[RequestRecord | None], bound: str | None = None) -> None:
        self._looks: Iterator[RequestRecord | None] = iter(looks)
        self._last: RequestRecord | None = None
        self.bound = bound
        self.now = 0.0

    def get_record(self, request_id: str) -> RequestRecord | None:
        self._last = next(self._looks, self._last)
        return self._last

    def bound_body(self, request_id: str) -> str | None:
        return self.bound

    def sleep(self, seconds: float) -> None:
        self.now += 60.0


def client(script: Script) -> LaunchClient:
    return LaunchClient(DEPLOYMENT, clock=lambda: script.now, sleep=script.sleep, records=script)


def test_a_timeout_gives_up_with_the_record_it_saw() -> None:
    waiting = record(RequestStatus.WAITING, NOW + timedelta(hours=2))
    script = Script([None, waiting])

    with pytest.raises(WaitTimedOut) as timed_out:
        client(script).wait("r-1", timeout=150)

    assert timed_out.value.record == waiting
    assert script.now == 180.0  # looks at 0, 60, 120 and 180 s


def test_without_a_timeout_a_waiting_request_is_followed_past_the_default_to_its_end() -> None:
    # Given a request that waits 20 minutes (past the default 10) and then is fulfilled
    waiting = record(RequestStatus.WAITING, NOW + timedelta(hours=2))
    done = record(RequestStatus.FULFILLED)
    script = Script([None, *[waiting] * 20, done])
    seen = []

    # When it is waited for with timeout=None
    final = client(script).wait("r-1", timeout=None, on_progress=seen.append)

    # Then it is followed to its end, each look reported
    assert final == done
    assert [p.record.status if p.record else None for p in seen] == [
        None,
        *[RequestStatus.WAITING] * 20,
        RequestStatus.FULFILLED,
    ]
    assert seen[-1].elapsed_seconds == 21 * 60.0


def test_without_a_timeout_a_wait_ends_after_the_deadline_and_the_backstop() -> None:
    # Given a request whose deadline and the sync's backstop after it have passed
    waiting = record(RequestStatus.WAITING, NOW - WAIT_BACKSTOP - timedelta(minutes=1))
    script = Script([waiting])

    with pytest.raises(WaitTimedOut):
        client(script).wait("r-1", timeout=None)

    assert script.now == 0.0  # one look: nothing more can come


def test_a_request_id_bound_to_another_body_is_answered_with_this_ones_refusal() -> None:
    other = record(RequestStatus.FULFILLED)
    script = Script([other], bound="hash-of-another-body")
    mine = LaunchRequest(request_id="r-1", count=2)

    refusal = client(script).wait(mine, timeout=10)

    assert refusal.status is RequestStatus.REJECTED
    assert [e.code for e in refusal.errors] == ["RequestIdReused"]
