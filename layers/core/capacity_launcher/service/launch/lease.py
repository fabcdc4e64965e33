"""Lease: room in the pool's limits (and its requester's quota) for each request, before EC2 is
asked. A lease is sized by the largest candidate and settled to what actually launched; a
request whose lease an earlier delivery settled launches nothing more.

When the room left cannot hold `count x the largest candidate`, the lease covers only the
candidate types that fit (sized by the largest of them: `pool_usage.fit_lease`), and the
request launches only those; its record names the types left out (candidatesLeftOut, reason
RoomLeft). Requests served together launch from one plan: each is leased over the types the
ones before it were covered for, and the visit launches from the types every lease covers
(`covered`), so no CreateFleet offers a type a lease did not cover.

A lease is conditioned on the revisions of the pool and NodeClass the request was resolved
with: when either was applied since (this container's copy is older), nothing is leased and
the request is resolved again on the stored documents (`Leased.CHANGED`).

A lease an earlier delivery took (and died before it wrote an intent) is taken up as it is,
covering only the candidate types it holds room for (`pool_usage.held_by`): a pool applied since
may allow larger ones. Like a new lease, it covers only types the leases of the requests before
it in the visit cover (a group launches only what every lease covers). It is taken up only while
the pool and class are stored at the revisions the request was resolved with, checked as a new
lease checks them (`Leased.CHANGED` otherwise: it was sized on the documents of its time, and
this container's copy may be older than the stored ones), and only while it is unexpired: the
take-up extends it by a whole lease period, so the sync never reclaims it under the launch. An
expired one is given back (as the sync would reclaim it) and a new lease taken under the limits:
the room it held may be another request's by the time the sync comes (issue 34). When it holds
room for none, nothing was launched under it: it is given back and a new lease taken,
conditioned like any other; unless intents name the request (they launched under it): it replays
them under that lease and launches no more, and a record left short says why
(`LeaseHoldsNoCandidate`, not the room left).

A request that replays intents here launched here already: if its lease was lost meanwhile
(expired and reclaimed, its instances counted by the sync), it launches no more but still takes
what those intents launched, and never goes on to another pool to launch anew.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from capacity_launcher.domain.accounting.admission_queue import limit_awaited, quota_awaited
from capacity_launcher.domain.accounting.pool_usage import Lease, held_by, largest
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk, governing
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.capacity.fleet import room_left_record
from capacity_launcher.domain.errors import (
    NodePoolChanged,
    NodePoolDeleted,
    QuotaExceeded,
    UnreadyLimitReached,
)
from capacity_launcher.domain.records.status import AwaitedReservation, ErrorDetail
from capacity_launcher.service.admission import take_lease, take_up
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.progress import Context, PoolView, Progress


class Leased(Enum):
    """One request's lease, as the lease phase found or took it."""

    SETTLED = "settled"  # an earlier delivery settled it: only the record is left to write
    GRANTED = "granted"  # room for at least its minCount
    REFUSED = "refused"  # its quota refuses it, or the pool is gone: nothing is leased
    FULL = "full"  # the limits leave room for fewer than its minCount now
    CHANGED = "changed"  # its pool or class was applied since it was resolved: nothing leased


def lease_all(
    ctx: Context, progress: Sequence[Progress], view: PoolView, replayed: Collection[str]
) -> list[Progress]:
    """Lease for each request; returns those at the pool's limits that another pool may serve
    (nothing is leased for them here). Each is leased over the types the leases before it
    cover, choosing types that leave room for the requests after it when some do (its
    `lease_types` then say which it covers)."""
    outcomes = []
    types: frozenset[str] | None = None
    for at, item in enumerate(progress):
        beside = sum(later.request.count for later in progress[at + 1 :])
        outcome = _lease(ctx, item, view, replayed, _Over(types, beside))
        if outcome is Leased.GRANTED and item.lease_types is not None:
            types = item.lease_types if types is None else types & item.lease_types
        outcomes.append((item, outcome))
    return [
        item
        for item, outcome in outcomes
        if outcome not in (Leased.SETTLED, Leased.CHANGED)
        and item.granted == 0
        and item.prepared.alternatives
        and item.request_id not in replayed
    ]


