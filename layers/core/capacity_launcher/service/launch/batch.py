"""One SQS batch of launch requests: intake, coalesce, launch concurrently, report.

Idempotency is a claim per requestId (adapters/request_claims.py), completed by the request's
final record: a duplicate that finished re-publishes its recorded outcome; one still in progress
goes back to the queue. Requests that
can share a CreateFleet are served together; groups run concurrently.

A request that waits for scheduled capacity (`waitForCapacityUntil`) is held in the launch queue
(a delayed copy of its message) with a Waiting record naming that copy; its claim is released so
the copy can claim it again. Only the copy the record names carries the wait: any other delivery
of the same requestId meanwhile is dropped, so a wait never starts twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from capacity_launcher.domain.accounting.admission_queue import QueueEntry, queue_pool
from capacity_launcher.domain.errors import (
    InvalidLaunchRequest,
    RequestRejected,
    Throttled,
    Transient,
)
from capacity_launcher.domain.launch_request import LaunchRequest, Message
from capacity_launcher.domain.records.status import Event, RequestRecord
from capacity_launcher.observability import logger
from capacity_launcher.service.admission_queue import AdmissionQueue
from capacity_launcher.service.launch.intake import Admission, Claimed, Intake, owned_ids
from capacity_launcher.service.launch.pipeline import Launcher
from capacity_launcher.service.launch.progress import LaunchReport
from capacity_launcher.service.ports import HandBack, Records, RequestClaims
from capacity_launcher.service.resolution import Prepared
from capacity_launcher.service.telemetry import LaunchTelemetry

# Message is the domain's; handlers take it from here (they never import the domain).
__all__ = ["LaunchBatch", "Message"]


@dataclass
class _Outcome:
    """A batch's messages to hand back: `in_progress` ones keep the queue's own visibility."""

    failures: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    # The in-progress ones, by message id: a copy of a request this batch claimed already.
    behind: dict[str, Message] = field(default_factory=dict)

    def back(self, message: Message) -> None:
        self.failures.append(message.message_id)

    def take(self, message_id: str | None) -> Message | None:
        """The in-progress message `message_id`, no longer handed back; None if not in it."""
        message = self.behind.pop(message_id, None) if message_id else None
        if message is not None:
            self.failures.remove(message.message_id)
            self.in_progress.remove(message.message_id)
        return message


@dataclass(frozen=True)
class _Admitted:
    """What one message's intake decided: claimed (served here), handed back, or neither
    (refused, replayed, dropped: done with)."""

    claimed: Claimed | None = None
    back: bool = False
    in_progress: bool = False  # handed back with the queue's own visibility


class LaunchBatch:
    def __init__(
        self,
        launcher: Launcher,
        publish: Callable[..., None],
        records: Records,
        claims: RequestClaims,
        telemetry: LaunchTelemetry,
        *,
        max_workers: int = 10,
        queue: HandBack | None = None,
        clock: Callable[[], datetime],
        admission: AdmissionQueue | None = None,
    ) -> None:
        self._launcher = launcher
        self._publish = publish
        self._records = records
        self._claims = claims
        self._telemetry = telemetry
        self._max_workers = max_workers
        self._queue = queue
        # The admission queues (issue 37): a request waiting for room is an entry of its pool's.
        self._admission = admission
        # The launcher's clock: a rejection is stamped as the launcher stamps what it serves.
        self._intake = Intake(publish, records, claims, telemetry, queue, clock)

    def process(
        self, messages: Sequence[Message], remaining_ms: Callable[[], int] | None = None
    ) -> list[str]:
        """Serve a batch; returns the ids of messages to hand back to the queue."""
        outcome = _Outcome()
        claimed = self._admit(messages, remaining_ms, outcome)
        groups = self._prepare(claimed, outcome)
        for failed in self._side_by_side(self._serve_group, groups):
            outcome.failures += failed
        # A duplicate of a request still in progress keeps the queue's own (longer) visibility:
        # coming back in seconds would only spend its receives before the original finishes.
        soon = set(outcome.failures) - set(outcome.in_progress)
        if self._queue is not None and soon:
            self._queue.hand_back([m for m in messages if m.message_id in soon])
        return outcome.failures

    def _admit(
        self,
        messages: Sequence[Message],
        remaining_ms: Callable[[], int] | None,
        outcome: _Outcome,
    ) -> list[Claimed]:
        """Parse and claim every message; returns those this delivery serves, in the batch's
        order. Messages of distinct requestIds are claimed side by side (each claim and binding
        is a write of its own requestId's items); those of one requestId in turn, in the
        batch's order, so the first of them claims and binds as it would alone."""
        intake = self._intake
        parsed = [(message, intake.parse(message)) for message in messages]
        owned = owned_ids(parsed)
        # The messages' places in the batch, by requestId (by message when it has none).
        lanes: dict[str, list[int]] = {}
        for at, (message, request) in enumerate(parsed):
            lanes.setdefault(request.request_id or message.message_id, []).append(at)

        def admit_lane(lane: list[int]) -> list[tuple[int, _Admitted]]:
            return [(at, self._admit_one(*parsed[at], owned, remaining_ms)) for at in lane]

        decided = dict(
            pair for lane in self._side_by_side(admit_lane, list(lanes.values())) for pair in lane
        )
        claimed: list[Claimed] = []
        for at, (message, _) in enumerate(parsed):
            admitted = decided[at]
            if admitted.claimed is not None:
                claimed.append(admitted.claimed)
            elif admitted.back:
                outcome.back(message)
                if admitted.in_progress:
                    outcome.in_progress.append(message.message_id)
                    outcome.behind[message.message_id] = message
        return claimed

    def _admit_one(
        self,
        message: Message,
        request: LaunchRequest | InvalidLaunchRequest,
        owned: set[str],
        remaining_ms: Callable[[], int] | None,
    ) -> _Admitted:
        """One message's intake: refused, claimed, or handed back."""
        if isinstance(request, InvalidLaunchRequest):
            return _Admitted(back=not self._refuse(message, request, owned))
        admission = self._intake.admit(message, request, remaining_ms() if remaining_ms else None)
        if admission in (Admission.CLAIMED, Admission.FIRST):
            payload = request.model_dump(mode="json", by_alias=True)
            first = admission is Admission.FIRST
            return _Admitted(claimed=Claimed(message, request, payload, first=first))
        in_progress = admission is Admission.IN_PROGRESS
        return _Admitted(back=in_progress or admission is Admission.BUSY, in_progress=in_progress)

    def _side_by_side[T, R](self, work: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """`work` on each item, concurrently when there are several (at most max_workers at
        once); the answers in the items' order, the first exception raised once all ended."""
        if len(items) <= 1:
            return [work(item) for item in items]
        workers = min(self._max_workers, len(items))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch") as pool:
            return list(pool.map(work, items))

    def _refuse(self, message: Message, invalid: InvalidLaunchRequest, valid_ids: set[str]) -> bool:
        """Refuse an invalid body; False when its record or event could not be written (only
        this message goes back)."""
        try:
            # A valid body with the same requestId in this batch owns that id's outcome.
            self._intake.refuse(message, invalid, owned=invalid.request_id not in valid_ids)
        except Exception:
            logger.exception("could not record the rejection; the retry does it")
            return False
        return True

    def _prepare(self, claimed: Sequence[Claimed], outcome: _Outcome) -> list[list[Claimed]]:
        """Resolve each claimed request; returns them grouped by what can share a CreateFleet."""
        groups: dict[tuple[Any, ...], list[Claimed]] = {}
        for item in claimed:
            prepared = self._prepared(item, outcome)
            if prepared is not None:
                groups.setdefault(prepared.coalescing_key, []).append(item)
        return list(groups.values())

    def _prepared(self, item: Claimed, outcome: _Outcome) -> Prepared | None:
        intake = self._intake
        try:
            received_at = intake.carried_since(item)
            if received_at is None and self._carried_here(item, outcome):
                received_at = intake.carried_since(item)
            if received_at is None:
                intake.release([item])  # another delivery carries this request's wait
                return None
            # A held copy is sent by the launcher itself: its requester was checked against
            # where the request came from when the wait began, and is the Waiting record's.
            origin = None if item.was_waiting else item.message.origin
            item.prepared = self._launcher.prepare(item.request, received_at, origin)
        except RequestRejected as rejected:
            self._reject(item, rejected, outcome)
            return None
        except Exception:
            logger.exception(
                "could not resolve request", extra={"requestId": item.request.request_id}
            )
            intake.release([item])
            outcome.back(item.message)
            return None
        return item.prepared

    def _carried_here(self, item: Claimed, outcome: _Outcome) -> bool:
        """True when the message that carries the request's wait is in this batch, handed back
        behind this delivery's claim (a wake's copy beside the held copy it replaced): it takes
        over the claim (one requestId, one body) and is served now, and this delivery is done
        with. Handed back, it would come again only after the queue's visibility timeout, and
        the room it was sent for would go unused until then."""
        carrier = outcome.take(item.held_by)
        if carrier is None:
            return False
        item.message, item.held_by = carrier, None
        return True

    def _reject(self, item: Claimed, rejected: RequestRejected, outcome: _Outcome) -> None:
        """A request that can never be served. A delivery that may not be its first finishes
        a predecessor's intents first (`Launcher.finish_rejected`): what they launched ends on
        its record, not running under none while a plain rejection is recorded. A first
        delivery has nothing stored: nothing is read for it."""
        intake = self._intake
        try:
            kept = None
            if not item.first:
                kept = self._launcher.finish_rejected(
                    item.request, item.message.received_at, rejected
                )
            if kept is not None:
                self._telemetry.served(LaunchReport(records={kept.request_id: kept}))
                intake.finish([(item, kept)])
                return
        except Exception:
            logger.exception(
                "could not finish the intents of a rejected request; the retry does it",
                extra={"requestId": item.request.request_id},
            )
            intake.release([item])
            outcome.back(item.message)
            return
        if not intake.reject(item, rejected):
            outcome.back(item.message)

    def _serve_group(self, group: list[Claimed]) -> list[str]:
        # Per thread: groups are served side by side, each logging its own request ids.
        logger.thread_safe_append_keys(request_ids=[g.request.request_id for g in group])
        try:
            return self._serve_group_logged(group)
        finally:
            logger.thread_safe_remove_keys(["request_ids"])

    def _serve_group_logged(self, group: list[Claimed]) -> list[str]:
        try:
            report = self._launcher.serve(
                [g.prepared for g in group if g.prepared],
                first=[g.request.request_id for g in group if g.first],
            )
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
            return self._hand_back(group)
        except Exception:
            logger.exception("launch failed unexpectedly; handing the requests back to the queue")
            return self._hand_back(group)
        self._telemetry.served(report, {g.request.request_id for g in group if g.was_waiting})
        return self._report(group, report)

    def _hand_back(self, group: Sequence[Claimed]) -> list[str]:
        self._intake.release(group)
        return [g.message.message_id for g in group]

    def _report(self, group: Sequence[Claimed], report: LaunchReport) -> list[str]:
        """Hold the requests that wait, publish the others' outcomes; what goes back."""
        held = [g for g in group if g.request.request_id in report.waiting]
        done = [g for g in group if g not in held]
        failed = [
            g.message.message_id
            for g in held
            if not self._hold(g, report.records[g.request.request_id], report.waiting)
        ]
        try:
            self._intake.finish([(g, report.records[g.request.request_id]) for g in done])
        except Exception:
            logger.exception("could not publish the outcome; the retry re-publishes it")
            return [*failed, *self._hand_back(done)]
        for g in done:
            if g.waited is not None:
                self._left_queue(g, g.waited)
        return failed

    def _left_queue(self, item: Claimed, waited: RequestRecord) -> None:
        """A request that waited in a queue ended: its entry goes, the head is woken (a failure
        here leaves a stale entry, which the next wake removes)."""
        if self._admission is None:
            return
        try:
            self._admission.leave(waited, item.prepared.priority if item.prepared else 0)
        except Exception:
            logger.exception(
                "could not leave the admission queue", extra={"requestId": waited.request_id}
            )

    def _enqueue(self, item: Claimed, record: RequestRecord) -> None:
        """A request put to wait for room: its entry in its pool's queue (a failure here leaves
        it waiting on its held copy alone, which looks again by its deadline)."""
        pool = queue_pool(record.waiting_for)
        deadline = record.wait_for_capacity_until
        message = item.message
        if self._admission is None or pool is None or deadline is None or not message.queue_arn:
            return
        body = message.body if isinstance(message.body, str) else json.dumps(message.body)
        priority = item.prepared.priority if item.prepared else 0
        # The requester its quota counts it as (a reservation's association, docs/ome.md).
        requester = item.prepared.request.requester if item.prepared else record.requester
        entry = QueueEntry.of(
            pool,
            record.request_id,
            priority,
            record.received_at,
            deadline,
            body,
            message.queue_arn,
            requester=requester,
        )
        try:
            self._admission.enqueue(entry)
        except Exception:
            logger.exception(
                "could not enter the admission queue", extra={"requestId": record.request_id}
            )

    def _hold(self, item: Claimed, record: RequestRecord, waiting: dict[str, int]) -> bool:
        """Hold a waiting request in the queue and record whose message carries it; False (the
        delivery is handed back) if either fails. The claim is released either way."""
        assert self._queue is not None  # only a holdable message is let wait (carried_since)
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
            self._intake.release([item])
        self._enqueue(item, record)
        logger.info(
            "waiting",
            extra={
                "requestId": record.request_id,
                "until": record.to_detail()["waitForCapacityUntil"],
                "waitingFor": [r.named for r in record.waiting_for],
            },
        )
        return True
