"""What a request would get, and when, without launching it (`capacity-launcher submit
--dry-run`).

The launcher's own steps, read-only, through its ports: resolution (which pool and NodeClass,
the narrowed requirements), the attempts its launch plan would make (reservations by
availability, then spot, then on-demand) over the candidates less what the ICE cache holds, each
ordered and cut at the override limit by the launch's own function (`send.offer_of`), the
reservations it could wait for, and the headroom its pool's limits and its quota leave. Nothing
is leased, claimed, launched, published or written; the answer is the state of this moment (the
launcher decides again when the request arrives).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from capacity_launcher.domain.accounting.admission_queue import entry_key
from capacity_launcher.domain.accounting.pool_usage import fit_lease, room_left, unready_refusal
from capacity_launcher.domain.accounting.quota_leases import (
    LeaseAsk,
    admit_lease,
    governing,
    tree_usage_items,
)
from capacity_launcher.domain.apis.quotas import format_amount
from capacity_launcher.domain.capacity.offerings import Offering
from capacity_launcher.domain.errors import QuotaExceeded, RequestRejected
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import (
    CandidatesLeftOut,
    ErrorDetail,
    UnavailableOffering,
    format_timestamp,
)
from capacity_launcher.service.accounting_ports import PoolReadinessCount, PoolUsage, QuotaUsage
from capacity_launcher.service.launch.attempts import plan as launch_plan
from capacity_launcher.service.launch.progress import Context, LaunchReport, PoolView, Refusal
from capacity_launcher.service.launch.resolve import read_pool, screen
from capacity_launcher.service.launch.send import offer_of
from capacity_launcher.service.resolution import Prepared, resolve, resolve_next


@dataclass(frozen=True)
class Usage:
    """What the preview reads beside the launcher's ports: usage as stored, never leased, and
    the unready instances of pools with `limits.unready` (None: not counted)."""

    pools: PoolUsage
    quotas: QuotaUsage
    readiness: PoolReadinessCount | None = None
    # The admission queues (None: a request that may wait is not told behind how many).
    queues: QueuesAhead | None = None


class QueuesAhead(Protocol):
    # How many entries of the pool's queue sort before `entry_key`.
    def ahead(self, pool: str, entry_key: str) -> int: ...


@dataclass(frozen=True)
class WouldWait:
    """A request that may wait and would not launch now: the queue it would wait in, behind
    how many, and until when (what it would wait for is each pool's refusal or headroom)."""

    pool: str
    priority: int
    behind: int | None
    until: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodePool": self.pool,
            "priority": self.priority,
            "behind": self.behind,
            "until": format_timestamp(self.until),
        }


@dataclass(frozen=True)
class Step:
    """One launch attempt the pool would make, in the launcher's order (its `LaunchPlan`): a
    reservation target (its id or group, with the room the snapshots show), or a spot or
    on-demand CreateFleet. `offerings` are what its CreateFleet would offer, in the order it
    would offer them, after the cut at the override limit (`fleet.fleet_offer`, as the launch
    cuts them); `left_out` says what that cut left out, as the request's record would."""

    capacity_type: str
    offerings: tuple[Offering, ...]
    target: str | None = None
    available: int | None = None
    count: int | None = None
    left_out: CandidatesLeftOut | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacityType": self.capacity_type,
            "target": self.target,
            "available": self.available,
            "count": self.count,
            "offerings": [f"{o.instance_type} {o.zone}" for o in self.offerings],
            "candidatesLeftOut": None if self.left_out is None else self.left_out.to_dict(),
        }


@dataclass(frozen=True)
class Headroom:
    """How many more instances the pool's limits and the requester's quota admit now (None:
    unlimited), each sized as a lease would size it: the largest candidate, or, when the room
    left cannot hold the request at that size, the largest of the types that fit
    (`pool_usage.fit_lease`; `left_out` names the others). `unready_refusal`: why
    `limits.unready` would refuse a lease now, whatever room the limits leave."""

    per_instance: Resources
    limits: int | None
    quota: str | None = None
    quota_admits: int | None = None
    quota_refusal: str | None = None
    left_out: tuple[str, ...] = ()
    unready_refusal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "perInstance": {
                d: format_amount(d, a) for d, a in self.per_instance.amounts().items() if a
            },
            "limits": self.limits,
            "quota": self.quota,
            "quotaAdmits": self.quota_admits,
            "quotaRefusal": self.quota_refusal,
            "typesLeftOut": list(self.left_out),
            "unreadyRefusal": self.unready_refusal,
        }


