"""Replay: a crashed or throttled predecessor's launch intents, finished before anything new is
sent, in the pool they were made for (README: "A retry replays the intent"). A pending intent is
sent again only under live leases that cover it there; otherwise it is ended unsent, with the
instances EC2 has for it if its call did reach EC2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from capacity_launcher.domain.intents import LaunchIntent
from capacity_launcher.domain.status import ErrorDetail, RequestStatus
from capacity_launcher.domain.tags import NODE_POOL, REQUEST_ID
from capacity_launcher.service.launch.progress import (
    POOL_PASSED_OVER,
    Context,
    LaunchReport,
    Progress,
    Run,
)
from capacity_launcher.service.launch.send import Sent, absorb, mark_launching, send
from capacity_launcher.service.launch.settle import finish
from capacity_launcher.service.resolution import Prepared


def replay(
    ctx: Context, run: Run, intents: Sequence[LaunchIntent], pool: str, report: LaunchReport
) -> None:
    """Finish each intent in attempt order; the run's attempts then go on from the last."""
    run.attempts = max((i.attempt for i in intents), default=0)
    known = {i for intent in intents for i in intent.instance_ids}
    for intent in intents:
        if intent.state == "pending" and not _covered(ctx, intent, run.active, pool):
            intent = _not_covered(ctx, intent, run, pool, known)
        mark_launching(run.progress, intent)
        result = send(ctx, intent, report)
        run.observed += absorb(ctx, Sent(intent, result), run.active, report).unavailable
        run.replayed_in.update(dict.fromkeys(result.instance_ids, intent.reservation_id))


def _not_covered(
    ctx: Context, intent: LaunchIntent, run: Run, pool: str, known: set[str]
) -> LaunchIntent:
    """Its lease was reclaimed and the pool has no room for it now: EC2 may never have seen the
    call, so sending it again could launch beyond the limits."""
    wanted = sum(x.count for x in intent.shares)
    message = (
        f"node pool {pool} limits leave room for fewer than the {wanted} instance(s) of an "
        "earlier launch, whose lease expired: it is not sent again"
    )
    intent = end_unsent(ctx, intent, message, known)
    if len(intent.instance_ids) < wanted:
        for item in run.active:
            if item.request_id in intent.request_ids:
                item.errors.append(ErrorDetail(code="LimitExceeded", message=message))
    return intent


def _covered(ctx: Context, intent: LaunchIntent, active: Sequence[Progress], pool: str) -> bool:
    """Whether live leases in `pool` cover a pending intent's every share: its own requests'
    leases have room left for it; a coalesced partner's (served by its own delivery) is open
    and as large (replaying then gives the partner what its own replay would)."""
    items = {p.request_id: p for p in active}
    for share in intent.shares:
        item = items.get(share.request_id)
        if item is None:
            lease = ctx.ports.leases.lease(pool, share.request_id)
            if lease is None or lease.settled or lease.count < share.count:
                return False
        elif item.settled or len(item.instance_ids) + share.count > item.granted:
            return False
    return True


def end_unsent(ctx: Context, intent: LaunchIntent, why: str, known: set[str]) -> LaunchIntent:
    """End a pending intent without sending it (no live lease covers it in its pool): done,
    with the instances EC2 already has for it if its call did reach EC2 (a single request's
    fleet carries its request tag; a coalesced one's are left to reconciliation)."""
    if intent.state == "done":
        return intent
    found: list[str] = []
    if len(intent.shares) == 1 and intent.node_pool:
        tags = {REQUEST_ID: intent.shares[0].request_id, NODE_POOL: intent.node_pool}
        found = [
            i.instance_id
            for i in ctx.ports.fleet.find_managed(tags)
            if i.instance_id not in known and i.state not in ("shutting-down", "terminated")
        ][: intent.shares[0].count]
        known.update(found)
    error = {"code": "NotSentAgain", "message": why}
    ctx.ports.records.complete_intent(intent.token, found, [error])
    return replace(intent, state="done", instance_ids=tuple(found), errors=(error,))


def afresh(
    ctx: Context,
    prepared: Prepared,
    report: LaunchReport,
    intents: Sequence[LaunchIntent],
    pool: str,
) -> list[Progress]:
    """A request whose intents' pool is gone (or no longer one it may use): they are not
    sent again; it is served afresh, where it resolves now, for what they did not launch."""
    why = f"nodePool {pool} is no longer one this request may use: not sent again"
    known = {i for intent in intents for i in intent.instance_ids}
    ended = [end_unsent(ctx, intent, why, known) for intent in intents]
    request = prepared.request
    launched = sum(len(i.split(i.instance_ids).get(request.request_id, [])) for i in ended)
    there = f"; the {launched} it launched there are counted there" if launched else ""
    note = ErrorDetail(
        code=POOL_PASSED_OVER,
        message=f"nodePool {pool}: no longer one this request may use since an earlier "
        f"delivery tried it: nothing more is launched in it{there}",
    )
    left = request.count - launched
    item = Progress(prepared, errors=[note])
    if left < 1:
        report.records[request.request_id] = finish(ctx, item, [], [], RequestStatus.FAILED, [note])
        return []
    rest = request.model_copy(update={"count": left, "min_count": min(request.min_count, left)})
    return [Progress(replace(prepared, request=rest), errors=[note])]
