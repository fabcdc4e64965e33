"""Recovery: the one step each request goes through before any pool is visited. It reads what
earlier deliveries left (the record and the intents, once) and brings the request to its first
state (lifecycle.py):

- its first delivery (nothing stored to read): Fresh, served with the group;
- a final record: nothing is served, the record is replayed;
- no intent, and no record or a Waiting one: Recovered or Waiting, served with the group (an
  earlier delivery's lease in a pool it visits is taken up or given back there);
- intents, their pool one it may use: Replaying, a replay visit of that pool, alone;
- intents, their pool gone or refusing it now: they are finished there unsent
  (`replay.finish_unsent`), what they launched counted there; then Recovered or Waiting, served
  afresh for the rest, or ended with what they launched;
- intents, the request rejected by its intake now: they are finished there unsent, and its
  record names what they launched (`recover_rejected`).

The happy-path phases carry no replay branch: a replay visit differs only in going straight to
its lease phase and replaying its intents before anything new is sent (`replay.replay`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.errors import RequestRejected
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.status import (
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    status_for,
)
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.lifecycle import Phase
from capacity_launcher.service.launch.progress import (
    POOL_PASSED_OVER,
    Context,
    LaunchReport,
    Progress,
    Visit,
)
from capacity_launcher.service.launch.replay import finish_unsent
from capacity_launcher.service.launch.settle import finish, settle_lease, terminate_short
from capacity_launcher.service.resolution import Prepared, resolve_in


def recover(
    ctx: Context, prepared: Prepared, first: bool, report: LaunchReport
) -> Visit | list[Progress]:
    """The request brought to its first state: a replay visit of its intents' pool (alone, never
    another), or the requests to serve with the group's (none when it is finished: its record
    is replayed). `first`: its first delivery, nothing of it stored to read."""
    if first:
        return [Progress(prepared, Phase.FRESH)]
    request_id = prepared.request.request_id
    record, intents = _left_behind(ctx, request_id)
    if record is not None and record.is_final:
        report.records[request_id] = record
        report.replayed.add(request_id)
        return []
    # A Waiting record, or none. A wait's delivery may have launched and died before its
    # record: its intents are finished first, whatever the wait says.
    if intents:
        return _replays(ctx, Progress(prepared, Phase.REPLAYING, waited=record), intents, report)
    return [Progress(prepared, _arrival(record), waited=record)]


def recover_rejected(
    ctx: Context, request: LaunchRequest, received_at: datetime, rejected: RequestRejected
) -> RequestRecord | None:
    """A request its intake rejects on a delivery that may not be its first (its pool deleted
    or applied again since, say): a predecessor's intents are finished first, in their pool
    (`_finish_rejected`), before the rejection answers. Returns the record when they launched
    for it; None when there is nothing of theirs to keep (no intent, or a final record: whoever
    wrote it finished them), for the intake to reject it."""
    record, intents = _left_behind(ctx, request.request_id)
    if not intents or (record is not None and record.is_final):
        return None
    # A Waiting record's arrival is the request's (its held copy arrived later).
    since = record.received_at if record is not None else received_at
    error = ErrorDetail(code=rejected.code, message=rejected.reason)
    return _finish_rejected(ctx, request, since, intents, error)


def _left_behind(ctx: Context, request_id: str) -> tuple[RequestRecord | None, list[LaunchIntent]]:
    """The record and intents earlier deliveries stored, read once. An invalid body that
    borrowed the requestId never decides a valid one's fate: its record is not the request's."""
    record, intents = ctx.ports.records.load(request_id)
    if record is not None and words.from_invalid_body(record):
        record = None
    return record, intents


def _arrival(waited: RequestRecord | None) -> Phase:
    """How a request no intent names comes to its first pool: Waiting when an earlier delivery
    put it to wait (its record says what for), Recovered otherwise."""
    return Phase.RECOVERED if waited is None else Phase.WAITING


def _replays(
    ctx: Context, item: Progress, intents: list[LaunchIntent], report: LaunchReport
) -> Visit | list[Progress]:
    """The replay visit; or, the intents' pool gone or refusing the request now (its
    NodeClass missing, a tag conflict: the request still resolves to its own pool, so it
    is no fault of the request), the request served afresh. That refusal escaped every
    delivery as an unexpected error, and the message ended in the dead-letter queue with
    no record, what the intents launched running under none."""
    prepared = item.prepared
    pool = intents[-1].node_pool
    placed: Prepared | None = prepared
    if pool and pool != prepared.pool.metadata.name:
        try:
            placed = resolve_in(ctx.ports.config, prepared, pool)
        except RequestRejected as refused:
            return _afresh(ctx, item, report, intents, pool, refused.reason)
    if placed is not None:
        notes = _passed_before(prepared, placed)
        errors = list(dict.fromkeys([*item.errors, *notes]))
        return Visit([replace(item, prepared=placed, here=[], errors=errors)], intents)
    return _afresh(ctx, item, report, intents, pool or "")


def _passed_before(prepared: Prepared, placed: Prepared) -> list[ErrorDetail]:
    """The pools an earlier delivery passed over on its way to the pool its intents are in
    (those ahead of it by weight): its notes were that delivery's alone, and the record names
    them as a first delivery's would."""
    if placed.pool.metadata.name == prepared.pool.metadata.name:
        return []
    there = placed.pool.metadata.name
    names = [prepared.pool.metadata.name]
    for pool in prepared.alternatives:  # read only as far as `there`
        if pool.metadata.name == there:
            break
        names.append(pool.metadata.name)
    return [
        ErrorDetail(
            code=POOL_PASSED_OVER,
            message=f"nodePool {name}: passed over by an earlier delivery of this request, "
            f"which went on to nodePool {there}",
        )
        for name in names
    ]