def covered(view: PoolView, progress: Sequence[Progress]) -> PoolView:
    """The view a visit launches from: only the types every request's lease covers (each
    request notes on its record which types the room left kept out)."""
    types: frozenset[str] | None = None
    for item in progress:
        if item.lease_types is not None:
            types = item.lease_types if types is None else types & item.lease_types
    if types is None:
        return view
    for item in progress:
        # A lease that covers none was sized for the types of its time, not by the room left:
        # its record says so in its errors (`words.lease_holds_no_candidate`).
        if item.left_out is None and not item.covers_none:
            item.left_out = room_left_record(view.candidates, types)
    return replace(view, usable=view.usable.only(types))


def active(progress: Sequence[Progress], replayed: Collection[str]) -> list[Progress]:
    """The requests that launch here, or take what their replayed intents launched here."""
    return [p for p in progress if p.granted > 0 or p.settled or p.request_id in replayed]


@dataclass(frozen=True)
class _Over:
    """What a request of a visit is leased over: the types the leases before it cover (None:
    every candidate), and the instances the requests after it ask for."""

    types: frozenset[str] | None
    beside: int


def _reserve(ctx: Context, item: Progress, view: PoolView, over: _Over) -> Lease | None:
    """A new lease (the one read before it found none), over `over.types` of the candidates."""
    sizes = view.candidates.sizes()
    per_instance = view.per_instance
    types = over.types
    if types is not None:
        sizes = {name: size for name, size in sizes.items() if name in types}
        per_instance = largest(sizes.values())
    ask = LeaseAsk(
        view.pool_name,
        item.request.requester,
        per_instance,
        item.request.count,
        item.request.min_count,
        sizes,
        partial=types is not None,
        beside=over.beside,
    )
    limits = view.lead.pool.spec.limits
    return take_lease(ctx.ports.leases, ask, item.request_id, limits, _seen(view), unleased=True)


def _seen(view: PoolView) -> Revisions:
    """The revisions of the pool and class the visit's requests were resolved with (and of the
    listing their pool was chosen from): what a lease, new or taken up, is conditioned on."""
    return Revisions.of(view.lead.pool, view.lead.node_class, view.lead.pools_generation)


def _lease(
    ctx: Context,
    item: Progress,
    view: PoolView,
    replayed: Collection[str],
    over: _Over,
) -> Leased:
    pool = view.pool_name
    # One read of its lease, none on its first delivery (no lease was ever taken for it).
    found = None if item.first else ctx.ports.leases.lease(pool, item.request_id)
    if found is not None and found.settled:
        item.mark_settled()  # it absorbs its done intents, launches no more
        return Leased.SETTLED
    try:
        taken_up = _taken_up(ctx, item, view, found, replayed, over.types)
        refused = _take(ctx, item, view, taken_up, over)
    except NodePoolChanged:
        item.mark_changed()
        return Leased.CHANGED
    if refused is not None:
        item.errors.append(ErrorDetail(code=refused.code, message=str(refused)))
        item.awaits_also(_awaited(pool, refused))
        return Leased.REFUSED
    if item.granted > 0:
        return Leased.GRANTED
    if item.request_id not in replayed:
        full = _full(ctx, item, view, over.types)
        item.errors.append(full)
        item.awaits_also(limit_awaited(pool, full.message))
    return Leased.FULL


def _awaited(
    pool: str, refused: QuotaExceeded | NodePoolDeleted | UnreadyLimitReached
) -> AwaitedReservation | None:
    """What a refused request may wait for: room in its quota, or under the unready limit (a
    deleted pool never has room)."""
    if isinstance(refused, QuotaExceeded):
        return quota_awaited(refused)
    if isinstance(refused, UnreadyLimitReached):
        return limit_awaited(pool, str(refused))
    return None


