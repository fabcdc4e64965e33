"""A CapacityQuota's and a Cohort's `spec.fairSharing` (Kueue's ClusterQueue and Cohort
`spec.fairSharing`): the weight of its share when waiting requests of one priority are woken
(docs/queueing.md, "Fair sharing"; the share itself: domain/accounting/fair_sharing.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import Field, field_validator

from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, _Document

# fairSharing.weight (Kueue's ClusterQueue spec.fairSharing.weight): a non-negative number, at
# most this, in thousandths at the finest (Kueue divides by the weight's milli-value).
MAX_FAIR_WEIGHT = Decimal(1_000_000)
FAIR_WEIGHT_STEP = Decimal("0.001")


class FairSharing(_Document):
    """How the waiting requests of this quota (of a Cohort: of the quotas below it) share the
    idle quota of its cohort (of its parent) with the others' (docs/queueing.md, "Fair
    sharing"): the larger the weight, the more it may borrow before others go first. 1 by
    default; 0: every other member's requests go first while it borrows."""

    model_config = BUILT_ON_FIRST_USE

    weight: Decimal = Field(default=Decimal(1), ge=0, le=MAX_FAIR_WEIGHT, allow_inf_nan=False)

    @field_validator("weight", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
            raise ValueError('must be a number (1, 0.5, "3")')
        return value

    @field_validator("weight")
    @classmethod
    def _step(cls, value: Decimal) -> Decimal:
        if value % FAIR_WEIGHT_STEP:
            raise ValueError("is finer than a thousandth (0.001)")
        return value
