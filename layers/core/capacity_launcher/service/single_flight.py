"""Single flight on the shared ICE cache, as a loop over the cache port: sort the attempt's
offerings by what the container knows (domain/capacity/single_flight.py: a healthy offering is
asked about without a claim), claim the ones with evidence in one write, and when every offering
left is claimed elsewhere, read those claims until they end and decide again.

The adapter (adapters/unavailable_offerings.py) reads and writes; this module decides when to
claim, wait and stop.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from capacity_launcher.domain.capacity import single_flight
from capacity_launcher.domain.capacity.offerings import Turn
from capacity_launcher.domain.capacity.single_flight import BEING_TRIED, MAX_CLAIM_ROUNDS
from capacity_launcher.domain.errors import Transient
from capacity_launcher.service.ports import UnavailableCache


def take_turn(
    cache: UnavailableCache,
    keys: Sequence[str],
    *,
    clock: Callable[[], float],
    pause: Callable[[float], None],
) -> Turn:
    """What one launch attempt may ask EC2 about: the offerings it claimed (`mine`), those it may
    ask about without a claim (`free`), and those found dry (`unavailable`). When every offering
    with no answer yet is claimed elsewhere, wait until those claims end (an ICE entry, cleared,
    or expired), then decide again; Transient after MAX_CLAIM_ROUNDS rounds."""
    token = uuid.uuid4().hex
    free: set[str] = set()
    unavailable: dict[str, str] = {}
    expired: frozenset[str] = frozenset()  # claims that expired while awaited: claimed again
    left = list(dict.fromkeys(keys))
    for _ in range(MAX_CLAIM_ROUNDS):
        sorted_out = single_flight.triage(left, cache.evidence(), expired)
        free |= sorted_out.free
        unavailable |= sorted_out.unavailable
        claimed = cache.take_turn(sorted_out.to_claim, token) if sorted_out.to_claim else None
        mine = claimed.mine if claimed is not None else frozenset()
        elsewhere = dict(sorted_out.awaited)
        if claimed is not None:
            free |= claimed.free
            unavailable |= claimed.unavailable
            elsewhere |= claimed.elsewhere
        if mine or free or not elsewhere:
            return Turn(token, mine, frozenset(free), unavailable)
        outcomes = _await(cache, elsewhere, clock=clock, pause=pause)
        free |= single_flight.ended_free(outcomes)
        unavailable |= single_flight.ended_dry(outcomes)
        if free:
            return Turn(token, frozenset(), frozenset(free), unavailable)
        expired = single_flight.ended_expired(outcomes)
        left = single_flight.undecided(left, unavailable, free)
    raise Transient("TransactWriteItems", BEING_TRIED)


def _await(
    cache: UnavailableCache,
    claims: Mapping[str, float],
    *,
    clock: Callable[[], float],
    pause: Callable[[float], None],
) -> dict[str, str | None]:
    """Read the claimed offerings until none is claimed any more or their claims' time is up:
    key -> how each ended (single_flight.outcome)."""
    deadline = max(claims.values())
    outcomes: dict[str, str | None] = dict.fromkeys(claims, BEING_TRIED)
    for delay in single_flight.poll_delays(cache.claim_seconds):
        pause(delay)
        now = clock()
        read = cache.standing(list(claims))
        outcomes = {k: single_flight.outcome(read.get(k), now) for k in claims}
        if not single_flight.still_waiting(outcomes) or now > deadline:
            break
    return outcomes
