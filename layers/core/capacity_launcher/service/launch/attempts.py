"""Plan attempts, claim reservation slots, send, absorb: the launch loop of one visit.

A `LaunchPlan` hands out attempts in launch order (reserved first, docs/placement.md) and
learns from each. Before a CreateFleet aimed at one reservation its slots are claimed in the
shared snapshot, in the transaction that writes its intent (claim.py); before one over
on-demand or spot offerings each offering is claimed in the ICE table (single flight).
Throttling and transient faults are retried in-process, keeping what launched, a few times;
then the request goes back to the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from capacity_launcher.domain.aws_errors import ErrorKind, classify, retryable_error
from capacity_launcher.domain.backoff import IN_PROCESS_RETRIES, in_process_delay
from capacity_launcher.domain.capacity.fleet import FleetResult
from capacity_launcher.domain.capacity.offerings import RESERVED, Offering, Turn, offering_key
from capacity_launcher.domain.capacity.planning import Landed, LaunchAttempt, LaunchPlan
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.status import ErrorDetail
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.claim import write_attempt
from capacity_launcher.service.launch.progress import (
    RESERVATION_FULL,
    Context,
    LaunchReport,
    PoolView,
    Run,
)
from capacity_launcher.service.launch.roll_back import roll_back_zone
from capacity_launcher.service.launch.send import (
    Absorbed,
    Sent,
    absorb,
    completion,
    deferring,
    offered_only,
    send,
    take_turn,
)


class Step(Enum):
    """What the loop does after one attempt."""

    NEXT = "next"  # ask the plan for the next attempt
    STOP = "stop"  # no attempt can succeed now


@dataclass
class _Loop:
    """What the loop counts across attempts."""

    plan: LaunchPlan
    tried_reserved: bool = False
    transient_retries: int = 0

    def note_capacity_type(self, attempt: LaunchAttempt, report: LaunchReport) -> None:
        """An on-demand or spot attempt after a reserved one is a fallback to on-demand."""
        if attempt.capacity_type == RESERVED:
            self.tried_reserved = True
        elif self.tried_reserved:
            report.fallbacks_to_on_demand += 1


def launch(ctx: Context, run: Run, view: PoolView, report: LaunchReport) -> list[str]:
    """Attempts until the run's requests have what they were granted, or nothing is left to
    try; returns the plan's minValues refusals."""
    min_count = sum(min(p.request.min_count, p.wanted) for p in run.active)
    loop = _Loop(plan(ctx, view, run.wanted, min_count))
    while run.active and run.wanted > 0:
        attempt = loop.plan.next_attempt()
        if attempt is None and loop.plan.zone_short and not run.replaying:
            # The zone cannot complete the gang: take back what landed there, try the next.
            run.seen = roll_back_zone(ctx, run.active, run.seen)
            loop.plan.abandon_zone()
            continue
        if attempt is None or _attempt(ctx, run, view, loop, attempt, report) is Step.STOP:
            break
    return list(loop.plan.refusals)


def plan(ctx: Context, view: PoolView, wanted: int, min_count: int) -> LaunchPlan:
    """The visit's plan over the pool's usable candidates: the one the launch follows and
    `submit --dry-run` (service/preview.py) shows."""
    lead = view.lead
    return LaunchPlan(
        view.usable,
        wanted,
        single_zone=lead.request.single_zone,
        max_attempts=ctx.max_attempts,
        requirements=lead.requirements,
        min_count=min_count,
    )


def _attempt(
    ctx: Context,
    run: Run,
    view: PoolView,
    loop: _Loop,
    attempt: LaunchAttempt,
    report: LaunchReport,
) -> Step:
    loop.note_capacity_type(attempt, report)
    attempt = offered_only(attempt, view, run.active)
    turn, cached = take_turn(ctx, attempt)
    run.observed += [words.unavailable(o, cached[o]) for o in cached]
    asked = _allowed(attempt, turn)
    if asked is None:
        loop.plan.record(attempt, [], cached)  # another worker's attempt found them dry
        return Step.NEXT
    try:
        written = write_attempt(ctx, asked, run.attempts + 1, run, view)
    except BaseException as stopped:
        if turn is not None:
            _end_turn(ctx, turn, asked, Absorbed())
        if not isinstance(stopped, LaunchFailed):
            raise
        # The NodeClass names something AWS refuses for good: no attempt can succeed.
        error = ErrorDetail(code=stopped.code, message=stopped.message)
        for item in run.active:
            item.errors.append(error)
        return Step.STOP
    if written is None:
        # Other workers hold its reservation's last slots: known without asking EC2.
        run.observed += [words.unavailable(o, RESERVATION_FULL) for o in asked.offerings]
        loop.plan.record(asked, [], [])
        return Step.NEXT
    attempt, intent = written
    run.attempts += 1
    sent = _send(ctx, run, attempt, intent, turn, report)
    result, absorbed = sent
    return _learn(ctx, run, loop, (attempt, result, absorbed), [*absorbed.dry, *cached], report)


