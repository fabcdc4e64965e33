"""One SQS batch of launch requests: validate, claim, coalesce, launch concurrently, report.

Idempotency is Powertools' DynamoDB persistence layer, claimed per requestId: a duplicate that
finished re-publishes its recorded outcome; one still in progress goes back to the queue. Requests
that can share a CreateFleet are served together; groups run concurrently.

A request that waits for scheduled capacity (`waitForCapacityUntil`) is held in the launch queue
(a delayed copy of its message) with a Waiting record naming that copy; its claim is released so
the copy can claim it again. Only the copy the record names carries the wait: any other delivery
of the same requestId meanwhile is dropped, so a wait never starts twice.

A requestId is bound to the first body it arrives with (the hash of the normalized request,
stored beside its record before anything is launched). A delivery with another body under that
id is Rejected (`RequestIdReused`), published but not stored, never retried: it never finishes,
counts or records for the first request, whichever state that one is in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from capacity_launcher.domain.errors import (
    InvalidLaunchRequest,
    RequestIdReused,
    RequestRejected,
    Throttled,
    Transient,
)
from capacity_launcher.domain.launch_request import (
    LaunchRequest,
    Message,
    invalid_body_hash,
    parse_launch_request,
)
from capacity_launcher.domain.status import ErrorDetail, Event, RequestRecord, RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.launcher import Launcher, utcnow
from capacity_launcher.service.ports import HandBack, Records
from capacity_launcher.service.resolution import Prepared
from capacity_launcher.service.telemetry import LaunchTelemetry

# Message is the domain's; handlers take it from here (they never import the domain).
__all__ = ["LaunchBatch", "Message"]

_COMPLETED = "COMPLETED"


@dataclass
class _Claimed:
    message: Message
    request: LaunchRequest
    payload: dict[str, Any]
    prepared: Prepared | None = None
    # It was Waiting already: the Launch Waiting event was published when the wait began.
    was_waiting: bool = False


class LaunchBatch:
    def __init__(
        self,
        launcher: Launcher,
        publish: Callable[..., None],
        records: Records,
        persistence: BasePersistenceLayer,
        telemetry: LaunchTelemetry,
        *,
        max_workers: int = 10,
        queue: HandBack | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._launcher = launcher
        self._publish = publish
        self._records = records
        self._persistence = persistence
        self._telemetry = telemetry
        self._max_workers = max_workers
        self._queue = queue
        # The launcher's clock: a rejection is stamped as the launcher stamps what it serves.
        self._clock = clock

    def process(
        self, messages: Sequence[Message], remaining_ms: Callable[[], int] | None = None
    ) -> list[str]:
        """Serve a batch; returns the ids of messages to hand back to the queue."""
        in_progress: list[str] = []
        failures = self._process(messages, remaining_ms, in_progress)
        # A duplicate of a request still in progress keeps the queue's own (longer) visibility:
        # coming back in seconds would only spend its receives before the original finishes.
        soon = set(failures) - set(in_progress)
        if self._queue is not None and soon:
            self._queue.hand_back([m for m in messages if m.message_id in soon])
        return failures

    def _process(
        self,
        messages: Sequence[Message],
        remaining_ms: Callable[[], int] | None,
        in_progress: list[str],
    ) -> list[str]:
        failures: list[str] = []
        claimed: list[_Claimed] = []
        parsed = [(message, self._parse(message)) for message in messages]
        valid_ids = {r.request_id for _, r in parsed if isinstance(r, LaunchRequest)}
        for message, request in parsed:
            if isinstance(request, InvalidLaunchRequest):
                # A valid body with the same requestId in this batch owns that id's outcome.
                try:
                    self._refuse(message, request, owned=request.request_id not in valid_ids)
                except Exception:
                    # Its record or event could not be written: only this message goes back.
                    logger.exception("could not record the rejection; the retry does it")
                    failures.append(message.message_id)
                continue
            payload = request.model_dump(mode="json", by_alias=True)
            verdict, outcome = self._claim(payload, remaining_ms)
            if verdict != "busy":
                verdict = self._bound(_Claimed(message, request, payload), verdict, outcome)
            if verdict == "claimed":
                claimed.append(_Claimed(message, request, payload))
            elif verdict in ("busy", "in_progress"):
                failures.append(message.message_id)
                if verdict == "in_progress":
                    in_progress.append(message.message_id)

        groups: dict[tuple[Any, ...], list[_Claimed]] = {}
        for item in claimed:
            try:
                received_at = self._wait_carried(item)
                if received_at is None:
                    self._release([item])  # another delivery carries this request's wait
                    continue
                # A held copy is sent by the launcher itself: its requester was checked against
                # where the request came from when the wait began, and is the Waiting record's.
                origin = None if item.was_waiting else item.message.origin
                item.prepared = self._launcher.prepare(item.request, received_at, origin)
            except RequestRejected as rejected:
                if not self._reject(item, rejected):
                    failures.append(item.message.message_id)
                continue
            except Exception:
                logger.exception(
                    "could not resolve request", extra={"requestId": item.request.request_id}
                )
                self._release([item])
                failures.append(item.message.message_id)
                continue
            groups.setdefault(item.prepared.coalescing_key, []).append(item)

        if groups:
            workers = min(self._max_workers, len(groups))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch") as pool:
                for failed in pool.map(self._serve_group, groups.values()):
                    failures += failed
        return failures

    # -- steps ----------------------------------------------------------------------------------

    def _parse(self, message: Message) -> LaunchRequest | InvalidLaunchRequest:
        try:
            return parse_launch_request(message.body)
        except InvalidLaunchRequest as invalid:
            return invalid

    def _refuse(self, message: Message, invalid: InvalidLaunchRequest, *, owned: bool) -> None:
        logger.warning(
            "launch request rejected",
            extra={
                "messageId": message.message_id,
                "requestId": invalid.request_id,
                "errors": [str(e) for e in invalid.errors],
                "recorded": owned and bool(invalid.request_id),
            },
        )
        if not invalid.request_id:
            # Nothing to key a record or an event on: the log line and LaunchDropped are all.
            self._telemetry.dropped()
            return
        self._telemetry.rejected()
        if owned and self._reused(message, invalid):
            return
        if owned:
            record = self._rejected_record(
                invalid.request_id,
                invalid.node_pool,
                None,
                message.received_at,
                [ErrorDetail(code=invalid.code, message=str(e)) for e in invalid.errors]
                or [ErrorDetail(code=invalid.code, message=str(invalid))],
                requested=invalid.count or 0,
            )
            # An invalid payload must never overwrite the outcome of a valid request; a
            # delivery that finds a record re-publishes it (the first may have died before).
            if not self._records.put_record_if_absent(record):
                stored = self._records.get_record(invalid.request_id)
                if stored is None:
                    # Refused, yet no record is there: never publish one that is not stored.
                    raise Transient("PutItem", "RecordNotWritten")
                record = stored
            self._publish(Event(record.detail_type, record.to_detail()))

    def _reused(self, message: Message, invalid: InvalidLaunchRequest) -> bool:
        """Bind the requestId to this invalid body, as a valid one is bound; True (its rejection
        published, not stored) when it is bound to another body already."""
        request_id = invalid.request_id or ""
        body_hash = invalid_body_hash(message.body)
        if self._records.bind_body(request_id, body_hash) == body_hash:
            return False
        refused = RequestIdReused(request_id)
        record = self._rejected_record(
            request_id,
            invalid.node_pool,
            None,
            message.received_at,
            [ErrorDetail(code=refused.code, message=refused.reason)],
            requested=invalid.count or 0,
        )
        self._publish(Event(record.detail_type, record.to_detail()))
        return True

    def _wait_carried(self, item: _Claimed) -> datetime | None:
        """When the request arrived, for a delivery that carries it; None for a duplicate of one
        that waits for scheduled capacity, held by another message."""
        request = item.request
        if request.wait_for_capacity_until is None:
            return item.message.received_at
        if self._queue is None or not self._queue.can_hold(item.message):
            # Only a message from the launch queue can wait in it (not a direct invocation).
            logger.warning(
                "waitForCapacityUntil ignored: the request did not come from the launch queue",
                extra={"requestId": request.request_id},
            )
            item.request = request.model_copy(update={"wait_for_capacity_until": None})
            return item.message.received_at
        waiting = self._records.waiting(request.request_id)
        if waiting is None:
            return item.message.received_at
        record, held_by = waiting
        mine = held_by == item.message.message_id
        if record.is_final and not mine:
            return item.message.received_at  # a duplicate of a finished request: replayed
        if not mine:
            logger.info(
                "already waiting for scheduled capacity: this delivery is dropped",
                extra={"requestId": request.request_id, "heldBy": held_by},
            )
            return None
        if record.is_final or not self._records.take_wait(
            request.request_id, item.message.message_id
        ):
            # The backstop ended the wait this copy held, and publishes its outcome.
            logger.info(
                "the wait this delivery held was ended by the backstop: dropped",
                extra={"requestId": request.request_id},
            )
            return None
        item.was_waiting = True
        item.request = request.model_copy(update={"requester": record.requester})
        return record.received_at

    def _bound(self, item: _Claimed, verdict: str, outcome: dict[str, Any] | None) -> str:
        """The verdict ("replayed" once a finished request's `outcome` is re-published), unless
        the requestId is bound to another body: then "reused" (refused and published, the claim
        released), or "busy" when that could not be checked or said."""
        request = item.request
        try:
            body_hash = request.body_hash()
            if verdict == "claimed":
                bound = self._records.bind_body(request.request_id, body_hash)
            else:
                # Not ours to bind: a duplicate only compares with what its first delivery bound.
                bound = self._records.bound_body(request.request_id) or body_hash
        except Exception:
            logger.exception(
                "could not check the body against its requestId",
                extra={"requestId": request.request_id},
            )
            if verdict == "claimed":
                self._release([item])
            return "busy"
        if bound == body_hash:
            if verdict == "completed":
                self._replay(item.payload, outcome or {})
                return "replayed"
            return verdict
        if verdict == "claimed":
            self._release([item])  # the first request's redelivery must find the id free
        try:
            self._refuse_reused(item)
        except Exception:
            logger.exception("could not publish the rejection; the retry does it")
            return "busy"
        return "reused"

    def _refuse_reused(self, item: _Claimed) -> None:
        request = item.request
        refused = RequestIdReused(request.request_id)
        logger.warning(
            "launch request rejected: its requestId names another request",
            extra={"messageId": item.message.message_id, "requestId": request.request_id},
        )
        self._telemetry.rejected()
        record = self._rejected_record(
            request.request_id,
            request.node_pool,
            request.requester,
            item.message.received_at,
            [ErrorDetail(code=refused.code, message=refused.reason)],
            requested=request.count,
        )
        # Published, never stored: the requestId's record is the first request's.
        self._publish(Event(record.detail_type, record.to_detail()))

    def _claim(
        self, payload: dict[str, Any], remaining_ms: Callable[[], int] | None
    ) -> tuple[str, dict[str, Any] | None]:
        """The verdict: claimed, completed (with its recorded outcome), in_progress or busy."""
        try:
            self._persistence.save_inprogress(payload, remaining_ms() if remaining_ms else None)
            return "claimed", None
        except IdempotencyItemAlreadyExistsError as exists:
            try:
                record = exists.old_data_record or self._persistence.get_record(payload)
            except IdempotencyItemNotFoundError:
                # The claim that refused ours is gone already: try again on the next delivery.
                return "busy", None
        except Exception:
            # One message's claim failing (throttling, a fault) must not fail the whole batch.
            logger.exception(
                "could not claim the request", extra={"requestId": payload.get("requestId")}
            )
            return "busy", None
        if record is not None and record.status == _COMPLETED:
            return "completed", record.response_json_as_dict() or {}
        return "in_progress", None

    def _replay(self, payload: dict[str, Any], detail: dict[str, Any]) -> None:
        """Re-publish a finished request's recorded outcome (a duplicate delivery)."""
        self._publish(Event(RequestRecord.from_detail(detail).detail_type, detail))
        logger.info(
            "duplicate delivery: re-published the recorded outcome",
            extra={"requestId": payload.get("requestId")},
        )

    def _reject(self, item: _Claimed, rejected: RequestRejected) -> bool:
        """Record and publish a rejection; False (claim released) if that could not be done.

        A request that was served keeps its outcome: a delivery of it after the idempotency
        window (its pool deleted since, say) re-publishes what it ended with. A Waiting request's
        wait ends with the rejection, and an earlier rejection is replaced (it launched nothing)."""
        record = self._rejected_record(
            item.request.request_id,
            item.request.node_pool,
            item.request.requester,
            item.message.received_at,
            [ErrorDetail(code=rejected.code, message=rejected.reason)],
            requested=item.request.count,
        )
        try:
            outcome = record
            if not self._records.put_record_if_absent(record):
                stored = self._records.get_record(item.request.request_id)
                if stored is None:
                    # Refused, yet no record is there: never publish one that is not stored.
                    raise Transient("PutItem", "RecordNotWritten")
                if stored.is_final and stored.status is not RequestStatus.REJECTED:
                    outcome = stored
                else:  # a wait ends; an earlier rejection of this body is replaced
                    self._records.put_record(record)
            if outcome is record:
                self._telemetry.rejected()
            self._finish([(item, outcome)])
        except Exception:
            logger.exception("could not record the rejection; the retry does it")
            self._release([item])
            return False
        return True

    def _serve_group(self, group: list[_Claimed]) -> list[str]:
        # Per thread: groups are served side by side, each logging its own request ids.
        logger.thread_safe_append_keys(request_ids=[g.request.request_id for g in group])
        try:
            return self._serve_group_logged(group)
        finally:
            logger.thread_safe_remove_keys(["request_ids"])

    def _serve_group_logged(self, group: list[_Claimed]) -> list[str]:
        try:
            report = self._launcher.serve([g.prepared for g in group if g.prepared])
        except Transient as transient:
            logger.warning(
                "transient fault outlasted the retries: handing the requests back",
                extra={
                    "operation": transient.operation,
                    "code": transient.code,
                    "throttled": isinstance(transient, Throttled),
                },
            )
            self._telemetry.throttled()
            self._release(group)
            return [g.message.message_id for g in group]
        except Exception:
            logger.exception("launch failed unexpectedly; handing the requests back to the queue")
            self._release(group)
            return [g.message.message_id for g in group]
        self._telemetry.served(report, {g.request.request_id for g in group if g.was_waiting})
        held = [g for g in group if g.request.request_id in report.waiting]
        done = [g for g in group if g not in held]
        failed = [
            g.message.message_id
            for g in held
            if not self._hold(g, report.records[g.request.request_id], report.waiting)
        ]
        try:
            self._finish([(g, report.records[g.request.request_id]) for g in done])
        except Exception:
            logger.exception("could not publish the outcome; the retry re-publishes it")
            self._release(done)
            return [*failed, *(g.message.message_id for g in done)]
        return failed

    def _hold(self, item: _Claimed, record: RequestRecord, waiting: dict[str, int]) -> bool:
        """Hold a waiting request in the queue and record whose message carries it; False (the
        delivery is handed back) if either fails. The claim is released either way."""
        assert self._queue is not None  # only a holdable message is let wait (_wait_carried)
        try:
            held_by = self._queue.hold(item.message, waiting[record.request_id])
            self._records.put_record(record, held_by=held_by)
            if not item.was_waiting:
                self._publish(Event(record.detail_type, record.to_detail()))
        except Exception:
            logger.exception(
                "could not hold the waiting request; handed back",
                extra={"requestId": record.request_id},
            )
            return False
        finally:
            self._release([item])
        logger.info(
            "waiting for scheduled capacity",
            extra={
                "requestId": record.request_id,
                "until": record.to_detail()["waitForCapacityUntil"],
                "reservations": [r.capacity_reservation_id for r in record.waiting_for],
            },
        )
        return True

    def _finish(self, outcomes: Iterable[tuple[_Claimed, RequestRecord]]) -> None:
        outcomes = list(outcomes)
        self._publish(*(Event(r.detail_type, r.to_detail()) for _, r in outcomes))
        for item, record in outcomes:
            self._persistence.save_success(item.payload, record.to_detail())
            logger.info(
                "request finished",
                extra={
                    "requestId": record.request_id,
                    "status": str(record.status),
                    "launched": record.launched,
                },
            )

    def _rejected_record(
        self,
        request_id: str,
        node_pool: str | None,
        requester: str | None,
        received_at: datetime,
        errors: list[ErrorDetail],
        requested: int = 0,
    ) -> RequestRecord:
        return RequestRecord.rejected(
            request_id,
            errors,
            received_at=received_at,
            finished_at=max(self._clock(), received_at),
            node_pool=node_pool,
            requester=requester,
            requested=requested,
        )

    def _release(self, items: Iterable[_Claimed]) -> None:
        for item in items:
            try:
                self._persistence.delete_record(item.payload, RuntimeError("released for retry"))
            except Exception:
                logger.exception(
                    "could not release the idempotency claim",
                    extra={"requestId": item.request.request_id},
                )
