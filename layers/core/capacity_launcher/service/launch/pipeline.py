"""The launch pipeline: from a group of validated requests to instances and a record each.

`Launcher.serve` takes a group of compatible requests (usually one; several when an SQS batch
coalesces them), so one CreateFleet can serve them all. Each request is first looked up (a
finished one is replayed, a predecessor's intents are finished first); then each visit of a pool
runs the phases in order:

    resolve -> wait -> screen -> lease -> launch (plan, claim, send, absorb) -> settle

A visit that carries a predecessor's intents is recovery's (`_replay_visit`): resolve -> screen
-> lease -> replay -> launch -> settle, with no wait and no pass-over; refused, it finishes the
intents in their pool before the refusal answers the rest.

A phase that passes a request on (a request that named no pool, which this pool cannot serve)
adds it to the visits of the next compatible pool by weight: pool fallback is this loop over
visits, never a phase calling back into the pipeline. A request whose lease found its pool or
class applied since this container read them is resolved again on the stored documents and
added to the visits the same way (once per delivery; a second change hands the message back).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime

from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.errors import RequestRejected, Transient
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.status import ErrorDetail, RequestRecord
from capacity_launcher.domain.requester_origins import Origin
from capacity_launcher.observability import logger
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.attempts import launch
from capacity_launcher.service.launch.lease import active, covered, lease_all
from capacity_launcher.service.launch.lifecycle import Phase
from capacity_launcher.service.launch.progress import (
    POOL_PASSED_OVER,
    Context,
    LaunchReport,
    PoolView,
    Progress,
    Refusal,
    Run,
    Visit,
)
from capacity_launcher.service.launch.recovery import recover, recover_rejected
from capacity_launcher.service.launch.replay import finish_refused, replay
from capacity_launcher.service.launch.resolve import (
    cannot_hold,
    nothing_left,
    read_pool,
    screen,
)
from capacity_launcher.service.launch.room import reservations_full, wait_for_capacity
from capacity_launcher.service.launch.send import complete_left
from capacity_launcher.service.launch.settle import reject_all, settle_all
from capacity_launcher.service.launch.wait import wait_or_go
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.resolution import Prepared, resolve_next
from capacity_launcher.service.resolution import (
    resolve as resolve_request,
)


class Launcher:
    def __init__(
        self,
        ports: LaunchPorts,
        *,
        clock: Callable[[], datetime],
        max_attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
        stack: str | None = None,
    ) -> None:
        self._ctx = Context(ports, clock, max_attempts, sleep, stack)

    def prepare(
        self,
        request: LaunchRequest,
        received_at: datetime | None = None,
        origin: Origin | None = None,
    ) -> Prepared:
        """Check the requester against the origin, resolve pool, class and requirements;
        RequestRejected when it can never be served."""
        ctx = self._ctx
        return resolve_request(
            ctx.ports.config,
            request,
            received_at or ctx.clock(),
            origin,
            static_pools=ctx.ports.static_pools,
        )

    def finish_rejected(
        self, request: LaunchRequest, received_at: datetime, rejected: RequestRejected
    ) -> RequestRecord | None:
        """A request its intake rejects on a delivery that may not be its first: what a
        predecessor's intents launched is finished first (`recovery.recover_rejected`)."""
        return recover_rejected(self._ctx, request, received_at, rejected)

    def serve(self, group: Sequence[Prepared], first: Sequence[str] = ()) -> LaunchReport:
        """Launch for a group of compatible requests; returns one record per request. `first`:
        requests known to be on their first delivery (nothing of theirs is stored to look up).

        Each request is looked up in turn, and a predecessor's intents are finished (the
        request's replay visit, and wherever it passes on) before the next request is looked
        up: a coalesced intent the first partner's replay completes is done, not pending, for
        the next partner, which then takes its share instead of sending it again."""
        report = LaunchReport(records={})
        fresh: list[Progress] = []
        for prepared in group:
            replays = recover(self._ctx, prepared, prepared.request.request_id in first, report)
            if isinstance(replays, Visit):
                self._run(replays, report)
            else:
                fresh += replays
        if fresh:
            self._run(Visit(fresh), report)
        return report

    def _run(self, visit: Visit, report: LaunchReport) -> None:
        """A visit, then the visits of the pools it passes requests on to, until none is left."""
        visits = deque([visit])
        while visits:
            passed_on = self._visit_or_give_back(visits.popleft(), report)
            visits.extend(Visit(items) for items in _by_pool(passed_on))

    def _visit_or_give_back(self, visit: Visit, report: LaunchReport) -> list[Progress]:
        """`_visit`; then the leases earlier deliveries left in the pool for requests that leave
        it without taking them up are given back (`give_back_earlier`); on any exception, the
        leases of requests no intent names."""
        arrived = list(visit.progress)
        try:
            passed = self._visit(visit, report)
        except BaseException:
            for item in visit.progress:
                if item.granted and not item.settled and not item.launching:
                    give_back_lease(self._ctx, item)
            raise
        give_back_earlier(self._ctx, arrived, visit.intents)
        return passed

    def _visit(self, visit: Visit, report: LaunchReport) -> list[Progress]:
        """One pool's phases for a visit's requests; returns those passed on to the next pool.
        A visit that finishes a predecessor's intents is recovery's (`_replay_visit`)."""
        if visit.intents:
            return self._replay_visit(visit, report)
        view = read_pool(self._ctx, visit.progress[0].prepared, visit.progress, report)
        if isinstance(view, Refusal):
            return self._refuse(visit.progress, report, view)
        progress, passed = self._before_lease(visit, view, report)
        if not progress:
            return passed
        visit.progress = progress
        view = replace(view, lead=progress[0].prepared)  # the same pool; its own minCount
        refusal = screen(self._ctx, view)
        if refusal is not None:
            return [*passed, *self._refuse(progress, report, refusal, view.candidates)]
        return [*passed, *self._launch(visit, view, report)]

    def _replay_visit(self, visit: Visit, report: LaunchReport) -> list[Progress]:
        """Recovery's visit: a predecessor's intents are finished in their pool, under their
        lease, before anything else is decided; no wait, ICE entry or snapshot is consulted (one
        may have launched: the cache says nothing of that, and a wait would leave it for a
        delivery that launches afresh). A pool that refuses now keeps what the intents launched
        here (`replay.finish_refused`); its refusal answers the rest."""
        ctx = self._ctx
        view = read_pool(ctx, visit.progress[0].prepared, visit.progress, report)
        refusal = view if isinstance(view, Refusal) else screen(ctx, view)
        if refusal is None:
            assert not isinstance(view, Refusal)
            return self._launch(visit, view, report)
        candidates = None if isinstance(view, Refusal) else view.candidates
        rest = finish_refused(ctx, visit, refusal.error, candidates, report)
        for item in rest:  # nothing runs under their leases
            give_back_lease(ctx, item)
        return self._refuse(rest, report, refusal, candidates)

    def _before_lease(
        self, visit: Visit, view: PoolView, report: LaunchReport
    ) -> tuple[list[Progress], list[Progress]]:
        """Those that go on to the screen and the lease here, and those passed on before: a
        request waits for scheduled capacity, or goes on to the next pool when the ICE cache or
        the reservations' snapshots leave it nothing here."""
        ctx = self._ctx
        progress = wait_or_go(ctx, visit.progress, report, view)
        passed: list[Progress] = []
        why = nothing_left(view) if progress else None
        if why is not None:
            progress, passed = pass_on(ctx, progress, why)
            progress = wait_for_capacity(ctx, progress, report, why, view.skipped)
        progress, too_small = self._held_elsewhere(view, progress)
        progress = [
            going
            for item in progress
            for going in wait_for_capacity(ctx, [item], report, reservations_full(view, item), [])
        ]
        return progress, [*passed, *too_small]

    def _held_elsewhere(
        self, view: PoolView, progress: Sequence[Progress]
    ) -> tuple[list[Progress], list[Progress]]:
        """Requests the pool cannot hold now, as its snapshots show, go on to the next pool
        before anything is leased or launched here (a gang launched short of its minCount would
        only be rolled back); returns those that stay and those that go on."""
        stay: list[Progress] = []
        passed: list[Progress] = []
        for item in progress:
            why = cannot_hold(view, item)
            kept, following = pass_on(self._ctx, [item], why) if why else ([item], [])
            stay += kept
            passed += following
        return stay, passed

    def _launch(self, visit: Visit, view: PoolView, report: LaunchReport) -> list[Progress]:
        """Lease, replay, launch and settle; returns the requests passed on (the limits'
        answer here, or resolved again on the stored documents)."""
        ctx = self._ctx
        run, passed = self._lease(visit, view, report)
        view = covered(view, run.active)  # no CreateFleet offers a type a lease did not cover
        missing = words.missing_reservations(view.lead, view.sources)
        for item in run.active:
            item.errors += [e for e in missing if e not in item.errors]
        try:
            replay(ctx, run, visit.intents, view.pool_name, report)
            refusals = launch(ctx, run, view, report)
            reservations = words.reservations_by_id(view.sources)
            settle_all(
                ctx,
                run,
                report,
                view.skipped,
                view.candidates,
                reservations,
                refusals,
                view.lead.node_class,
            )
        finally:
            complete_left(ctx, run.progress)  # answers no settle carried (an exception's too)
        return passed

    def _lease(
        self, visit: Visit, view: PoolView, report: LaunchReport
    ) -> tuple[Run, list[Progress]]:
        """The lease phase: the run of those that launch here (or take what their replayed
        intents launched), and those passed on: at the limits, or changed (resolved again)."""
        ctx = self._ctx
        replayed = {request_id for intent in visit.intents for request_id in intent.request_ids}
        progress = visit.progress
        full = lease_all(ctx, progress, view, replayed)
        changed = [p for p in progress if p.state is Phase.CHANGED]
        progress = [p for p in progress if p.state is not Phase.CHANGED]
        passed = self._resolve_again(changed, replayed, report)
        if full:
            stay, following = pass_on(ctx, full)
            passed += following
            progress = [p for p in progress if p not in full or p in stay]
        run = Run(progress, active(progress, replayed), replaying=bool(visit.intents))
        run.attempts = max((item.attempts for item in progress), default=0)
        return run, passed

    def _resolve_again(
        self, changed: Sequence[Progress], replayed: Collection[str], report: LaunchReport
    ) -> list[Progress]:
        """Requests whose pool or class was applied since this container read them, resolved
        on the stored documents (wherever they resolve now; rejected if they no longer can).
        A request that replays intents, or that changed twice, goes back to the queue instead:
        its next delivery reads the stored documents and replays from its intents."""
        if not changed:
            return []
        config = self._ctx.ports.config
        config.forget()
        again: list[Progress] = []
        for item in changed:
            if item.changes > 1 or item.request_id in replayed:
                raise Transient("NodePool", "ChangedWhileLeasing")
            try:
                prepared = resolve_request(config, item.request, item.prepared.received_at)
            except RequestRejected as rejected:
                error = ErrorDetail(code=rejected.code, message=rejected.reason)
                reject_all(self._ctx, [item], report, error)
                continue
            errors = _notes_kept(item.errors, prepared)
            again.append(
                # Its lease phase is to come, wherever it resolves now.
                replace(item, prepared=prepared, errors=errors, before=item.trail[:-1], here=[])
            )
        return again

    def _refuse(
        self,
        progress: Sequence[Progress],
        report: LaunchReport,
        refusal: Refusal,
        candidates: Candidates | None = None,
    ) -> list[Progress]:
        """The pool's refusal: those another pool may serve go on, the rest end with it (but
        those that chose it from a listing a pool was applied to or deleted from since are
        resolved again: no lease was written to find that)."""
        stay, passed = list(progress), list[Progress]()
        if refusal.pass_on:
            why = refusal.error.message
            stay, passed = pass_on(self._ctx, progress, why)
        listed = self._listed_before(stay)
        passed += self._resolve_again(listed, (), report)
        again = {item.request_id for item in listed}
        stay = [item for item in stay if item.request_id not in again]
        reject_all(self._ctx, stay, report, refusal.error, refusal.status)
        return passed

    def _listed_before(self, items: Sequence[Progress]) -> list[Progress]:
        """Those that named no pool and chose this one from a listing older than the pools
        stored now (one read, only when there are such requests)."""
        chose = [item for item in items if item.prepared.pools_generation is not None]
        if not chose:
            return []
        stored = self._ctx.ports.config.pool_set(fresh=True).generation
        return [item for item in chose if item.prepared.pools_generation != stored]


