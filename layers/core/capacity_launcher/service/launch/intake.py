"""Intake: what a batch does with each message before any pool is visited. Parse it (an invalid
body is Rejected and never retried), claim its requestId, bind the requestId to its first body,
see whether this delivery carries the request's wait for scheduled capacity, and resolve it.

A requestId is bound to the first body it arrives with (the hash of the normalized request,
stored beside its record before anything is launched). A delivery with another body under that
id is Rejected (`RequestIdReused`), published but not stored, never retried: it never finishes,
counts or records for the first request, whichever state that one is in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from capacity_launcher.domain.errors import (
    InvalidLaunchRequest,
    RequestIdReused,
    RequestRejected,
    Transient,
)
from capacity_launcher.domain.launch_request import (
    LaunchRequest,
    Message,
    invalid_body_hash,
    parse_launch_request,
)
from capacity_launcher.domain.records.claims import ClaimState
from capacity_launcher.domain.records.status import ErrorDetail, Event, RequestRecord, RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import HandBack, Records, RequestClaims
from capacity_launcher.service.resolution import Prepared
from capacity_launcher.service.telemetry import LaunchTelemetry


class Admission(Enum):
    """What a delivery's intake decided, once its claim and its body's binding are known."""

    CLAIMED = "claimed"  # this delivery serves the request
    # This delivery serves the request, and is its first: it bound the body, no receive before
    # it, no wait for scheduled capacity. No delivery before it got as far as binding, and the
    # body is bound before anything else is stored, so it has no record, intent or lease to
    # look up (a redelivery, or a copy of the message sent again, finds the body bound).
    FIRST = "first"
    REPLAYED = "replayed"  # it finished before: its recorded outcome was re-published
    REUSED = "reused"  # its requestId names another body: refused and published
    IN_PROGRESS = "in_progress"  # another delivery serves it now: back, the queue's visibility
    BUSY = "busy"  # not decided now: back to the queue soon


@dataclass
class Claimed:
    """A request this delivery holds the claim of."""

    message: Message
    request: LaunchRequest
    payload: dict[str, Any]
    prepared: Prepared | None = None
    # It was Waiting already: the Launch Waiting event was published when the wait began.
    was_waiting: bool = False
    # Admitted as its first delivery (Admission.FIRST).
    first: bool = False
    # Its Waiting record, when this delivery carries its wait (it left its queue's entry).
    waited: RequestRecord | None = None
    # The message that carries its wait, when another (this delivery was dropped for it).
    held_by: str | None = None


@dataclass
class Intake:
    publish: Callable[..., None]
    records: Records
    claims: RequestClaims
    telemetry: LaunchTelemetry
    queue: HandBack | None
    clock: Callable[[], datetime]

    def parse(self, message: Message) -> LaunchRequest | InvalidLaunchRequest:
        try:
            return parse_launch_request(message.body)
        except InvalidLaunchRequest as invalid:
            return invalid

    def admit(
        self, message: Message, request: LaunchRequest, remaining_ms: int | None
    ) -> Admission:
        """Claim the request and check its body against its requestId."""
        payload = request.model_dump(mode="json", by_alias=True)
        claim = self.claims.claim(payload, remaining_ms)
        if claim.state is ClaimState.UNDECIDED:
            return Admission.BUSY
        item = Claimed(message, request, payload)
        bound = self._bound(item, claim.state)
        if bound is None:
            return Admission.BUSY
        body_hash, first = bound
        if body_hash != request.body_hash():
            return self._reused(item, claim.state)
        if claim.state is ClaimState.COMPLETED:
            self._replay(payload, dict(claim.outcome))
            return Admission.REPLAYED
        if claim.state is ClaimState.IN_PROGRESS:
            finished = self._finished(request.request_id)
            if finished is not None:
                # The request's final record is its claim's completion (issue 38: no write
                # marks the claim done): a delivery after it re-publishes that outcome.
                self._replay(payload, finished.to_detail())
                return Admission.REPLAYED
            # Back with the queue's own visibility: said, since a message that keeps finding a
            # claim that outlives its receives is dead-lettered without a record.
            logger.info(
                "request in progress in another delivery: message handed back",
                extra={
                    "messageId": message.message_id,
                    "requestId": request.request_id,
                    "receiveCount": message.receive_count,
                    "claimHeldUntilMs": claim.held_until_ms,
                },
            )
            return Admission.IN_PROGRESS
        return Admission.FIRST if first and _first_delivery(message, request) else Admission.CLAIMED

    def _finished(self, request_id: str) -> RequestRecord | None:
        """The request's final record, when it has one (read only for a claim held by another
        delivery: one that finished holds it until its deadline, or its expiry); None when it
        has none or it could not be read (the delivery goes back, as for a claim in progress)."""
        try:
            stored = self.records.get_record(request_id)
        except Exception:
            logger.exception(
                "could not read the record of a request in progress",
                extra={"requestId": request_id},
            )
            return None
        return stored if stored is not None and stored.is_final else None

    def _bound(self, item: Claimed, state: ClaimState) -> tuple[str, bool] | None:
        """The hash of the body the requestId is bound to (this one's when first), and whether
        this delivery bound it; None when that could not be read or written (the claim, if this
        delivery's, is released)."""
        request = item.request
        try:
            body_hash = request.body_hash()
            if state is ClaimState.CLAIMED:
                return self.records.bind_first_body(request.request_id, body_hash)
            # Not ours to bind: a duplicate only compares with what its first delivery bound.
            return self.records.bound_body(request.request_id) or body_hash, False
        except Exception:
            logger.exception(
                "could not check the body against its requestId",
                extra={"requestId": request.request_id},
            )
            if state is ClaimState.CLAIMED:
                self.release([item])
            return None

    def _reused(self, item: Claimed, state: ClaimState) -> Admission:
        if state is ClaimState.CLAIMED:
            self.release([item])  # the first request's redelivery must find the id free
        try:
            self._refuse_reused(item)
        except Exception:
            logger.exception("could not publish the rejection; the retry does it")
            return Admission.BUSY
        return Admission.REUSED

    def _refuse_reused(self, item: Claimed) -> None:
        request = item.request
        refused = RequestIdReused(request.request_id)
        logger.warning(
            "launch request rejected: its requestId names another request",
            extra={"messageId": item.message.message_id, "requestId": request.request_id},
        )
        self.telemetry.rejected()
        record = self.rejected_record(
            request.request_id,
            request.node_pool,
            request.requester,
            item.message.received_at,
            [ErrorDetail(code=refused.code, message=refused.reason)],
            requested=request.count,
            wait_for_capacity_until=request.wait_for_capacity_until,
        )
        # Published, never stored: the requestId's record is the first request's.
        self.publish(Event(record.detail_type, record.to_detail()))

    def _replay(self, payload: dict[str, Any], detail: dict[str, Any]) -> None:
        """Re-publish a finished request's recorded outcome (a duplicate delivery)."""
        self.publish(Event(RequestRecord.from_detail(detail).detail_type, detail))
        logger.info(
            "duplicate delivery: re-published the recorded outcome",
            extra={"requestId": payload.get("requestId")},
        )

    def refuse(self, message: Message, invalid: InvalidLaunchRequest, *, owned: bool) -> None:
        """An invalid body: logged, and Rejected on the record of its requestId if it has one
        (`owned`: no valid body in the batch carries the same requestId)."""
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
            self.telemetry.dropped()
            return
        self.telemetry.rejected()
        if owned and self._invalid_reused(message, invalid):
            return
        if owned:
            record = self.rejected_record(
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
            if not self.records.put_record_if_absent(record):
                record = self._stored(invalid.request_id)
            self.publish(Event(record.detail_type, record.to_detail()))

    def _invalid_reused(self, message: Message, invalid: InvalidLaunchRequest) -> bool:
        """Bind the requestId to this invalid body, as a valid one is bound; True (its rejection
        published, not stored) when it is bound to another body already."""
        request_id = invalid.request_id or ""
        body_hash = invalid_body_hash(message.body)
        if self.records.bind_body(request_id, body_hash) == body_hash:
            return False
        refused = RequestIdReused(request_id)
        record = self.rejected_record(
            request_id,
            invalid.node_pool,
            None,
            message.received_at,
            [ErrorDetail(code=refused.code, message=refused.reason)],
            requested=invalid.count or 0,
        )
        self.publish(Event(record.detail_type, record.to_detail()))
        return True

    def _stored(self, request_id: str) -> RequestRecord:
        stored = self.records.get_record(request_id)
        if stored is None:
            # Refused, yet no record is there: never publish one that is not stored.
            raise Transient("PutItem", "RecordNotWritten")
        return stored

    def carried_since(self, item: Claimed) -> datetime | None:
        """When the request arrived, for a delivery that carries it; None for a duplicate of one
        that waits for scheduled capacity, held by another message."""
        request = item.request
        if request.wait_for_capacity_until is None:
            return item.message.received_at
        if self.queue is None or not self.queue.can_hold(item.message):
            # Only a message from the launch queue can wait in it (not a direct invocation).
            logger.warning(
                "waitForCapacityUntil ignored: the request did not come from the launch queue",
                extra={"requestId": request.request_id},
            )
            item.request = request.model_copy(update={"wait_for_capacity_until": None})
            return item.message.received_at
        waiting = self.records.waiting(request.request_id)
        if waiting is None:
            return item.message.received_at
        return self._held(item, *waiting)

    def _held(self, item: Claimed, record: RequestRecord, held_by: str | None) -> datetime | None:
        request = item.request
        mine = held_by == item.message.message_id
        if record.is_final and not mine:
            return item.message.received_at  # a duplicate of a finished request: replayed
        if not mine:
            logger.info(
                "already waiting for scheduled capacity: this delivery is dropped",
                extra={"requestId": request.request_id, "heldBy": held_by},
            )
            item.held_by = held_by
            return None
        if record.is_final or not self.records.take_wait(
            request.request_id, item.message.message_id
        ):
            # The backstop ended the wait this copy held, and publishes its outcome.
            logger.info(
                "the wait this delivery held was ended by the backstop: dropped",
                extra={"requestId": request.request_id},
            )
            return None
        item.was_waiting = True
        item.waited = record
        item.request = request.model_copy(update={"requester": record.requester})
        return record.received_at

    def reject(self, item: Claimed, rejected: RequestRejected) -> bool:
        """Record and publish a rejection; False (claim released) if that could not be done.

        A request that was served keeps its outcome: a delivery of it after the idempotency
        window (its pool deleted since, say) re-publishes what it ended with. A Waiting request's
        wait ends with the rejection, and an earlier rejection is replaced (it launched nothing)."""
        record = self.rejected_record(
            item.request.request_id,
            item.request.node_pool,
            item.request.requester,
            item.message.received_at,
            [ErrorDetail(code=rejected.code, message=rejected.reason)],
            requested=item.request.count,
            wait_for_capacity_until=item.request.wait_for_capacity_until,
        )
        try:
            outcome = record
            if not self.records.put_record_if_absent(record):
                stored = self._stored(item.request.request_id)
                if stored.is_final and stored.status is not RequestStatus.REJECTED:
                    outcome = stored
                else:  # a wait ends; an earlier rejection of this body is replaced
                    self.records.put_record(record)
            if outcome is record:
                self.telemetry.rejected()
            self.finish([(item, outcome)])
        except Exception:
            logger.exception("could not record the rejection; the retry does it")
            self.release([item])
            return False
        return True

    def finish(self, outcomes: Iterable[tuple[Claimed, RequestRecord]]) -> None:
        """Publish each outcome. Its claim is not written again: the final record stored before
        it is the completion (issue 38), which a later delivery finds (`_finished`, or recovery
        once the claim's deadline passed) and re-publishes."""
        outcomes = list(outcomes)
        self.publish(*(Event(r.detail_type, r.to_detail()) for _, r in outcomes))
        for _, record in outcomes:
            logger.info(
                "request finished",
                extra={
                    "requestId": record.request_id,
                    "status": str(record.status),
                    "launched": record.launched,
                },
            )

    def rejected_record(
        self,
        request_id: str,
        node_pool: str | None,
        requester: str | None,
        received_at: datetime,
        errors: list[ErrorDetail],
        requested: int = 0,
        wait_for_capacity_until: datetime | None = None,
    ) -> RequestRecord:
        return RequestRecord.rejected(
            request_id,
            errors,
            received_at=received_at,
            finished_at=max(self.clock(), received_at),
            node_pool=node_pool,
            requester=requester,
            requested=requested,
            wait_for_capacity_until=wait_for_capacity_until,
        )

    def release(self, items: Iterable[Claimed]) -> None:
        for item in items:
            try:
                self.claims.release(item.payload)
            except Exception:
                logger.exception(
                    "could not release the idempotency claim",
                    extra={"requestId": item.request.request_id},
                )


def _first_delivery(message: Message, request: LaunchRequest) -> bool:
    """A message SQS delivers for the first time, carrying no wait for scheduled capacity (a
    held copy of a waiting request is delivered anew, under the same requestId)."""
    return message.receive_count <= 1 and request.wait_for_capacity_until is None


def owned_ids(parsed: Sequence[tuple[Message, LaunchRequest | InvalidLaunchRequest]]) -> set[str]:
    """The requestIds a valid body in the batch carries (an invalid one never decides them)."""
    return {r.request_id for _, r in parsed if isinstance(r, LaunchRequest)}
