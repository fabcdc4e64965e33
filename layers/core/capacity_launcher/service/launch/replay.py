"""Replay: a crashed or throttled predecessor's launch intents, finished before anything new is
sent, in the pool they were made for (README: "A retry replays the intent"). A pending intent is
sent again only under live leases that cover it there; otherwise it is ended unsent, with the
instances EC2 has for it if its call did reach EC2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.status import (
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    status_for,
)
from capacity_launcher.domain.records.tags import NODE_POOL, REQUEST_ID
from capacity_launcher.service.launch.progress import (
    POOL_PASSED_OVER,
    Context,
    LaunchReport,
    Progress,
    Run,
    Visit,
)
from capacity_launcher.service.launch.send import Sent, absorb, mark_launching, send
from capacity_launcher.service.launch.settle import (
    finish,
    settle_all,
    settle_lease,
    terminate_short,
)
from capacity_launcher.service.launch.words import launched


def replay(
    ctx: Context, run: Run, intents: Sequence[LaunchIntent], pool: str, report: LaunchReport
) -> None:
    """Finish each intent in attempt order; the run's attempts then go on from the last."""
    run.attempts = max([run.attempts, *(i.attempt for i in intents)])
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


def finish_refused(
    ctx: Context,
    visit: Visit,
    refusal: ErrorDetail,
    candidates: Candidates | None,
    report: LaunchReport,
) -> list[Progress]:
    """A replay visit its pool refuses before its lease phase (its NodeClass refused, the
    screen): what its predecessor's intents launched there is the request's own, and is finished
    there before the refusal decides anything (it was passed on or ended with its instances
    running under no record, its lease held until it expired, and a launch elsewhere reused its
    ClientTokens). The pool launches nothing more for it: a pending intent is ended unsent, with
    what EC2 has for it. A request they launched for ends here with those instances: its lease
    settled to them, its record listing them beside the refusal. Returns the requests they
    launched nothing for, which the refusal answers as any other request (numbering any launch
    on from their intents); a coalesced intent ended unsent may have instances not found yet
    (left to reconciliation), so its requests end here too."""
    pool = visit.progress[0].pool_name
    why = f"nodePool {pool}: {refusal.message}: not sent again"
    known = {i for intent in visit.intents for i in intent.instance_ids}
    unsure = {
        request_id
        for intent in visit.intents
        if intent.state == "pending" and len(intent.shares) > 1
        for request_id in intent.request_ids
    }
    ended = [end_unsent(ctx, intent, why, known) for intent in visit.intents]
    run = Run(list(visit.progress), list(visit.progress), replaying=True)
    replay(ctx, run, ended, pool, report)  # every intent is done: each request takes its share
    run.progress = [p for p in run.progress if p.instance_ids or p.request_id in unsure]
    run.active = run.progress
    for item in run.progress:
        _settled_here(ctx, item, refusal)
    settle_all(ctx, run, report, [], candidates or Candidates([], [], [], {}), {}, [])
    kept = {item.request_id for item in run.progress}
    rest = [item for item in visit.progress if item.request_id not in kept]
    for item in rest:
        item.attempts = run.attempts
    return rest


def _settled_here(ctx: Context, item: Progress, refusal: ErrorDetail) -> None:
    """The request keeps what its intents launched and ends in their pool: its lease, open,
    is settled to them (read once; one an earlier delivery settled stays as it is, and one
    reclaimed since leaves its instances to the sync, which counts them)."""
    found = ctx.ports.leases.lease(item.pool_name, item.request_id)
    item.settled = found is not None and found.settled
    item.granted = found.count if found is not None and not found.settled else 0
    item.note(refusal)