def pass_on(
    ctx: Context, items: Sequence[Progress], why: str | None = None
) -> tuple[list[Progress], list[Progress]]:
    """Requests that named no pool go on to the next compatible one by weight, as Karpenter
    does: returns those that stay (a request that named this pool, coalesced with them, or the
    last compatible pool's), whose answer is this pool's, and those that go on. Nothing was
    launched for them in this pool, and nothing they go on from holds its limits (a lease an
    earlier delivery took here is given back as the visit ends: `give_back_earlier`). `why`:
    this pool's answer to all; without it, each one's last error (its limits or its quota)."""
    stay: list[Progress] = []
    following: list[Progress] = []
    for item in items:
        nxt, skipped = resolve_next(ctx.ports.config, item.prepared)
        if nxt is None:
            stay.append(item)
            continue
        note = ErrorDetail(
            code=POOL_PASSED_OVER,
            message=f"nodePool {item.pool_name}: {why or item.errors[-1].message}",
        )
        notes = [ErrorDetail(code=POOL_PASSED_OVER, message=m) for m in skipped]
        # Once each: a request resolved again in this delivery comes past the same pools again.
        errors = list(dict.fromkeys([*item.passed_over(), note, *notes]))
        following.append(_next_pool(item, nxt, errors))
    return stay, following


