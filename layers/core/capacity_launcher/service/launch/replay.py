"""Replay: a crashed or throttled predecessor's launch intents, finished before anything new is
sent, in the pool they were made for (README: "A retry replays the intent"). A pending intent is
sent again only under live leases that cover it there; otherwise it is ended unsent, with the
instances EC2 has for it if its call did reach EC2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.offerings import RESERVED
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.status import ErrorDetail
from capacity_launcher.domain.records.tags import NODE_POOL, REQUEST_ID
from capacity_launcher.service.launch.progress import (
    Context,
    LaunchReport,
    Progress,
    Run,
    Visit,
)
from capacity_launcher.service.launch.send import Sent, absorb, mark_launching, send, store
from capacity_launcher.service.launch.settle import (
    settle_all,
)


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
        if intent.capacity_type == RESERVED:
            run.replayed_reserved.update(result.instance_ids)


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
    store(ctx, intent.completion(found, [error]))  # with the claimed slots it did not use
    return replace(intent, state="done", instance_ids=tuple(found), errors=(error,))


@dataclass(frozen=True)
class Unsent:
    """Intents an earlier delivery left, finished in their pool without any being sent again."""

    intents: list[LaunchIntent]

    def launched_for(self, request_id: str) -> list[str]:
        """The instances they launched for `request_id` (its share of each)."""
        return [x for i in self.intents for x in i.split(i.instance_ids).get(request_id, [])]


def finish_unsent(ctx: Context, intents: Sequence[LaunchIntent], why: str) -> Unsent:
    """The one way intents left unsent are finished, in their pool: each pending one is ended
    unsent (`end_unsent`: done, with what EC2 has for it; `why` on it), none is sent again.
    Recovery finishes them so when their pool is gone or refuses the request now
    (`recovery.py`), and a replay visit when its pool refuses it (`finish_refused`)."""
    known = {i for intent in intents for i in intent.instance_ids}
    return Unsent([end_unsent(ctx, intent, why, known) for intent in intents])


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
    unsure = _coalesced_pending(visit.intents)
    ended = finish_unsent(ctx, visit.intents, f"nodePool {pool}: {refusal.message}: not sent again")
    run = Run(list(visit.progress), list(visit.progress), replaying=True)
    # Every intent is done: each request takes its share.
    replay(ctx, run, ended.intents, pool, report)
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


def _coalesced_pending(intents: Sequence[LaunchIntent]) -> set[str]:
    """The requests of coalesced intents still pending: ended unsent, they may have instances
    not found yet (left to reconciliation), so their requests end in the intents' pool."""
    return {
        request_id
        for intent in intents
        if intent.state == "pending" and len(intent.shares) > 1
        for request_id in intent.request_ids
    }


def _settled_here(ctx: Context, item: Progress, refusal: ErrorDetail) -> None:
    """The request keeps what its intents launched and ends in their pool: its lease, open,
    is settled to them (read once; one an earlier delivery settled stays as it is, and one
    reclaimed since leaves its instances to the sync, which counts them)."""
    found = ctx.ports.leases.lease(item.pool_name, item.request_id)
    if found is not None and found.settled:
        item.mark_settled()
    item.granted = found.count if found is not None and not found.settled else 0
    item.note(refusal)
