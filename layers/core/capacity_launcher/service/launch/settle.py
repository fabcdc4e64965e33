"""Settle: the end of each request in a pool. A gang that missed its minCount is terminated, the
lease is settled to what launched, the instance records and the request record are written.
Also the other ends: a request refused in a pool, and a single-zone landing rolled back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from capacity_launcher.domain.accounting.pool_usage import UnleasedFit, kept_under, largest
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import RESERVED
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.errors import (
    LeaseReclaimed,
    NodePoolDeleted,
    QuotaExceeded,
    Transient,
    UnreadyLimitReached,
)
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion
from capacity_launcher.domain.records.status import (
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
    status_for,
)
from capacity_launcher.service import lease_settlement
from capacity_launcher.service.admission import take_lease
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.progress import (
    LEASE_RECLAIMED_OVER_LIMIT,
    MIN_VALUES,
    Context,
    LaunchReport,
    Progress,
    Run,
)
from capacity_launcher.service.launch.roll_back import terminate_landed
from capacity_launcher.service.launch.room import request_reclaim, wait_for_room
from capacity_launcher.service.launch.send import complete_left, store

# Leases taken again for a reclaimed lease's instances, each reclaimed in turn before its
# settle (it would have to outlive a whole lease period first), before the message goes back.
_LEASED_AGAIN_TRIES = 3


def settle_all(
    ctx: Context,
    run: Run,
    report: LaunchReport,
    view_skipped: Sequence[UnavailableOffering],
    candidates: Candidates,
    reservations: Mapping[str, ReservationSnapshot],
    refusals: Sequence[str],
    node_class: NodeClass | None = None,
) -> None:
    """Settle every request of the visit, then mark what its own instances filled. With the
    `node_class` the visit read `reservations` of, the records name the type and dates of a
    reservation it selects that an instance landed in unread (a group's member EC2 chose)."""
    _note_refusals(run, refusals, candidates)
    where = _landed(ctx, run)
    if node_class is not None:
        landed = {x.capacity_reservation_id for x in where.values() if x.capacity_reservation_id}
        if landed:
            unread = ctx.ports.reservations.landed_in(node_class, landed, set(reservations))
            reservations = {**reservations, **unread}
    unavailable = [*view_skipped, *run.observed]
    # Each lease in turn (they share the pool's usage items); then the visit's records. One
    # refused for room that may appear before its deadline waits instead.
    settling = [
        item
        for item in run.progress
        if run.replaying or not wait_for_room(ctx, item, report, unavailable)
    ]
    ended = [_settle(ctx, item, where, unavailable, candidates, reservations) for item in settling]
    complete_left(ctx, run.progress)  # an intent is done before its request's record is written
    _write_records(ctx, ended)
    for end in ended:
        report.records[end.item.request_id] = end.record
    _remember_own_fills(ctx, run, report)


def _note_refusals(run: Run, refusals: Sequence[str], candidates: Candidates) -> None:
    """Say, on each request that still wants instances, why the launch gave it fewer: the
    minValues the fleet could not meet, or a lease that covers no candidate."""
    for item in run.active:
        if not item.wanted:
            continue
        for refusal in refusals:
            item.note(ErrorDetail(code=MIN_VALUES, message=refusal))
        if item.covers_none:
            launched = len(item.instance_ids)
            item.note(words.lease_holds_no_candidate(item.pool_name, launched, candidates))


def _landed(ctx: Context, run: Run) -> dict[str, InstanceLanding]:
    """Where each instance of the visit landed: as the launch saw it, else as EC2 describes it."""
    where = {x.instance_id: x for x in run.seen}
    missing = [i for p in run.progress for i in p.instance_ids if i not in where]
    described = ctx.ports.fleet.describe(missing)
    replayed = run.replayed_in, run.replayed_reserved
    where.update({x.instance_id: words.as_launched(x, *replayed) for x in described})
    return where


@dataclass(frozen=True)
class _Ended:
    """A request of the visit settled: its record and its instances' records, to be written."""

    item: Progress
    record: RequestRecord
    instances: list[InstanceRecord]
    # Those whose records its lease's settle wrote with their members.
    written: frozenset[str] = frozenset()


def _write_records(ctx: Context, ended: Sequence[_Ended]) -> None:
    """The visit's instance records its settles did not write, then its request records (each
    request's record after its instances', as a record names them): a BatchWriteItem each for
    the whole visit, not three writes per request one after another (issue 38). A lease's
    settle writes its instances' records with their members (`settle_lease`): in a warm
    request nothing is left for the first. Those of requests an earlier delivery settled are
    adopted: events since (a stop, a termination) must stay."""
    for end in ended:
        if end.item.settled:
            ctx.ports.instances.adopt(end.instances)
    left = [
        x
        for end in ended
        if not end.item.settled
        for x in end.instances
        if x.instance_id not in end.written
    ]
    if left:
        ctx.ports.instances.put(left)
    ctx.ports.records.put_records([end.record for end in ended])
    for end in ended:
        end.item.mark_ended()


def _settle(
    ctx: Context,
    item: Progress,
    landings: Mapping[str, InstanceLanding],
    unavailable: Sequence[UnavailableOffering],
    candidates: Candidates,
    reservations: Mapping[str, ReservationSnapshot],
) -> _Ended:
    """The request's gang and lease settled; its records, not yet written."""
    request = item.request
    mine = [landings[i] for i in item.instance_ids if i in landings]
    if len(mine) < request.min_count:
        complete_left(ctx, [item])  # its intents are done before their instances are ended
        _missed_min_count(ctx, item, mine)
        mine = []
    types = _landed_types(ctx, candidates, mine)
    now = ctx.clock()
    by_id = {
        x.instance_id: words.instance_record(x, item.prepared, types.get(x.instance_type), now)
        for x in mine
    }
    written: frozenset[str] = frozenset()
    if item.granted:
        limits = item.prepared.pool.spec.limits
        # An earlier delivery's settle wrote the records already (they are adopted).
        carried = None if item.settled else by_id
        mine, over, written, completed = settle_lease(
            ctx,
            item.pool_name,
            request,
            mine,
            types,
            limits,
            item.settled,
            records=carried,
            completions=() if item.settled else tuple(item.completions),
        )
        if completed:
            item.completions.clear()  # its intents are done with its settle
        item.errors += over
    records = [by_id[x.instance_id] for x in mine]
    status = status_for(request.count, len(mine), request.min_count)
    if status is RequestStatus.PARTIALLY_FULFILLED and item.short is not None:
        item.note(item.short)
    record = finish(ctx, item, mine, unavailable, status, item.errors, reservations, store=False)
    return _Ended(item, record, records, written)


def _missed_min_count(ctx: Context, item: Progress, mine: Sequence[InstanceLanding]) -> None:
    """Terminate what a request got short of its minCount, and say why it ends with nothing."""
    if not mine:
        if not item.errors:
            item.errors.append(
                ErrorDetail(
                    code="InsufficientCapacity", message="no offering could serve the request"
                )
            )
        return
    holding = [] if item.settled else mine  # the delivery that settled gave the slots back
    item.errors.append(terminate_short(ctx, mine, item.request.min_count, holding))


def terminate_short(
    ctx: Context,
    landed: Sequence[InstanceLanding],
    min_count: int,
    holding: Sequence[InstanceLanding],
) -> ErrorDetail:
    """Terminate a gang that got fewer instances than its minCount (docs/contracts.md, minCount:
    they are terminated and the request Failed), and free the reservation slots of those
    `holding` theirs still; returns the record's words for it."""
    terminate_landed(ctx, landed, holding)
    return ErrorDetail(
        code="MinCountNotMet",
        message=f"launched {len(landed)} of minCount={min_count}; "
        f"terminated {', '.join(x.instance_id for x in landed)}",
    )


def settle_lease(
    ctx: Context,
    pool: str,
    request: LaunchRequest,
    landed: Sequence[InstanceLanding],
    types: Mapping[str, InstanceTypeInfo],
    limits: PoolLimits | None,
    settled: bool = False,
    least: int | None = None,
    records: Mapping[str, InstanceRecord] | None = None,
    completions: Sequence[IntentCompletion] = (),
) -> tuple[list[InstanceLanding], list[ErrorDetail], frozenset[str], bool]:
    """The request's lease in `pool` settled to the instances `landed` (members in its place);
    returns those it keeps, the record's words for those it terminated, the ids whose
    `records` were written with their members (each in the transaction that counts it: never
    a member without its record, and no write of their own), and whether the intents'
    `completions` were written in its settling transaction (a settled lease's intents are
    done; not when an earlier settle got there first: the caller writes them).

    A lease reclaimed under the launch (it expired, and the sync gave back the room and the
    quota it held, which another request may have been admitted into since) is taken again for
    exactly these instances, as a new request's lease is taken (`PoolLeases.take`: the pool's
    limits and the requester's quota, each read and conditioned on as any admission is; their
    own types' sizes; at least `least`, the request's minCount by default), and settled to
    those it holds (`pool_usage.kept_under`); the rest are terminated (issue 34). `settled`:
    an earlier delivery gave their reservation slots back."""
    least = request.min_count if least is None else least
    amounts = {x.instance_id: words.counted(types.get(x.instance_type)) for x in landed}
    kept = list(landed)
    errors: list[ErrorDetail] = []
    for _ in range(_LEASED_AGAIN_TRIES):
        try:
            members = {x.instance_id: amounts[x.instance_id] for x in kept}
            written, completed = lease_settlement.settle(
                ctx.ports.leases, pool, request.request_id, members, records, completions
            )
            return kept, errors, written, completed or not completions
        except LeaseReclaimed:
            fit, refusal = _lease_again(ctx, pool, request, kept, amounts, limits, least)
        over = [x for x in kept if x.instance_id in fit.over]
        if over:
            # The intents are done before their instances are ended (a replay of a pending one
            # would count them again).
            _complete(ctx, completions)
            completions = ()
            errors.append(terminate_over(ctx, pool, over, refusal, settled))
            kept = [x for x in kept if x.instance_id not in fit.over]
    raise Transient("SettleLease", "LeaseReclaimedAgain")


def _complete(ctx: Context, completions: Sequence[IntentCompletion]) -> None:
    for done in completions:
        store(ctx, done)


def _lease_again(
    ctx: Context,
    pool: str,
    request: LaunchRequest,
    landed: Sequence[InstanceLanding],
    amounts: Mapping[str, Resources],
    limits: PoolLimits | None,
    least: int,
) -> tuple[UnleasedFit, str | None]:
    """A lease taken again for the instances `landed` (their lease was reclaimed), and which of
    them it holds; the refusal that granted none, when one did (the quota, the pool's
    `limits.unready`, the pool deleted: it names what refused)."""
    sizes = {x.instance_type: amounts[x.instance_id] for x in landed}
    least = min(least, len(landed))
    refusal: str | None = None
    try:
        ask = LeaseAsk(
            pool,
            request.requester,
            largest(sizes.values()),
            len(landed),
            max(least, 1),
            sizes,
            partial=True,
        )
        lease = take_lease(ctx.ports.leases, ask, request.request_id, limits)
    except (QuotaExceeded, UnreadyLimitReached, NodePoolDeleted) as refused:
        lease, refusal = None, str(refused)
    types = {x.instance_id: x.instance_type for x in landed}
    mine = {x.instance_id: amounts[x.instance_id] for x in landed}
    return kept_under(lease, mine, types, least), refusal


def terminate_over(
    ctx: Context,
    pool: str,
    terminated: Sequence[InstanceLanding],
    refusal: str | None = None,
    settled: bool = False,
) -> ErrorDetail:
    """Terminate the instances a reclaimed lease's settle left uncounted (`settle_lease`): the
    lease taken for them again does not hold them (another request was admitted into the room
    or the quota meanwhile; `refusal`: what refused it outright). Frees their reservation
    slots, unless `settled` (an earlier delivery gave them back); returns the record's words
    for it."""
    terminate_landed(ctx, terminated, [] if settled else terminated)
    why = refusal or f"they no longer hold {len(terminated)} of them"
    return ErrorDetail(
        code=LEASE_RECLAIMED_OVER_LIMIT,
        message=f"the lease of node pool {pool} expired during the launch and was reclaimed; "
        "the instances launched were leased again as a new request is (the pool's limits and "
        f"the requester's quota): {why}: terminated "
        f"{', '.join(x.instance_id for x in terminated)}",
    )


def _landed_types(
    ctx: Context, candidates: Candidates, landed: Sequence[InstanceLanding]
) -> Mapping[str, InstanceTypeInfo]:
    """The facts of every type that landed. A replay serves the instances its predecessor
    launched with the candidates of the pool as applied now: a pool applied again meanwhile
    with other instance types (or another NodeClass's zones) does not name theirs, and an
    instance counted without them would hold its pool's and its quota's usage for none of
    its CPUs, memory or GPUs."""
    known = candidates.instance_types
    missing = [x for x in landed if x.instance_type not in known]
    if not missing:
        return known
    zones = sorted({x.zone for x in missing})
    names = sorted({x.instance_type for x in missing})
    return {**known, **{f.name: f for f in ctx.ports.catalog.offered(zones, names)}}


def reject_all(
    ctx: Context,
    progress: Sequence[Progress],
    report: LaunchReport,
    error: ErrorDetail,
    status: RequestStatus = RequestStatus.REJECTED,
) -> None:
    """A pool's answer to requests that have no other pool to go to."""
    for item in progress:
        report.records[item.request_id] = finish(
            ctx, item, [], [], status, [*item.passed_over(), error]
        )


def finish(
    ctx: Context,
    item: Progress,
    landings: Sequence[InstanceLanding],
    unavailable: Sequence[UnavailableOffering],
    status: RequestStatus,
    errors: Sequence[ErrorDetail],
    reservations: Mapping[str, ReservationSnapshot] | None = None,
    *,
    pool: str | None = None,
    store: bool = True,
) -> RequestRecord:
    """The request's record, stored (its reclaim asked for first); `pool`: where its instances
    run, when that is not the pool it resolves to now (one it may no longer use:
    `replay.afresh`). `store=False`: only built, for `settle_all` to write with the visit's."""
    request = item.request
    if item.reclaim is not None and not landings:
        errors = request_reclaim(ctx, item, item.reclaim, errors)
    record = RequestRecord.of(
        request,
        status,
        node_pool=pool or item.pool_name,
        received_at=item.prepared.received_at,
        finished_at=ctx.clock(),
        instances=[words.launched(x, reservations or {}) for x in landings],
        unavailable_offerings=list(unavailable),
        errors=list(errors),
        candidates_left_out=item.left_out,
    )
    if store:
        ctx.ports.records.put_record(record)
        item.mark_ended()
    return record


def _remember_own_fills(ctx: Context, run: Run, report: LaunchReport) -> None:
    """Mark the reservations this serve's instances filled, except those where an instance
    was rolled back (terminated because a gang missed minCount): their slots are free."""
    own_fills = run.own_fills
    if not own_fills.marks:
        return
    freed = _rolled_back_reservations(run, report)
    dry = [r for r in own_fills.marks if r not in freed]
    if len(dry) < len(own_fills.marks):  # counted as cache writes when EC2 answered
        report.wrote(RESERVED, len(dry) - len(own_fills.marks))
    if dry:
        ctx.ports.unavailable.mark([own_fills.marks[r] for r in dry])
        ctx.ports.reservations.mark_exhausted(dry)


def _rolled_back_reservations(run: Run, report: LaunchReport) -> set[str]:
    """Reservations an instance of this serve landed in and was terminated from."""
    kept = {
        x.instance_id for item in run.progress for x in report.records[item.request_id].instances
    }
    return {
        x.capacity_reservation_id
        for x in run.own_fills.landings
        if x.capacity_reservation_id and x.instance_id not in kept
    }
