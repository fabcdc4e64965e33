"""The client as a producer's process uses it (issue 40): one boto3 client per service for the
process, one error type for a bad field whether the request is a dict or the model, `wait`
looking less often as it goes (and rarely at a Waiting request) until a deadline, PutEvents'
throttled entries sent again (bounded), and a dead endpoint failing within seconds."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from capacity_launcher.domain.errors import NotFound
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_client import (
    Deployment,
    InvalidLaunchRequest,
    LaunchClient,
    LaunchRequest,
    RequestRejected,
    SubmitRefused,
    WaitTimedOut,
    clients,
)
from capacity_launcher_client.client import MAX_POLL_SECONDS, RESENDS, WAITING_POLL_SECONDS

NOW = datetime.now(UTC)
DEPLOYMENT = Deployment(
    region="us-east-1", event_bus="bus", launch_queue_url="q", dead_letter_queue_url="dlq",
    state_table="state", unavailable_offerings_table="ice", idempotency_table="idem",
)  # fmt: skip


def record(status: RequestStatus) -> RequestRecord:
    return RequestRecord(
        request_id="r-1", status=status, requested=1, launched=0, received_at=NOW, finished_at=NOW,
        wait_for_capacity_until=NOW + timedelta(days=2) if status == "Waiting" else None,
    )  # fmt: skip


class Table:
    """The state table's answers: `looks` records in turn (the last one repeated), each read
    counted."""

    def __init__(self, looks: list[RequestRecord | None], bound: str | None = None) -> None:
        self.looks = looks
        self.bound = bound
        self.reads = 0
        self.bound_reads = 0
        self.now = 0.0
        self.sleeps: list[float] = []

    def get_record(self, request_id: str) -> RequestRecord | None:
        self.reads += 1
        return self.looks[min(self.reads, len(self.looks)) - 1]

    def bound_body(self, request_id: str) -> str | None:
        self.bound_reads += 1
        return self.bound

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Pools:
    """The configuration port: no NodePool at all."""

    def node_pool(self, name: str) -> Any:
        raise NotFound("NodePool", name)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"resolution read {name}: only node_pool was expected")


def launch_client(table: Table, **options: Any) -> LaunchClient:
    return LaunchClient(
        DEPLOYMENT, clock=lambda: table.now, sleep=table.sleep, records=table, **options
    )


def test_one_boto3_client_per_service_and_place_for_the_whole_process() -> None:
    same_place = Deployment(**{**DEPLOYMENT.__dict__, "event_bus": "another-bus"})
    elsewhere = Deployment(**{**DEPLOYMENT.__dict__, "endpoint_url": "http://127.0.0.1:1"})

    first = DEPLOYMENT.client("dynamodb")

    assert DEPLOYMENT.client("dynamodb") is first
    assert same_place.client("dynamodb") is first
    assert DEPLOYMENT.session() is same_place.session()
    assert elsewhere.client("dynamodb") is not first  # another endpoint, its own credentials
    assert DEPLOYMENT.client("events") is not first
    config = first.meta.config
    assert (config.retries["mode"], config.connect_timeout) == ("standard", 3)


def test_a_bad_field_raises_one_error_type_from_the_model_and_from_a_dict() -> None:
    with pytest.raises(InvalidLaunchRequest) as from_model:
        LaunchRequest(request_id="r-1", count=0)
    with pytest.raises(InvalidLaunchRequest) as from_dict:
        launch_client(Table([])).check({"requestId": "r-1", "count": 0})

    assert (
        str(from_model.value)
        == str(from_dict.value)
        == ("count: input should be greater than or equal to 1")
    )
    assert [e.field for e in from_model.value.errors] == ["count"]
    assert from_model.value.request_id == "r-1"


def test_a_capacity_wait_in_the_past_names_its_field() -> None:
    request = LaunchRequest(request_id="r-1", count=1)

    with pytest.raises(InvalidLaunchRequest) as refused:
        launch_client(Table([])).check(request, wait_for_capacity_until=NOW - timedelta(hours=1))

    assert [e.field for e in refused.value.errors] == ["waitForCapacityUntil"]


def test_an_unknown_pool_is_refused_before_anything_is_sent() -> None:
    client = launch_client(Table([]), config=Pools())

    with pytest.raises(RequestRejected) as refused:
        client.submit(LaunchRequest(request_id="r-1", node_pool="nope", count=1))

    assert refused.value.code == "UnknownNodePool"
    assert "nodePool: no NodePool named 'nope'" in str(refused.value)


def test_wait_looks_less_often_as_it_goes_and_reads_the_binding_once() -> None:
    in_flight: list[RequestRecord | None] = [None] * 12
    table = Table([*in_flight, record(RequestStatus.FULFILLED)], bound=None)
    mine = LaunchRequest(request_id="r-1", count=1)
    table.bound = mine.body_hash()

    final = launch_client(table).wait(mine, timeout=600)

    assert final.status is RequestStatus.FULFILLED
    assert table.sleeps[:3] == [0.5, 0.75, 1.125]
    assert table.sleeps == sorted(table.sleeps)
    assert max(table.sleeps) == MAX_POLL_SECONDS
    # The id was seen bound to this body on the first look: later looks read the record alone.
    assert (table.bound_reads, table.reads) == (1, 13)


def test_a_waiting_request_is_looked_at_rarely_until_the_deadline() -> None:
    table = Table([record(RequestStatus.WAITING)])

    with pytest.raises(WaitTimedOut) as timed_out:
        launch_client(table, now=lambda: NOW).wait(
            "r-1", timeout=None, deadline=NOW + timedelta(minutes=2)
        )

    assert timed_out.value.record is not None
    assert table.sleeps == [WAITING_POLL_SECONDS] * 4
    assert table.now == 120.0  # given up at the deadline, not 75 minutes after the wait's


class Events:
    """PutEvents answering each entry with the next code (None: accepted)."""

    def __init__(self, codes: list[str | None]) -> None:
        self.codes = codes
        self.calls = 0

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        code = self.codes[min(self.calls, len(self.codes) - 1)]
        self.calls += 1
        if code is None:
            return {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": code, "ErrorMessage": "no"}]}


def test_entries_refused_for_throttling_are_sent_again_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = LaunchRequest(request_id="r-1", count=1)
    throttled_then_accepted = Events(["ThrottlingException", "ThrottlingException", None])
    monkeypatch.setitem(clients._CLIENTS, (DEPLOYMENT.target, "events"), throttled_then_accepted)
    table = Table([])

    launch_client(table).submit(request, check=False)

    assert throttled_then_accepted.calls == 3
    assert table.sleeps == [0.2, 0.4]

    always_throttled = Events(["ThrottlingException"])
    monkeypatch.setitem(clients._CLIENTS, (DEPLOYMENT.target, "events"), always_throttled)
    with pytest.raises(SubmitRefused, match="ThrottlingException"):
        launch_client(Table([])).submit(request, check=False)
    assert always_throttled.calls == RESENDS + 1

    refused = Events(["AccessDeniedException"])  # not worth sending again
    monkeypatch.setitem(clients._CLIENTS, (DEPLOYMENT.target, "events"), refused)
    with pytest.raises(SubmitRefused, match="AccessDeniedException"):
        launch_client(Table([])).submit(request, check=False)
    assert refused.calls == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_endpoint_nobody_answers_fails_within_seconds_naming_it() -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    dead = Deployment(**{**DEPLOYMENT.__dict__, "endpoint_url": endpoint})
    began = time.monotonic()

    with pytest.raises(EndpointConnectionError, match=endpoint):
        LaunchClient(dead).get("r-1")

    assert time.monotonic() - began < 5