@dataclass(frozen=True)
class PoolPreview:
    """One pool's answer: the steps it would try, or why it would refuse the request."""

    pool: str
    node_class: str
    steps: tuple[Step, ...] = ()
    in_the_way: tuple[UnavailableOffering, ...] = ()
    scheduled: tuple[dict[str, Any], ...] = ()
    headroom: Headroom | None = None
    refusal: ErrorDetail | None = None
    refusal_status: str | None = None
    # The capacity types the plan would pass over without asking EC2 (minValues not met).
    passed_over: tuple[str, ...] = ()
    # How many instances a lease would take now (the request's count cut to what the limits
    # and the quota admit: the attempts' counts), and the least it takes (minCount).
    lease: int | None = None
    least: int = 1

    @property
    def would_try(self) -> bool:
        """It would ask EC2: nothing refuses the request here, its limits and quota leave room
        for at least its minCount, and `limits.unready` does not hold launches back."""
        room = self.headroom
        full = room is not None and (
            (self.lease is not None and self.lease < self.least) or room.unready_refusal is not None
        )
        return self.refusal is None and bool(self.steps) and not full

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodePool": self.pool,
            "nodeClass": self.node_class,
            "refusal": None
            if self.refusal is None
            else {**self.refusal.to_dict(), "status": self.refusal_status},
            "attempts": [s.to_dict() for s in self.steps],
            "passedOver": list(self.passed_over),
            "unavailableOfferings": [u.to_dict() for u in self.in_the_way],
            "scheduledReservations": list(self.scheduled),
            "headroom": None if self.headroom is None else self.headroom.to_dict(),
            "wouldLease": self.lease,
        }


@dataclass(frozen=True)
class Preview:
    """The request as the launcher would see it now: rejected, or each pool it would try."""

    request: LaunchRequest
    at: datetime
    rejected: ErrorDetail | None = None
    pools: tuple[PoolPreview, ...] = field(default_factory=tuple)
    would_wait: WouldWait | None = None

    @property
    def would_launch(self) -> bool:
        return self.rejected is None and any(p.would_try for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requestId": self.request.request_id,
            "at": format_timestamp(self.at),
            "rejected": None if self.rejected is None else self.rejected.to_dict(),
            "pools": [p.to_dict() for p in self.pools],
            "wouldWait": None if self.would_wait is None else self.would_wait.to_dict(),
        }


@dataclass(frozen=True)
class DryRun:
    """`submit --dry-run` as the composition root builds it (`wiring.Adapters.dry_run`): the
    launcher's context, read-only, and the usage the preview reads beside it."""

    context: Context
    usage: Usage

    def __call__(self, request: LaunchRequest) -> Preview:
        return preview(self.context, request, self.usage)


def preview(ctx: Context, request: LaunchRequest, usage: Usage) -> Preview:
    """The pools the request would go to, in order, and what each would try; `usage` reads the
    pools' and quotas' usage as stored (the launcher's own port only leases)."""
    now = ctx.clock()
    try:
        prepared = resolve(ctx.ports.config, request, now)
    except RequestRejected as rejected:
        return Preview(request, now, ErrorDetail(code=rejected.code, message=rejected.reason))
    chain = list(_chain(ctx, prepared))
    shown = Preview(request, now, pools=tuple(_visit(ctx, usage, p) for p in chain))
    until = request.wait_for_capacity_until
    if until is None or shown.would_launch:
        return shown
    # It would wait in the queue of the last pool that refused it for room (docs/queueing.md).
    last = chain[-1]
    pool = last.pool.metadata.name
    key = entry_key(last.priority, now, request.request_id)
    behind = usage.queues.ahead(pool, key) if usage.queues is not None else None
    return replace(shown, would_wait=WouldWait(pool, last.priority, behind, until))


def _chain(ctx: Context, first: Prepared) -> Iterator[Prepared]:
    """The named pool; or every compatible one, by weight, as the launcher passes it on."""
    prepared: Prepared | None = first
    while prepared is not None:
        yield prepared
        prepared, _ = resolve_next(ctx.ports.config, prepared)