def afresh(
    ctx: Context,
    item: Progress,
    report: LaunchReport,
    intents: Sequence[LaunchIntent],
    pool: str,
    refused: str | None = None,
) -> list[Progress]:
    """A request whose intents' pool is gone (or no longer one it may use): they are not sent
    again, but finished there first: what they launched stays counted there (the lease settled
    to it, or given back when they launched nothing: it held that pool's limits and quota until
    it expired) and is named on the record. The request is then served afresh, where it
    resolves now, for what they did not launch, its attempts numbered on from theirs (a reused
    ClientToken with another pool's input is one EC2 refuses); a request they launched all of
    ends with those instances, in their pool. `refused`: why the pool refuses the request now,
    when resolving it there said (the field and the rule), for the record to say."""
    because = f" ({refused})" if refused else ""
    why = f"nodePool {pool} is no longer one this request may use{because}: not sent again"
    known = {i for intent in intents for i in intent.instance_ids}
    ended = [end_unsent(ctx, intent, why, known) for intent in intents]
    request = item.request
    mine = [x for i in ended for x in i.split(i.instance_ids).get(request.request_id, [])]
    landings, over = _settle_there(ctx, pool, request, mine)
    # What survived its settle (a lease reclaimed since may hold fewer: the rest terminated).
    terminated = set(mine) - {x.instance_id for x in landings} if over else set()
    mine = [i for i in mine if i not in terminated]
    there = f"; the {len(mine)} it launched there ({', '.join(mine)}) are counted there"
    note = ErrorDetail(
        code=POOL_PASSED_OVER,
        message=f"nodePool {pool}: no longer one this request may use since an earlier "
        f"delivery tried it{because}: nothing more is launched in it{there if mine else ''}",
    )
    errors = [note, *over]
    left = request.count - len(mine)
    if left < 1:
        done = replace(item, errors=errors)
        record = finish(ctx, done, landings, [], RequestStatus.FULFILLED, errors, pool=pool)
        report.records[request.request_id] = record
        return []
    rest = request.model_copy(update={"count": left, "min_count": min(request.min_count, left)})
    attempts = max(intent.attempt for intent in intents)
    return [
        replace(
            item, prepared=replace(item.prepared, request=rest), errors=errors, attempts=attempts
        )
    ]


def finish_rejected(
    ctx: Context,
    request: LaunchRequest,
    received_at: datetime,
    intents: Sequence[LaunchIntent],
    rejection: ErrorDetail,
) -> RequestRecord | None:
    """A redelivery its intake rejects after a predecessor wrote intents (the NodePool it names
    deleted since, or applied again so that the request conflicts with it; no pool compatible
    any more): they are finished in their pool first, as `afresh` finishes them, none sent
    again. What they launched is the request's: named on its record beside the rejection (it
    was Rejected, launched 0, with those instances running under no record), its lease there
    settled to them (it held the pool's limits until it expired); a gang short of its minCount
    is terminated, as any gang is. Returns that record; None when they launched nothing for
    it (its lease given back), for the rejection to answer as any other request's."""
    pool = intents[-1].node_pool or ""
    why = f"nodePool {pool}: the request is rejected now ({rejection.message}): not sent again"
    known = {i for intent in intents for i in intent.instance_ids}
    ended = [end_unsent(ctx, intent, why, known) for intent in intents]
    mine = [x for i in ended for x in i.split(i.instance_ids).get(request.request_id, [])]
    if not mine:
        _settle_there(ctx, pool, request, [])
        return None
    errors = [rejection]
    if len(mine) < request.min_count:
        errors.append(_gang_short(ctx, mine, request.min_count))
        mine = []
    landings, over = _settle_there(ctx, pool, request, mine)
    errors += over
    record = RequestRecord(
        request_id=request.request_id,
        node_pool=pool,
        requester=request.requester,
        status=status_for(request.count, len(landings), request.min_count),
        requested=request.count,
        launched=len(landings),
        instances=[launched(x, {}) for x in landings],
        errors=errors,
        received_at=received_at,
        finished_at=max(ctx.clock(), received_at),
        wait_for_capacity_until=request.wait_for_capacity_until,
    )
    ctx.ports.records.put_record(record)
    return record


def _gang_short(ctx: Context, instance_ids: Sequence[str], min_count: int) -> ErrorDetail:
    """Terminate what the intents launched for a gang that can get no more (`terminate_short`);
    the reservation slots of those still running are given back (one EC2 shows going was
    terminated by a try that died before the record, and gave its slot back then)."""
    landed = ctx.ports.fleet.describe(instance_ids)
    alive = [x for x in landed if x.state not in ("shutting-down", "terminated")]
    return terminate_short(ctx, landed, min_count, alive)


def _settle_there(
    ctx: Context, pool: str, request: LaunchRequest, instance_ids: Sequence[str]
) -> tuple[list[InstanceLanding], list[ErrorDetail]]:
    """The request's lease in its intents' pool, settled to the instances they launched there
    (members of that pool), or given back when they launched none; returns those it keeps,
    where they landed, and the record's words for any it terminated: a lease reclaimed since
    is taken again for them as a new request's is, at least as many as its minCount (or all of
    them, when fewer), and what that lease does not hold is terminated (`settle_lease`)."""
    if not instance_ids:
        ctx.ports.leases.cancel(pool, request.request_id)
        return [], []
    landings = ctx.ports.fleet.describe(instance_ids)
    found = ctx.ports.leases.lease(pool, request.request_id)
    if found is not None and found.settled:
        return landings, []
    zones = sorted({x.zone for x in landings})
    names = sorted({x.instance_type for x in landings})
    types = {info.name: info for info in ctx.ports.catalog.offered(zones, names)}
    limits = ctx.ports.leases.stored_limits(pool)
    least = min(request.min_count, len(landings))
    return settle_lease(ctx, pool, request, landings, types, limits, least=least)