def _afresh(
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
    request = item.request
    mine = finish_unsent(ctx, intents, why).launched_for(request.request_id)
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
        record = finish(ctx, item, landings, [], RequestStatus.FULFILLED, errors, pool=pool)
        report.records[request.request_id] = record
        return []
    rest = request.model_copy(update={"count": left, "min_count": min(request.min_count, left)})
    attempts = max(intent.attempt for intent in intents)
    prepared = replace(item.prepared, request=rest)
    # Served afresh where it resolves now: an earlier lease may be open there.
    arrival = _arrival(item.waited)
    return [Progress(prepared, arrival, errors=errors, waited=item.waited, attempts=attempts)]


def _finish_rejected(
    ctx: Context,
    request: LaunchRequest,
    received_at: datetime,
    intents: Sequence[LaunchIntent],
    rejection: ErrorDetail,
) -> RequestRecord | None:
    """A redelivery its intake rejects after a predecessor wrote intents (the NodePool it names
    deleted since, or applied again so that the request conflicts with it; no pool compatible
    any more): they are finished in their pool first, as `_afresh` finishes them, none sent
    again. What they launched is the request's: named on its record beside the rejection (it
    was Rejected, launched 0, with those instances running under no record), its lease there
    settled to them (it held the pool's limits until it expired); a gang short of its minCount
    is terminated, as any gang is. Returns that record; None when they launched nothing for
    it (its lease given back), for the rejection to answer as any other request's."""
    pool = intents[-1].node_pool or ""
    why = f"nodePool {pool}: the request is rejected now ({rejection.message}): not sent again"
    mine = finish_unsent(ctx, intents, why).launched_for(request.request_id)
    if not mine:
        _settle_there(ctx, pool, request, [])
        return None
    errors = [rejection]
    if len(mine) < request.min_count:
        errors.append(_gang_short(ctx, mine, request.min_count))
        mine = []
    landings, over = _settle_there(ctx, pool, request, mine)
    errors += over
    record = RequestRecord.of(
        request,
        status_for(request.count, len(landings), request.min_count),
        node_pool=pool,
        received_at=received_at,
        finished_at=max(ctx.clock(), received_at),
        instances=[words.launched(x, {}) for x in landings],
        errors=errors,
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
    kept, errors, _, _ = settle_lease(ctx, pool, request, landings, types, limits, least=least)
    return kept, errors
