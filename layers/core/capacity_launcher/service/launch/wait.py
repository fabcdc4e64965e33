"""Wait: requests that asked to wait for scheduled capacity (`waitForCapacityUntil`) and cannot be
served from reservations now wait for them (a Waiting record, which the batch stores once their
message is held in the queue), or fail once the deadline passed (docs/contracts.md: Waiting for
scheduled capacity). The others go on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from capacity_launcher.domain.capacity.capacity_wait import (
    awaited,
    awaited_records,
    missed_deadline,
    next_check_seconds,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import (
    AWAITS_RESERVATION,
    CAPACITY_NOT_ACTIVE_BY_DEADLINE,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
)
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.progress import Context, LaunchReport, PoolView, Progress
from capacity_launcher.service.launch.settle import finish


def wait_or_go(
    ctx: Context, progress: Sequence[Progress], report: LaunchReport, view: PoolView
) -> list[Progress]:
    """The requests that go on now."""
    going = []
    now = ctx.clock()
    for item in progress:
        deadline = item.request.wait_for_capacity_until
        if deadline is None or view.usable.reserved_available() >= item.request.min_count:
            going.append(item)  # no wait asked, or reserved capacity can serve it now
            continue
        waited_for = awaited(view.candidates.scheduled, deadline)
        request_id = item.request_id
        if now < deadline and waited_for:
            item.mark_waiting()
            report.records[request_id] = _waiting(item, waited_for, now)
            report.waiting[request_id] = next_check_seconds(now, deadline, waited_for)
        elif now >= deadline and item.waited is not None and _waited_for_reservations(item):
            message = missed_deadline(
                deadline, item.waited.waiting_for, words.reservations_by_id(view.sources)
            )
            error = ErrorDetail(code=CAPACITY_NOT_ACTIVE_BY_DEADLINE, message=message)
            report.records[request_id] = finish(
                ctx, item, [], [], RequestStatus.FAILED, [*item.errors, error]
            )
        else:
            going.append(item)  # nothing it could wait for: served as without the field
    return going


def _waited_for_reservations(item: Progress) -> bool:
    """It waited for scheduled reservations (one that waited only for room in its queue ends at
    its deadline by its lease phase's refusal: room.py)."""
    waited = item.waited
    return waited is not None and (
        not waited.waiting_for or any(a.kind == AWAITS_RESERVATION for a in waited.waiting_for)
    )


def _waiting(
    item: Progress, waited_for: Sequence[ReservationSnapshot], now: datetime
) -> RequestRecord:
    """The Waiting record; the batch stores it once the message is held in the queue."""
    return RequestRecord.of(
        item.request,
        RequestStatus.WAITING,
        node_pool=item.pool_name,
        received_at=item.prepared.received_at,
        finished_at=now,
        errors=list(item.errors),
        waiting_for=awaited_records(waited_for),
    )