def _short(ctx: Context, item: Progress, view: PoolView, lease: Lease) -> ErrorDetail:
    """Why its lease holds room for fewer than it asked for, with the pool's numbers now."""
    pool = view.pool_name
    others = ctx.ports.leases.usage(pool) - lease.amount
    quotas = ctx.ports.config.capacity_quotas()
    quota = governing(quotas, item.request.requester, pool)
    limits = view.lead.pool.spec.limits
    return words.short_lease(
        pool, limits, others, lease, item.request.count, quota.name if quota else None
    )


def _taken_up(
    ctx: Context,
    item: Progress,
    view: PoolView,
    found: Lease | None,
    replayed: Collection[str],
    types: frozenset[str] | None,
) -> Lease | None:
    """The open lease an earlier delivery took, covering the candidate types it holds room for
    of `types`, those the leases of the requests before it in the visit cover (None: every
    candidate), as a new lease would be (a group launches only the types every lease covers:
    one covering none of theirs left the group nothing to launch); None (a new one is taken,
    over `types`) when there is none, or it holds room for none of them and no intent names the
    request (nothing was launched under it, so it is given back)."""
    if found is None:
        return None
    every = view.candidates.sizes()
    sizes = every if types is None else {name: every[name] for name in every if name in types}
    held = held_by(found, sizes)
    if held == frozenset(every):
        return found
    if not held and item.request_id not in replayed:
        ctx.ports.leases.cancel(view.pool_name, item.request_id)
        return None
    return replace(found, instance_types=held)


def _take(
    ctx: Context, item: Progress, view: PoolView, found: Lease | None, over: _Over
) -> QuotaExceeded | NodePoolDeleted | UnreadyLimitReached | None:
    """Its open lease, or a new one; the refusal when none can be taken here."""
    try:
        lease = _held(ctx, view, found)
        # An earlier delivery's open lease is taken up now, or there is none (a pool changed or
        # deleted since leaves it open: the visit gives it back as the request leaves).
        if lease is None:
            item.mark_unleased()
            lease = _reserve(ctx, item, view, over)
        if lease is not None:
            item.mark_leased(lease.count, lease.instance_types)
            if lease.count < item.request.count:
                item.short = _short(ctx, item, view, lease)
    except QuotaExceeded as refused:
        # Like a flavor in Kueue, a pool its quota refuses passes it on as one at its
        # limits does; a reclaim waits for the request's end (`settle.finish`).
        if refused.reclaim and item.reclaim is None:
            item.reclaim = refused
        elif not refused.reclaim and refused.demand is not None and item.preempt is None:
            item.preempt = refused
        return refused
    except UnreadyLimitReached as unready:
        # limits.unready: the pool launches nothing more for now; another pool may.
        return unready
    except NodePoolDeleted as gone:
        # A copy of the pool outlived its deletion: nothing is leased, a request that
        # named no pool tries the next one.
        return gone
    return None


def _held(ctx: Context, view: PoolView, found: Lease | None) -> Lease | None:
    """The open lease an earlier delivery took, taken up under the revisions the request was
    resolved with (NodePoolChanged when its pool or class was applied since) and extended by a
    lease period; None when there is none, or it is open no longer, or it expired (then it is
    given back: a new one is taken)."""
    if found is None:
        return None
    taken_up = take_up(ctx.ports.leases, found, view.lead.pool.spec.limits, _seen(view))
    if taken_up is None:
        # Expired (or gone meanwhile): the sync may reclaim it under this launch and another
        # request lease the room it frees. It is given back now, as the sync would, and the
        # new lease is taken under the limits (issue 34).
        ctx.ports.leases.reclaim(found)
    return taken_up


def _full(
    ctx: Context, item: Progress, view: PoolView, types: frozenset[str] | None
) -> ErrorDetail:
    """Why no lease was taken, with the pool's numbers now: over the candidate types a new lease
    was asked for (`types`: those the leases before it in the visit cover; None: every one)."""
    pool = view.pool_name
    sizes = {n: r for n, r in view.candidates.sizes().items() if types is None or n in types}
    return words.full_lease(
        pool,
        view.lead.pool.spec.limits,
        ctx.ports.leases.usage(pool),
        sizes,
        item.request.min_count,
    )
