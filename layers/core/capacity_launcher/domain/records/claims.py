"""A delivery's claim on its requestId (idempotency): the closed set of what a claim can find.

The launcher claims each request before serving it (adapters/request_claims.py keeps the claims,
with Powertools' DynamoDB persistence layer). What the claim finds decides what the delivery
does: serve it, re-publish the recorded outcome, or go back to the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ClaimState(Enum):
    """What a delivery's claim on its requestId found."""

    # This delivery holds the claim now: it serves the request, then completes or releases it.
    CLAIMED = "claimed"
    # The request finished within the idempotency window: its recorded outcome comes with it.
    COMPLETED = "completed"
    # Another delivery holds the claim and is serving the request now.
    IN_PROGRESS = "in_progress"
    # The claim could not be decided now (a fault, or the claim that refused this one ended
    # meanwhile): the delivery goes back to the queue and claims again.
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    # COMPLETED only: the finished request's record, as its event's detail.
    outcome: Mapping[str, Any] = field(default_factory=dict)
    # IN_PROGRESS only: when the other delivery's claim lapses (epoch ms; None: not known, or
    # only when the idempotency record itself expires).
    held_until_ms: int | None = None
