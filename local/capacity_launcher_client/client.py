"""Submit launch requests and learn their outcome, from Python (README "Producers").

The request is the service's own model (`capacity_launcher.domain.launch_request`), so a request
the launcher would reject is refused here, by field, before anything is sent. The outcome is
the request's record in the state table (`status`'s JSON); a producer that may not read the
table subscribes to the status events on the bus instead (docs/producers.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.errors import RequestIdReused
from capacity_launcher.domain.launch_request import LaunchRequest, parse_launch_request
from capacity_launcher.domain.records.status import LAUNCH_REQUESTED, ErrorDetail, RequestRecord
from capacity_launcher_client.deployment import Deployment, resolve

# Producers are not the service: status events carry source "capacity-launcher".
CLIENT_SOURCE = "capacity-launcher.client"
POLL_SECONDS = 0.5
DEFAULT_TIMEOUT_SECONDS = 600.0
# A Waiting request whose held message was lost is ended by the sync this long after its
# deadline at the latest (README, "Waiting for scheduled capacity").
WAIT_BACKSTOP = timedelta(minutes=75)

Via = Literal["bus", "queue"]


class SubmitRefused(RuntimeError):
    """The bus refused the event (PutEvents' FailedEntryCount)."""


class WaitTimedOut(TimeoutError):
    """The request was not finished in time; `record` is what it was then (None: no record
    yet, or a Waiting record)."""

    def __init__(self, request_id: str, seconds: float, record: RequestRecord | None) -> None:
        self.request_id = request_id
        self.record = record
        state = record.status if record is not None else "no record yet"
        super().__init__(f"{request_id} is not finished after {seconds:g}s ({state})")


@dataclass(frozen=True)
class Progress:
    """What `wait` saw on one look: the record so far (None until the launcher wrote one)."""

    request_id: str
    record: RequestRecord | None
    elapsed_seconds: float


ProgressCallback = Callable[[Progress], None]


class RecordReader(Protocol):
    """What the client reads of the state table (adapters/launch_records.py)."""

    def get_record(self, request_id: str) -> RequestRecord | None: ...
    def bound_body(self, request_id: str) -> str | None: ...


def as_request(request: LaunchRequest | Mapping[str, Any]) -> LaunchRequest:
    """The request, validated by the service's own rules (InvalidLaunchRequest names each
    field and rule it breaks)."""
    return request if isinstance(request, LaunchRequest) else parse_launch_request(request)


class LaunchClient:
    """One deployment's producer side: `submit`, `get`, `wait`, `submit_and_wait`."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        source: str = CLIENT_SOURCE,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        records: RecordReader | None = None,
    ) -> None:
        self.deployment = deployment
        self.source = source
        self._poll = poll_seconds
        self._clock = clock
        self._sleep = sleep
        self._records: RecordReader = records or LaunchRecords(
            deployment.state_table, deployment.client("dynamodb")
        )

    @classmethod
    def connect(
        cls, stack_name: str | None = None, *, region: str | None = None, **options: Any
    ) -> LaunchClient:
        """The stack's names from its outputs; without a stack, the running local cloud's."""
        return cls(resolve(stack_name, region), **options)

    def submit(
        self,
        request: LaunchRequest | Mapping[str, Any],
        *,
        via: Via = "bus",
        wait_for_capacity_until: datetime | None = None,
    ) -> LaunchRequest:
        """Validate and send; the request as sent. `wait_for_capacity_until` lets it wait that
        long for reserved capacity that is scheduled but not active yet (README)."""
        validated = as_request(request)
        if wait_for_capacity_until is not None:
            validated = as_request(
                {**validated.to_dict(), "waitForCapacityUntil": _iso(wait_for_capacity_until)}
            )
            problem = validated.capacity_wait_problem(datetime.now(UTC))
            if problem is not None:
                raise ValueError(f"waitForCapacityUntil: {problem}")
        body = json.dumps(validated.to_dict())
        if via == "queue":
            self.deployment.client("sqs").send_message(
                QueueUrl=self.deployment.launch_queue_url, MessageBody=body
            )
            return validated
        response = self.deployment.client("events").put_events(
            Entries=[
                {
                    "Source": self.source,
                    "DetailType": LAUNCH_REQUESTED,
                    "Detail": body,
                    "EventBusName": self.deployment.event_bus,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            entry = response["Entries"][0]
            raise SubmitRefused(
                f"PutEvents refused {validated.request_id}: "
                f"{entry.get('ErrorCode')} {entry.get('ErrorMessage')}"
            )
        return validated

    def get(self, request_id: str) -> RequestRecord | None:
        """The request's record now (None: not received yet, in progress, or unknown)."""
        return self._records.get_record(request_id)

    def wait(
        self,
        request: str | LaunchRequest,
        *,
        timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
        on_progress: ProgressCallback | None = None,
    ) -> RequestRecord:
        """The request's final record (every status but Waiting), polled; `on_progress` is
        called on each look. `timeout=None` waits as long as the request may: a Waiting one
        until its waitForCapacityUntil and the sync's backstop after it. Raises WaitTimedOut.

        Given the LaunchRequest itself, a requestId bound to another body is answered with this
        request's refusal (RequestIdReused), as its Launch Rejected event says, never with the
        other request's record."""
        request_id = request if isinstance(request, str) else request.request_id
        body_hash = None if isinstance(request, str) else request.body_hash()
        started = self._clock()
        while True:
            record = self._look(request_id, body_hash)
            now = self._clock()
            if on_progress is not None:
                on_progress(Progress(request_id, record, now - started))
            if record is not None and record.is_final:
                return record
            if timeout is not None:
                give_up_at = started + timeout
            elif record is None or record.wait_for_capacity_until is None:
                give_up_at = started + DEFAULT_TIMEOUT_SECONDS
            else:
                give_up_at = now + _until_backstop(record.wait_for_capacity_until)
            if now >= give_up_at:
                raise WaitTimedOut(request_id, now - started, record)
            self._sleep(self._poll)

    def submit_and_wait(
        self,
        request: LaunchRequest | Mapping[str, Any],
        *,
        via: Via = "bus",
        timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
        on_progress: ProgressCallback | None = None,
    ) -> RequestRecord:
        sent = self.submit(request, via=via)
        return self.wait(sent, timeout=timeout, on_progress=on_progress)

    def _look(self, request_id: str, body_hash: str | None) -> RequestRecord | None:
        bound = self._records.bound_body(request_id) if body_hash else None
        if bound is not None and bound != body_hash:
            refused = RequestIdReused(request_id)
            error = ErrorDetail(code=refused.code, message=refused.reason)
            return RequestRecord.rejected(request_id, [error], received_at=datetime.now(UTC))
        return self._records.get_record(request_id)


def _until_backstop(deadline: datetime) -> float:
    """Seconds from now until a Waiting request is surely final: its deadline, then the
    sync's backstop for a lost held message."""
    return max((deadline + WAIT_BACKSTOP - datetime.now(UTC)).total_seconds(), 0.0)


def _iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.isoformat()
