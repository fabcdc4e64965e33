"""Single flight on the shared ICE cache: which offerings a launch attempt claims before asking
EC2, and what a claim round or a read of other launchers' claims decided.

A claim is bought only where it buys something: an offering with evidence that it may be dry,
or that another launcher is asking EC2 about it right now. A healthy offering (no ICE entry
seen, no claim seen) is asked about without one, so a request over a fleet of 100 healthy
offerings writes no claim (docs/BENCHMARKS.md, "Single flight's own cost"). The evidence:

- an ICE entry that expired within `RECENTLY_DRY_SECONDS` (the offering was dry a moment ago:
  the first worker to ask again claims it, and the others wait for its answer, so a storm of
  workers does not ask EC2 again together every time the entry expires);
- a live claim (another launcher is asking EC2 now: leave the offering to its answer);
- a claim that expired while this launcher waited on it (its claimer died: claimed again).

A live ICE entry makes the offering unavailable; one this container launched in a moment ago is
asked about freely whatever it saw. The loop over rounds is `service/single_flight.py`'s; the
reads and writes are `adapters/unavailable_offerings.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

# The reason a claim item carries: to any reader of the table it is a short-lived entry.
BEING_TRIED = "BeingTried"
# What a read reports for a claim whose lifetime ran out before its claimer ended it.
CLAIM_EXPIRED = "ClaimExpired"
# How long after its ICE entry expired an offering is still claimed before it is asked about: a
# storm of workers meets the expiry within a few seconds of each other (each container's copy of
# the cache is 5 s old at most), so a minute catches it with room to spare, and a recovered
# offering costs a claim for a minute at most.
RECENTLY_DRY_SECONDS = 60
# Reads of claims held elsewhere: short first (a CreateFleet answers in about a second), then 1 s.
CLAIM_POLL_SECONDS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
# Claim rounds before handing the message back (each round ends in a claim, an entry or a wait).
MAX_CLAIM_ROUNDS = 5


@dataclass(frozen=True)
class Standing:
    """An item of the ICE table as read: an ICE entry (`claimed` False) or a claim."""

    reason: str
    expires_at: float
    claimed: bool = False


@dataclass(frozen=True)
class Evidence:
    """What a launcher container knows of offerings' recent past, as of `now` (its last read of
    the table, what it wrote, where it launched): no call is made to know it."""

    now: float
    # ICE entries seen, live or expired lately: key -> the entry.
    entries: Mapping[str, Standing] = field(default_factory=dict)
    # Claims seen, live: key -> until when.
    claims: Mapping[str, float] = field(default_factory=dict)
    # Offerings this container launched in: key -> until when that counts as healthy.
    launched: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Triage:
    """Each offering of an attempt, sorted before any write."""

    unavailable: Mapping[str, str] = field(default_factory=dict)  # a live ICE entry: its reason
    free: frozenset[str] = frozenset()  # asked about without a claim
    awaited: Mapping[str, float] = field(default_factory=dict)  # claimed elsewhere, until when
    to_claim: tuple[str, ...] = ()  # claimed before EC2 is asked (one write for them all)


def triage(keys: Iterable[str], evidence: Evidence, must_claim: Iterable[str] = ()) -> Triage:
    """Sort `keys` by what `evidence` says of each; `must_claim` (claims that expired while this
    launcher waited on them) are claimed whatever it says, unless dry or launched in."""
    now = evidence.now
    forced = set(must_claim)
    unavailable: dict[str, str] = {}
    free: set[str] = set()
    awaited: dict[str, float] = {}
    to_claim: list[str] = []
    for key in dict.fromkeys(keys):
        entry = evidence.entries.get(key)
        if entry is not None and entry.expires_at > now:
            unavailable[key] = entry.reason
        elif evidence.launched.get(key, 0.0) > now:
            free.add(key)
        elif evidence.claims.get(key, 0.0) > now and key not in forced:
            awaited[key] = evidence.claims[key]
        elif key in forced or _recently_dry(entry, now):
            to_claim.append(key)
        else:
            free.add(key)  # no evidence: a healthy offering costs no claim
    return Triage(unavailable, frozenset(free), awaited, tuple(to_claim))


def _recently_dry(entry: Standing | None, now: float) -> bool:
    return entry is not None and entry.expires_at > now - RECENTLY_DRY_SECONDS


def outcome(standing: Standing | None, now: float) -> str | None:
    """What a read of a claimed offering says now: None (the claim ended without an ICE entry:
    ask EC2), BEING_TRIED (still claimed), CLAIM_EXPIRED (its claimer died), or the ICE
    entry's reason (dry)."""
    if standing is None:
        return None
    if standing.expires_at <= now:
        return CLAIM_EXPIRED if standing.claimed else None
    return BEING_TRIED if standing.claimed else standing.reason


def poll_delays(claim_seconds: int) -> Iterator[float]:
    """The pauses between reads of claims held elsewhere: about a claim's lifetime in all."""
    count = len(CLAIM_POLL_SECONDS) + claim_seconds + 1
    for n in range(count):
        yield CLAIM_POLL_SECONDS[min(n, len(CLAIM_POLL_SECONDS) - 1)]


def still_waiting(outcomes: Mapping[str, str | None]) -> bool:
    return BEING_TRIED in outcomes.values()


def ended_dry(outcomes: Mapping[str, str | None]) -> dict[str, str]:
    """The awaited offerings their claimer found dry (key -> reason)."""
    return {
        k: o for k, o in outcomes.items() if o is not None and o not in (BEING_TRIED, CLAIM_EXPIRED)
    }


def ended_free(outcomes: Mapping[str, str | None]) -> frozenset[str]:
    """The awaited offerings whose claim ended without an ICE entry: asked about freely."""
    return frozenset(k for k, o in outcomes.items() if o is None)


def ended_expired(outcomes: Mapping[str, str | None]) -> frozenset[str]:
    return frozenset(k for k, o in outcomes.items() if o == CLAIM_EXPIRED)


def undecided(keys: Sequence[str], *decided: Iterable[str]) -> list[str]:
    done = set().union(*decided)
    return [k for k in keys if k not in done]