def _allowed(attempt: LaunchAttempt, turn: Turn | None) -> LaunchAttempt | None:
    """The attempt over the offerings its turn allows it to ask about; None for none."""
    if turn is None:
        return attempt
    if not turn.allowed:
        return None
    return replace(attempt, offerings=tuple(o for o in attempt.offerings if o.key in turn.allowed))


def _send(
    ctx: Context,
    run: Run,
    attempt: LaunchAttempt,
    intent: LaunchIntent,
    turn: Turn | None,
    report: LaunchReport,
) -> tuple[FleetResult, Absorbed]:
    """CreateFleet of the written intent, and absorb; the turn ends whichever way it goes. The
    slots the intent claimed go back with its answer (`IntentCompletion.slots_back`), or, when
    its CreateFleet raised (its answer unknown), at once with its claim let go: a replay of it
    then notes the slots its instances took, as one of an intent that claimed none."""
    absorbed = Absorbed()
    try:
        owner = deferring(intent, attempt, run.active)
        try:
            result = send(ctx, intent, report, complete=owner is None)
        except Exception:
            ctx.ports.records.release_claim(intent)  # not on a crash: nothing runs after one
            raise
        if owner is not None:
            owner.completions.append(completion(intent, result))  # its lease settle carries it
        sent = Sent(intent, result, attempt, deferred=owner is not None)
        absorbed = absorb(ctx, sent, run.active, report, run.own_fills)
        run.observed += absorbed.unavailable
    finally:
        if turn is not None:
            _end_turn(ctx, turn, attempt, absorbed)
    return result, absorbed


def _end_turn(ctx: Context, turn: Turn, attempt: LaunchAttempt, absorbed: Absorbed) -> None:
    ctx.ports.unavailable.end_turn(
        turn,
        launched={
            offering_key(attempt.capacity_type, x.instance_type, x.zone) for x in absorbed.landings
        },
        dry={o.key for o in absorbed.dry},
    )


def _learn(
    ctx: Context,
    run: Run,
    loop: _Loop,
    answered: tuple[LaunchAttempt, FleetResult, Absorbed],
    dry: list[Offering],
    report: LaunchReport,
) -> Step:
    """What the plan learns from one CreateFleet (`dry`: what EC2 and the cache said was dry);
    throttling and faults are asked again."""
    attempt, result, absorbed = answered
    run.seen += absorbed.landings
    run.own_fills.landings += absorbed.landings
    landed = [Landed(x.instance_type, x.zone) for x in absorbed.landings]
    retryable = [e for e in result.errors if classify(e.code).retryable]
    if retryable and run.wanted > 0:
        # Throttled or faulty overrides (what launched is kept): ask for the rest again.
        if loop.transient_retries >= IN_PROCESS_RETRIES:
            code = retryable[0].code
            raise retryable_error("CreateFleet", code, classify(code))
        loop.transient_retries += 1
        ctx.sleep(in_process_delay(loop.transient_retries))
        loop.plan.again(attempt, landed, dry)
        return Step.NEXT
    loop.plan.record(attempt, landed, dry)
    for offering in absorbed.dry:
        report.wrote(offering.capacity_type)
    return Step.NEXT if not _fatal(attempt, result) else Step.STOP


def _fatal(attempt: LaunchAttempt, result: FleetResult) -> bool:
    """Nothing launched, and an error no other attempt can help with. A reserved attempt's
    refusal may be its reservation's alone (cancelled, expired or gone since the snapshots
    were read, or not matching): the plan goes on to the next target, or on-demand, which
    meet a fault of the NodeClass's (an image EC2 does not have) too and end the request then."""
    return (
        attempt.capacity_type != RESERVED
        and not result.instance_ids
        and any(classify(e.code) is ErrorKind.FATAL for e in result.errors)
    )
