"""Claims on requestIds (idempotency), kept with Powertools' DynamoDB persistence layer.

The one place that knows Powertools' idempotency records: their statuses and exceptions become
the closed set of `domain.claims.ClaimState`. A claim is the record `save_inprogress` writes
(held until the invocation's deadline); `release` deletes the record so that the next delivery
can claim again. A claim is never marked done: the request's final record is its completion
(issue 38: one write fewer per request), which intake reads when it finds a claim held. A claim
a revision before that completed (COMPLETED, with its outcome) is still answered as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from capacity_launcher.domain.records.claims import Claim, ClaimState
from capacity_launcher.observability import logger

# The status of a Powertools idempotency record whose request finished.
_COMPLETED = "COMPLETED"


class RequestClaims:
    def __init__(self, persistence: BasePersistenceLayer) -> None:
        self._persistence = persistence

    def claim(self, payload: Mapping[str, Any], remaining_ms: int | None = None) -> Claim:
        """Claim the request `payload` carries (keyed by its requestId); never raises."""
        try:
            self._persistence.save_inprogress(dict(payload), remaining_ms)
            return Claim(ClaimState.CLAIMED)
        except IdempotencyItemAlreadyExistsError as exists:
            try:
                record = exists.old_data_record or self._persistence.get_record(dict(payload))
            except IdempotencyItemNotFoundError:
                # The claim that refused ours is gone already: try again on the next delivery.
                return Claim(ClaimState.UNDECIDED)
        except Exception:
            # One message's claim failing (throttling, a fault) must not fail the whole batch.
            logger.exception(
                "could not claim the request", extra={"requestId": payload.get("requestId")}
            )
            return Claim(ClaimState.UNDECIDED)
        if record is not None and record.status == _COMPLETED:
            return Claim(ClaimState.COMPLETED, record.response_json_as_dict() or {})
        held = None if record is None else record.in_progress_expiry_timestamp
        return Claim(ClaimState.IN_PROGRESS, held_until_ms=held)

    def release(self, payload: Mapping[str, Any]) -> None:
        """Let go of the claim without an outcome: the next delivery claims and serves again."""
        self._persistence.delete_record(dict(payload), RuntimeError("released for retry"))
