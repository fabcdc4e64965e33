"""An attempt's launch intent written before its CreateFleet, and, for one aimed at one
reservation, its slots claimed in the reservation's shared snapshot in the same transaction.

The intent records the slots it claimed (`LaunchIntent.claimed`): a replay of a pending intent
(its worker died after writing it) claims none again and gives back, once, those its instances
did not take (with the write that marks it done); so its answer may ride its request's lease
settle as an on-demand one does (issue 38: no UpdateItem for the claim, none for the answer).
"""

from __future__ import annotations

from dataclasses import replace

from capacity_launcher.domain.capacity.planning import LaunchAttempt
from capacity_launcher.domain.errors import ConditionFailed, Transient
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.service.launch.progress import Context, PoolView, Run
from capacity_launcher.service.launch.send import compose, mark_launching


def write_attempt(
    ctx: Context, attempt: LaunchAttempt, number: int, run: Run, view: PoolView
) -> tuple[LaunchAttempt, LaunchIntent] | None:
    """The attempt (cut to the slots claimed for it) and its intent, written; None when other
    workers hold its reservation's last slots (known without asking EC2). LaunchFailed when its
    launch template cannot be made (nothing written)."""
    target = attempt.target.reservation_id if attempt.target is not None else None
    if target is None:
        return _written(ctx, run, attempt, compose(ctx, attempt, number, run.active, view))
    made: list[tuple[LaunchAttempt, LaunchIntent]] = []

    def take(count: int) -> bool:
        cut = replace(attempt, count=min(attempt.count, count))
        intent = replace(compose(ctx, cut, number, run.active, view), claimed=count)
        try:
            made.append(_written(ctx, run, cut, intent))
        except ConditionFailed:
            return False  # the snapshot has not `count` slots claimable: nothing was written
        return True

    granted = ctx.ports.reservations.claim(target, attempt.count, take)
    if granted == 0:
        return None
    if granted is None:
        # No snapshot to claim against: EC2 is asked directly, the intent claims nothing.
        return _written(ctx, run, attempt, compose(ctx, attempt, number, run.active, view))
    return made[-1]


def _written(
    ctx: Context, run: Run, attempt: LaunchAttempt, intent: LaunchIntent
) -> tuple[LaunchAttempt, LaunchIntent]:
    """The intent written (with the slots it claims), its requests launching first (an intent
    names them: their leases outlive an exception). One that exists already and claims slots
    cannot be written over: the request goes back, and its redelivery replays the one stored."""
    mark_launching(run.progress, intent)
    if not ctx.ports.records.write_intent(intent) and intent.claimed:
        raise Transient("WriteIntent", "IntentExists")
    return attempt, intent