def _visit(ctx: Context, usage: Usage, prepared: Prepared) -> PoolPreview:
    pool, node_class = prepared.pool.metadata.name, prepared.node_class.metadata.name
    found = read_pool(ctx, prepared, [], LaunchReport(records={}), every_reservation=True)
    refusal = found if isinstance(found, Refusal) else screen(ctx, found)
    if isinstance(found, Refusal) or refusal is not None:
        assert refusal is not None
        return PoolPreview(
            pool, node_class, refusal=refusal.error, refusal_status=str(refusal.status)
        )
    headroom = _with_unready(usage, found, _headroom(ctx, usage, found))
    request = found.lead.request
    lease = leased(request.count, headroom)
    # The attempts as the launcher would make them under that lease (at least one instance
    # each, to show what it would offer, when the lease would not be taken at all).
    steps, passed_over = _steps(ctx, found, max(lease, 1))
    return PoolPreview(
        pool,
        node_class,
        steps=steps,
        passed_over=passed_over,
        lease=lease,
        least=max(request.min_count, 1),
        in_the_way=tuple(found.skipped),
        scheduled=tuple(
            {
                "capacityReservationId": r.reservation_id,
                "state": r.state,
                "capacityReservationType": r.reservation_type,
                "startDate": format_timestamp(r.start_date) if r.start_date else None,
            }
            for r in found.candidates.scheduled
        ),
        headroom=headroom,
    )


def leased(count: int, room: Headroom) -> int:
    """The instances a lease would take now: `count`, cut to what the pool's limits and the
    requester's quota admit (the launcher's lease phase cuts it so, down to minCount)."""
    return max(min(n for n in (count, room.limits, room.quota_admits) if n is not None), 0)


def _steps(ctx: Context, view: PoolView, count: int) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    """The attempts the launcher's plan would make for `count` instances if none launched
    anything, each cut as its CreateFleet would be (`send.offer_of`), and the capacity types the
    plan would pass over (minValues not met)."""
    request = view.lead.request
    plan = launch_plan(ctx, view, count, min(request.min_count, count))
    steps: list[Step] = []
    while (attempt := plan.next_attempt()) is not None:
        offer = offer_of(attempt, view)
        target, room = None, None
        if attempt.target is not None:
            ids = {o.reservation_id for o in offer.offered}
            source = next(s for s, _ in view.usable.reserved if s.target == attempt.target)
            target = attempt.target.name
            room = sum(r.available for r in source.reservations if r.reservation_id in ids)
        steps.append(
            Step(
                attempt.capacity_type,
                offer.offered,
                target,
                room,
                attempt.count,
                offer.left_out_record(),
            )
        )
        # As if EC2 launched nothing and blamed nothing: the plan goes on to its next target.
        plan.record(replace(attempt, offerings=offer.offered), [], [])
    return tuple(steps), tuple(plan.refusals)


def _headroom(ctx: Context, usage: Usage, view: PoolView) -> Headroom:
    request, pool = view.lead.request, view.lead.pool
    each, left_out, room = _limits_headroom(usage, view)
    quota_set = ctx.ports.config.quota_set()
    quotas, cohorts = quota_set.quotas, quota_set.cohorts
    try:
        quota = governing(quotas, request.requester, pool.metadata.name)
        if quota is None:
            return Headroom(each, room, left_out=left_out)
        used: Mapping[tuple[str, str], Resources] = {
            k: v
            for pk, name in tree_usage_items(quota, cohorts, pool.metadata.name)
            for k, v in usage.quotas.quota_usage(pk, name).items()
        }
        ask = LeaseAsk(pool.metadata.name, request.requester, each, request.count, 1)
        admits = admit_lease(quotas, ask, used, cohorts)
        return Headroom(each, room, quota.name, admits, left_out=left_out)
    except QuotaExceeded as refused:
        return Headroom(each, room, refused.quota, 0, str(refused), left_out)


def _with_unready(usage: Usage, view: PoolView, room: Headroom) -> Headroom:
    """The headroom with why `limits.unready` would refuse a lease now, as the lease's gate
    decides it (`pool_usage.unready_refusal`)."""
    pool, limits = view.lead.pool.metadata.name, view.lead.pool.spec.limits
    if usage.readiness is None or limits is None or limits.unready is None:
        return room
    refused = unready_refusal(pool, limits, usage.readiness.count(pool))
    return room if refused is None else replace(room, unready_refusal=str(refused))


def _limits_headroom(usage: Usage, view: PoolView) -> tuple[Resources, tuple[str, ...], int | None]:
    """What one instance is sized by, the candidate types left out for it, and how many more the
    pool's limits admit: as a lease fits the request into the room left now."""
    each, limits = view.per_instance, view.lead.pool.spec.limits
    if limits is None:
        return each, (), None
    used = usage.pools.usage(view.lead.pool.metadata.name)
    room = room_left(limits, used)
    fit = fit_lease(view.candidates.sizes(), view.lead.request.count, 1, room)
    if fit is not None and fit.instance_types is not None:
        each = fit.per_instance
    left_out = fit.left_out if fit is not None else ()
    return each, left_out, limits.headroom(used, each)
