"""Waiting for room (issue 37): a request that set `waitForCapacityUntil`, refused with nothing
launched for room that may appear (its quota, its pool's limits, every offering it may use known
dry), waits instead of failing: a Waiting record naming what it waits for, which the batch stores
once its message is held and its entry is in its pool's queue (service/admission_queue.py).
Past its deadline it ends Failed with the refusal it waited out and NotAdmittedByDeadline.
The decisions are the domain's (domain/accounting/admission_queue.py).

A request refused where its own nominal quota is lent out asks for it back when it waits, as
when it ends (`request_reclaim`): preemption by a waiting request goes through the reclaim path
(docs/quotas.md, Reclaim; its lender's reclaimWithinCohort decides what the sync terminates).
A request refused by its quota's bounds or its cohort's idle quota preempts when its quota's
withinClusterQueue or borrowWithinCohort allows (`request_preemption`), through the same path."""

from __future__ import annotations

from collections.abc import Sequence

from capacity_launcher.domain.accounting.admission_queue import (
    capacity_awaited,
    missed_deadline,
    queue_check_seconds,
    waits_instead,
)
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.records.status import (
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
)
from capacity_launcher.service.launch.lifecycle import Phase
from capacity_launcher.service.launch.progress import Context, LaunchReport, PoolView, Progress


def wait_for_room(
    ctx: Context,
    item: Progress,
    report: LaunchReport,
    unavailable: Sequence[UnavailableOffering] = (),
    *,
    ending: bool = True,
) -> bool:
    """Put a refused request to wait, if it may (True: its Waiting record is in the report, and
    the batch holds it). Past its deadline, one that waited before and ends now (`ending`: its
    lease phase refused it) notes why (False)."""
    deadline = item.request.wait_for_capacity_until
    if deadline is None or not item.awaits or item.instance_ids or item.launching:
        return False
    if item.state not in (Phase.UNLEASED, *_ARRIVAL):
        return False
    now = ctx.clock()
    if not waits_instead(deadline, now, 0, item.awaits):
        if ending and item.waited is not None:
            item.note(missed_deadline(deadline, item.awaits))
        return False
    errors = list(item.errors)
    if item.reclaim is not None:
        errors = request_reclaim(ctx, item, item.reclaim, errors)
    elif item.preempt is not None:
        errors = request_preemption(ctx, item, item.preempt, errors)
    item.mark_waiting()
    report.records[item.request_id] = RequestRecord.of(
        item.request,
        RequestStatus.WAITING,
        node_pool=item.pool_name,
        received_at=item.prepared.received_at,
        finished_at=now,
        unavailable_offerings=list(unavailable),
        errors=errors,
        waiting_for=list(item.awaits),
    )
    report.waiting[item.request_id] = queue_check_seconds(now, deadline)
    return True


def request_reclaim(
    ctx: Context, item: Progress, refused: QuotaExceeded, errors: Sequence[ErrorDetail]
) -> list[ErrorDetail]:
    """The request ends with nothing, or waits, refused where its own nominal quota is lent out:
    ask for it back, and name the reclaim in that pool's error (docs/quotas.md, Reclaim). A
    request waiting again (woken and refused again) finds its reclaim open and publishes nothing
    more."""
    if ctx.ports.reclaims is None:
        return list(errors)
    note = ctx.ports.reclaims.request(refused, item.request_id, item.request.requester)
    return _noted(refused, note, errors)


def request_preemption(
    ctx: Context, item: Progress, refused: QuotaExceeded, errors: Sequence[ErrorDetail]
) -> list[ErrorDetail]:
    """The request waits, refused by its quota's bounds or its cohort's idle quota: when its
    quota's withinClusterQueue or borrowWithinCohort lets it preempt instances that make it fit,
    ask for them through the reclaim path and name the preemption in that pool's error."""
    if ctx.ports.reclaims is None:
        return list(errors)
    prepared = item.prepared
    note = ctx.ports.reclaims.preempt(
        refused, item.request_id, item.request.requester, prepared.priority, prepared.received_at
    )
    return _noted(refused, note, errors)


def _noted(refused: QuotaExceeded, note: str, errors: Sequence[ErrorDetail]) -> list[ErrorDetail]:
    refusal = str(refused)
    return [
        ErrorDetail(code=e.code, message=e.message + note) if e.message.endswith(refusal) else e
        for e in errors
    ]


def wait_for_capacity(
    ctx: Context,
    items: Sequence[Progress],
    report: LaunchReport,
    why: str,
    dry: Sequence[UnavailableOffering],
) -> list[Progress]:
    """Requests a pool keeps although every offering they may use is known dry, or its
    reservations (all it launches into) are full (none passed on): those that set a deadline
    wait for capacity; returns those that go on."""
    going = []
    for item in items:
        if not why or item.request.wait_for_capacity_until is None:
            going.append(item)
            continue
        item.awaits_also(capacity_awaited(item.pool_name, why, dry))
        if not wait_for_room(ctx, item, report, dry, ending=False):
            going.append(item)
    return going


def reservations_full(view: PoolView, item: Progress) -> str:
    """Why a pool that launches only into reservations cannot hold the request now: they have
    room for fewer than its minCount, as the snapshots show ('' when they have room, or the pool
    may launch otherwise)."""
    usable = view.usable
    if not usable.reserved or usable.on_demand or usable.spot:
        return ""
    available = usable.reserved_available()
    if available >= item.request.min_count:
        return ""
    return (
        f"its reservations have room for {available} instance(s) now, fewer than "
        f"minCount={item.request.min_count}"
    )


# The arrival states a request may be put to wait from before its lease phase.
_ARRIVAL = (Phase.FRESH, Phase.RECOVERED, Phase.WAITING, Phase.PASSED_ON, Phase.CHANGED)