def give_back_earlier(
    ctx: Context, arrived: Sequence[Progress], intents: Sequence[LaunchIntent]
) -> None:
    """Give back the leases earlier deliveries took in a visit's pool for the requests that
    leave it without their lease phase here taking them up: ended before it (refused, rejected
    when resolved again, failed at their wait's deadline), waiting, passed on, resolved again
    into another pool, or finding their pool applied or deleted since they were resolved. Such
    a delivery was killed before any intent named the request, so nothing was launched under
    it; kept, it would hold the pool's limits (and its quota) for nobody until it expired
    (LIMIT_LEASE_SECONDS). One place for every way out of a visit, so a new one cannot forget.
    A first delivery has nothing stored, so nothing is read for it; a request intents name
    finishes them under its lease (the replay settles it)."""
    named = {request_id for intent in intents for request_id in intent.request_ids}
    for item in arrived:
        if not item.first and not item.lease_read and item.request_id not in named:
            give_back_lease(ctx, item)


def give_back_lease(ctx: Context, item: Progress) -> None:
    """Give back the request's lease in its pool; a failure is logged (the lease then expires
    and the sync reclaims it)."""
    try:
        ctx.ports.leases.cancel(item.pool_name, item.request_id)
    except Exception:
        logger.exception("lease not given back", extra={"requestId": item.request_id})


