"""The triggers of the template, emulated in-process: an SQS event source mapping and a schedule.

The queue poller behaves as Lambda's SQS event source mapping does: it gathers up to BatchSize
messages within MaximumBatchingWindowInSeconds, invokes the function once per batch, deletes
the messages that succeeded and leaves the rest to reappear after the visibility timeout; the
queue's own redrive policy moves a message to its dead-letter queue after maxReceiveCount.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from local_cloud.lambda_runtime import Invocation, LocalFunction

_DELETE_BATCH = 10
_RECEIVE_MAX = 10
# Between short polls of an idle queue, where the mapping does not long-poll.
_IDLE_SECONDS = 0.2
_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}

Listener = Callable[[Invocation], None]
_HISTORY = 200


@dataclass(frozen=True)
class BatchOutcome:
    """One invocation by the mapping: the messages it carried and those handed back."""

    message_ids: tuple[str, ...]
    failed_ids: frozenset[str]


@dataclass(frozen=True)
class QueueMapping:
    """The settings of one SQS event source, as the template declares them."""

    queue_url: str
    queue_arn: str
    batch_size: int = 10
    batching_window_seconds: float = 0.0
    report_batch_item_failures: bool = False
    # An EventBridge rule's private queue: the function gets the event itself, not an SQS batch.
    deliver_body: bool = False


class QueueEventSource:
    """Polls one queue on a thread and invokes one function with SQS batch events.

    With `long_poll_seconds` (a served cloud's), an idle mapping waits in a long-poll
    ReceiveMessage, as Lambda's pollers do: moto answers it as soon as a message is sent (the
    send runs meanwhile: moto_capacity's `waiting_aside`), and within a second of one coming back
    from its visibility timeout or delay. Without, it short-polls every _IDLE_SECONDS."""

    def __init__(
        self,
        function: LocalFunction,
        mapping: QueueMapping,
        sqs: Any,
        listeners: Sequence[Listener] = (),
        long_poll_seconds: int = 0,
    ) -> None:
        self.function = function
        self.mapping = mapping
        self._sqs = sqs
        self._long_poll_seconds = long_poll_seconds
        self._listeners = list(listeners)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"sqs-{function.logical_id}", daemon=True
        )
        self.history: deque[BatchOutcome] = deque(maxlen=_HISTORY)

    def start(self) -> None:
        self._thread.start()

    def halt(self) -> None:
        """Ask the poller to stop after its current poll (`stop()` waits for it)."""
        self._stop.set()

    def stop(self) -> None:
        self.halt()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self._gather()
                if messages:
                    self._deliver(messages)
                elif not self._long_poll_seconds:
                    self._stop.wait(_IDLE_SECONDS)
            except Exception as error:  # the mapping keeps polling, as Lambda's does
                if not self._stop.is_set():
                    print(f"[{self.function.logical_id}] queue poll failed: {error!r}")
                    self._stop.wait(1)

    def _receive(self, wanted: int, wait_seconds: int = 0) -> list[dict[str, Any]]:
        response = self._sqs.receive_message(
            QueueUrl=self.mapping.queue_url,
            MaxNumberOfMessages=min(wanted, _RECEIVE_MAX),
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def _gather(self) -> list[dict[str, Any]]:
        batch = self._receive(self.mapping.batch_size, self._long_poll_seconds)
        if not batch:
            return []
        deadline = time.monotonic() + self.mapping.batching_window_seconds
        while len(batch) < self.mapping.batch_size and time.monotonic() < deadline:
            more = self._receive(self.mapping.batch_size - len(batch))
            batch += more
            if not more:
                self._stop.wait(min(0.1, max(deadline - time.monotonic(), 0)))
        # A message seen twice (its visibility ran out mid-gather) is sent once, newest receipt.
        unique = {m["MessageId"]: m for m in batch}
        return list(unique.values())

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        if self.mapping.deliver_body:
            event: Any = json.loads(messages[0]["Body"])
        else:
            event = sqs_event(messages, self.mapping, self.function.region)
        invocation = self.function.invoke(event)
        failed = self._failed_ids(messages, invocation)
        self.history.append(
            BatchOutcome(tuple(m["MessageId"] for m in messages), frozenset(failed))
        )
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), _DELETE_BATCH):
            self._sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + _DELETE_BATCH])
                ],
            )
        for listener in self._listeners:
            listener(invocation)

    def _failed_ids(self, messages: list[dict[str, Any]], invocation: Invocation) -> set[str]:
        """Which messages go back to the queue: all of them when the invocation failed, or when
        the response names an unknown or empty item (Lambda's rule); else those it names."""
        everything = {m["MessageId"] for m in messages}
        if invocation.failed:
            return everything
        if not self.mapping.report_batch_item_failures:
            return set()
        result = invocation.result if isinstance(invocation.result, Mapping) else {}
        named = {str(f.get("itemIdentifier") or "") for f in result.get("batchItemFailures") or []}
        if not named <= everything:
            return everything
        return named


def sqs_event(
    messages: Sequence[Mapping[str, Any]], mapping: QueueMapping, region: str
) -> dict[str, Any]:
    """The event Lambda builds for an SQS batch."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": {
                    name: _lambda_message_attribute(value)
                    for name, value in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": mapping.queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def _lambda_message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "stringValue": value.get("StringValue"),
        "binaryValue": value.get("BinaryValue"),
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value.get("DataType", "String"),
    }


def schedule_seconds(expression: str) -> int:
    """`rate(1 minute)` as seconds; cron schedules are not emulated."""
    match = _RATE.match(expression.strip())
    if not match:
        raise ValueError(f"only rate(...) schedules run locally, not {expression!r}")
    count, unit = int(match.group(1)), match.group(2).rstrip("s")
    return count * _UNIT_SECONDS[unit]


class ScheduleEventSource:
    """Invokes a function with a Scheduled Event every interval, starting one interval in."""

    def __init__(
        self,
        function: LocalFunction,
        interval_seconds: float,
        rule_arn: str,
        listeners: Sequence[Listener] = (),
    ) -> None:
        self.function = function
        self.interval_seconds = interval_seconds
        self.rule_arn = rule_arn
        self._listeners = list(listeners)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"schedule-{function.logical_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def fire(self) -> Invocation:
        invocation = self.function.invoke(scheduled_event(self.rule_arn, self.function))
        for listener in self._listeners:
            listener(invocation)
        return invocation

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.fire()


def scheduled_event(rule_arn: str, function: LocalFunction) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": function.account_id,
        "time": now.isoformat().replace("+00:00", "Z"),
        "region": function.region,
        "resources": [rule_arn],
        "detail": {},
    }
