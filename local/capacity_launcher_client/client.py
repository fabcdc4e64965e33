"""Submit launch requests and learn their outcome, from Python (README "Producers").

The request is the service's own model (`capacity_launcher.domain.launch_request`), so a request
the launcher would reject is refused here, by field, before anything is sent. The outcome is
the request's record in the state table (`status`'s JSON); a producer that may not read the
table subscribes to the status events on the bus instead (docs/producers.md).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from botocore.exceptions import ClientError
from pydantic import ModelWrapValidatorHandler, ValidationError, model_validator

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.aws_errors import is_access_denied
from capacity_launcher.domain.errors import InvalidLaunchRequest, RequestIdReused
from capacity_launcher.domain.field_errors import FieldError, field_errors
from capacity_launcher.domain.launch_request import LaunchRequest as ServiceLaunchRequest
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.records.status import (
    LAUNCH_REQUESTED,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
)
from capacity_launcher.service import resolution
from capacity_launcher.service.ports import Configuration
from capacity_launcher_client.deployment import Deployment, resolve

# Producers are not the service: status events carry source "capacity-launcher".
CLIENT_SOURCE = "capacity-launcher.client"
# `wait` looks after POLL_SECONDS, then each look BACKOFF times later than the last, up to
# MAX_POLL_SECONDS while the request is in flight; a Waiting request (for capacity scheduled
# hours or days ahead) is looked at every WAITING_POLL_SECONDS.
POLL_SECONDS = 0.5
BACKOFF = 1.5
MAX_POLL_SECONDS = 5.0
WAITING_POLL_SECONDS = 30.0
DEFAULT_TIMEOUT_SECONDS = 600.0
# PutEvents entries refused for throttling or an internal failure are sent again, this many
# times at most, backing off from RESEND_SECONDS (AWS: "retry the failed entries").
RESENDS = 4
RESEND_SECONDS = 0.2
_RESENT_CODES = frozenset({"ThrottlingException", "InternalFailure", "InternalException"})
# How long `submit` trusts its copy of the NodePools (a copy may say "found", never "missing":
# a pool unknown to it is looked up again before the request is refused).
CONFIG_CACHE_SECONDS = 30.0
# A Waiting request whose held message was lost is ended by the sync this long after its
# deadline at the latest (README, "Waiting for scheduled capacity").
WAIT_BACKSTOP = timedelta(minutes=75)

Via = Literal["bus", "queue"]


class LaunchRequest(ServiceLaunchRequest):
    """The service's launch request (`capacity_launcher.domain.launch_request`): built from
    keyword arguments (`request_id=...`, `node_pool=...`) or validated from the JSON's
    camelCase. A field that breaks its rule raises InvalidLaunchRequest naming the field and the
    rule, as a dict given to `submit` does (never pydantic's ValidationError)."""

    @model_validator(mode="wrap")
    @classmethod
    def _refused_by_field(
        cls, data: Any, handler: ModelWrapValidatorHandler[LaunchRequest]
    ) -> LaunchRequest:
        try:
            return handler(data)
        except ValidationError as error:
            raise InvalidLaunchRequest(_request_id_of(data), field_errors(error)) from None


def _request_id_of(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return None
    found = data.get("requestId", data.get("request_id"))
    return found if isinstance(found, str) else None


class SubmitRefused(RuntimeError):
    """The bus refused the event (PutEvents' FailedEntryCount), after resending entries refused
    for throttling RESENDS times."""


class InvalidCapacityWait(InvalidLaunchRequest, ValueError):
    """`waitForCapacityUntil` breaks the arrival rules (an InvalidLaunchRequest naming it; a
    ValueError too, as it was raised before)."""


class PoolNotChecked(UserWarning):
    """`submit` could not read the NodePools (a producer's policy need not allow it): the
    request's model was checked, its pool is left to the launcher."""


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


def as_request(request: ServiceLaunchRequest | Mapping[str, Any]) -> ServiceLaunchRequest:
    """The request, validated by the service's own rules (InvalidLaunchRequest names each
    field and rule it breaks)."""
    return request if isinstance(request, ServiceLaunchRequest) else parse_launch_request(request)


class LaunchClient:
    """One deployment's producer side: `check`, `submit`, `get`, `wait`, `submit_and_wait`.

    A client reuses one boto3 client per AWS service for the process (clients.py): build one
    LaunchClient and keep it, or build many; neither builds a boto3 client per call."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        source: str = CLIENT_SOURCE,
        poll_seconds: float = POLL_SECONDS,
        max_poll_seconds: float = MAX_POLL_SECONDS,
        waiting_poll_seconds: float = WAITING_POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        records: RecordReader | None = None,
        config: Configuration | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.deployment = deployment
        self.source = source
        self._poll = poll_seconds
        self._max_poll = max(max_poll_seconds, poll_seconds)
        self._waiting_poll = waiting_poll_seconds
        self._clock = clock
        self._sleep = sleep
        self._now = now or (lambda: datetime.now(UTC))
        # Read only: the records' clock stamps retention on writes, which the client never makes.
        self._records: RecordReader = records or LaunchRecords(
            deployment.state_table, deployment.client("dynamodb"), clock=time.time
        )
        # Read only as well: the documents' clock stamps `updatedAt` on applies.
        self._config: Configuration = config or ConfigStore(
            deployment.state_table,
            deployment.client("dynamodb"),
            CONFIG_CACHE_SECONDS,
            clock=self._now,
        )

    @classmethod
    def connect(
        cls, stack_name: str | None = None, *, region: str | None = None, **options: Any
    ) -> LaunchClient:
        """The stack's names from its outputs; without a stack, the running local cloud's."""
        return cls(resolve(stack_name, region), **options)

    def check(
        self,
        request: ServiceLaunchRequest | Mapping[str, Any],
        *,
        wait_for_capacity_until: datetime | None = None,
    ) -> ServiceLaunchRequest:
        """The request as the launcher would read it, judged as it would judge it on arrival
        (the pool it names exists, its requirements only narrow the pool's, its tags fit):
        InvalidLaunchRequest (a field breaks its rule) or RequestRejected (the launcher would
        reject it, with the same code: UnknownNodePool...). Without read access to the
        NodePools, a PoolNotChecked warning, and the pool is left to the launcher."""
        validated = as_request(request)
        if wait_for_capacity_until is not None:
            validated = as_request(
                {**validated.to_dict(), "waitForCapacityUntil": _iso(wait_for_capacity_until)}
            )
        problem = validated.capacity_wait_problem(self._now())
        if problem is not None:
            error = FieldError("waitForCapacityUntil", problem)
            raise InvalidCapacityWait(validated.request_id, [error])
        try:
            resolution.resolve(self._config, validated, self._now())
        except ClientError as error:
            if not is_access_denied(error.response.get("Error", {}).get("Code", "")):
                raise
            warnings.warn(
                "the pool was not checked (no read access to the NodePools); "
                "the launcher will judge it",
                PoolNotChecked,
                stacklevel=2,
            )
        return validated

    def submit(
        self,
        request: ServiceLaunchRequest | Mapping[str, Any],
        *,
        via: Via = "bus",
        wait_for_capacity_until: datetime | None = None,
        check: bool = True,
    ) -> ServiceLaunchRequest:
        """Validate, check against the pools (`check`, above) and send; the request as sent.
        `wait_for_capacity_until` lets it wait that long for reserved capacity that is
        scheduled but not active yet (README)."""
        if check:
            validated = self.check(request, wait_for_capacity_until=wait_for_capacity_until)
        elif wait_for_capacity_until is not None:
            validated = as_request(
                {
                    **as_request(request).to_dict(),
                    "waitForCapacityUntil": _iso(wait_for_capacity_until),
                }
            )
        else:
            validated = as_request(request)
        body = json.dumps(validated.to_dict())
        if via == "queue":
            self.deployment.client("sqs").send_message(
                QueueUrl=self.deployment.launch_queue_url, MessageBody=body
            )
        else:
            self._put_event(validated.request_id, body)
        return validated

    def _put_event(self, request_id: str, body: str) -> None:
        """PutEvents, sending the entry again when it failed for throttling (bounded)."""
        entry = {
            "Source": self.source,
            "DetailType": LAUNCH_REQUESTED,
            "Detail": body,
            "EventBusName": self.deployment.event_bus,
        }
        events = self.deployment.client("events")
        for attempt in range(RESENDS + 1):
            response = events.put_events(Entries=[entry])
            if not response.get("FailedEntryCount"):
                return
            failed = response["Entries"][0]
            if failed.get("ErrorCode") not in _RESENT_CODES or attempt == RESENDS:
                raise SubmitRefused(
                    f"PutEvents refused {request_id}: "
                    f"{failed.get('ErrorCode')} {failed.get('ErrorMessage')}"
                    + (f" (sent {attempt + 1} times)" if attempt else "")
                )
            self._sleep(RESEND_SECONDS * 2**attempt)

    def get(self, request_id: str) -> RequestRecord | None:
        """The request's record now (None: not received yet, in progress, or unknown)."""
        return self._records.get_record(request_id)

    def wait(
        self,
        request: str | ServiceLaunchRequest,
        *,
        timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
        deadline: datetime | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> RequestRecord:
        """The request's final record (every status but Waiting), polled; `on_progress` is
        called on each look. Looks come POLL_SECONDS apart at first, further apart
        (BACKOFF) up to MAX_POLL_SECONDS, and every WAITING_POLL_SECONDS while the request is
        Waiting. Gives up (WaitTimedOut) after `timeout` seconds or at `deadline`, whichever
        comes first; `timeout=None` and no deadline waits as long as the request may: a
        Waiting one until its waitForCapacityUntil and the sync's backstop after it.

        Given the LaunchRequest itself, a requestId bound to another body is answered with this
        request's refusal (RequestIdReused), as its Launch Rejected event says, never with the
        other request's record."""
        request_id = request if isinstance(request, str) else request.request_id
        body_hash = None if isinstance(request, str) else request.body_hash()
        started = self._clock()
        if deadline is not None:  # on `wait`'s own clock, once
            left = (_aware(deadline) - self._now()).total_seconds()
            timeout = left if timeout is None else min(timeout, left)
        pause = self._poll
        while True:
            record, body_hash = self._look(request_id, body_hash)
            now = self._clock()
            if on_progress is not None:
                on_progress(Progress(request_id, record, now - started))
            if record is not None and record.is_final:
                return record
            give_up_at = _give_up_at(started, now, record, timeout)
            if now >= give_up_at:
                raise WaitTimedOut(request_id, now - started, record)
            waiting = record is not None and record.status is RequestStatus.WAITING
            self._sleep(min(self._waiting_poll if waiting else pause, give_up_at - now))
            pause = min(pause * BACKOFF, self._max_poll)

    def submit_and_wait(
        self,
        request: ServiceLaunchRequest | Mapping[str, Any],
        *,
        via: Via = "bus",
        timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
        deadline: datetime | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> RequestRecord:
        sent = self.submit(request, via=via)
        return self.wait(sent, timeout=timeout, deadline=deadline, on_progress=on_progress)

    def _look(
        self, request_id: str, body_hash: str | None
    ) -> tuple[RequestRecord | None, str | None]:
        """The record now, and the body hash still to confirm: None once the requestId is seen
        bound to this body, so later looks read the record alone (one read, not two)."""
        if body_hash is None:
            return self._records.get_record(request_id), None
        bound = self._records.bound_body(request_id)
        if bound is not None and bound != body_hash:
            refused = RequestIdReused(request_id)
            error = ErrorDetail(code=refused.code, message=refused.reason)
            rejected = RequestRecord.rejected(request_id, [error], received_at=datetime.now(UTC))
            return rejected, body_hash
        return self._records.get_record(request_id), None if bound == body_hash else body_hash


def _give_up_at(
    started: float, now: float, record: RequestRecord | None, timeout: float | None
) -> float:
    """When `wait` gives up, on its own clock: after `timeout`; without one, when a Waiting
    request's wait and the backstop after it are over, else after the default timeout."""
    if timeout is not None:
        return started + timeout
    if record is None or record.wait_for_capacity_until is None:
        return started + DEFAULT_TIMEOUT_SECONDS
    return now + _until_backstop(record.wait_for_capacity_until)


def _until_backstop(deadline: datetime) -> float:
    """Seconds from now until a Waiting request is surely final: its deadline, then the
    sync's backstop for a lost held message."""
    return max((deadline + WAIT_BACKSTOP - datetime.now(UTC)).total_seconds(), 0.0)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return _aware(moment).isoformat()