def _next_pool(item: Progress, nxt: Prepared, errors: list[ErrorDetail]) -> Progress:
    """The request as the next pool takes it: an earlier delivery's wait goes with it (past
    its deadline every pool ends it Failed, not only the first: docs/contracts.md, Waiting for
    scheduled capacity), and so do its quota refusal, its trail (whether this delivery bound its
    body, whether it was resolved again already: once per delivery, whichever pool) and the
    attempt numbers its intents used; what was this pool's (a lease, the record's cut of the
    candidates) does not."""
    item.mark_passed_on()
    return item.arriving(
        nxt,
        errors,
        waited=item.waited,
        reclaim=item.reclaim,
        attempts=item.attempts,
        awaits=list(item.awaits),
    )


def _notes_kept(errors: Sequence[ErrorDetail], prepared: Prepared) -> list[ErrorDetail]:
    """The errors a request resolved again keeps: not the notes of pools it may now come to
    (one that passes it over again notes it again; one that serves it now did not pass it
    over on its way there)."""
    ahead = {pool.metadata.name for pool in (prepared.pool, *prepared.alternatives)}
    return [e for e in errors if e.code != POOL_PASSED_OVER or _noted_pool(e) not in ahead]


def _noted_pool(note: ErrorDetail) -> str:
    """The pool a passed-over note names (`nodePool NAME: why`)."""
    return note.message.split(":", 1)[0].removeprefix("nodePool ")


def _by_pool(items: Sequence[Progress]) -> list[list[Progress]]:
    groups: dict[str, list[Progress]] = {}
    for item in items:
        groups.setdefault(item.pool_name, []).append(item)
    return list(groups.values())
