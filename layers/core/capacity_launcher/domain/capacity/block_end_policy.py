"""`spec.capacityBlockEnd` of a static NodePool: what the sync does before a Capacity Block
holding the pool's instances ends (the choice itself: domain/capacity/block_ends.py;
docs/static-capacity.md). Hub only: Karpenter has no equivalent."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from capacity_launcher.domain.apis.config_base import Document

EVACUATE = "Evacuate"
EXTEND = "Extend"
NONE = "None"
# EC2's extension durations: 1-day steps up to 14 days, 7-day steps up to 182 days in all.
DAILY_STEPS_UP_TO_HOURS = 336
WEEKLY_STEPS_UP_TO_HOURS = 4368
# The lead: at least what a launch needs before EC2 terminates the block's instances (and EC2
# sells extensions until 1 hour before the end), at most a week.
MIN_LEAD_MINUTES = 60
MAX_LEAD_MINUTES = 7 * 24 * 60


class CapacityBlockEnd(Document):
    """`spec.capacityBlockEnd` of a static NodePool (docs/static-capacity.md)."""

    action: Literal["Evacuate", "Extend", "None"] = Field(
        default="Evacuate",
        description="Evacuate (replacements elsewhere the pool allows, then the block's "
        "instances terminated), Extend (buy an extension within maxExtensionPrice, else "
        "evacuate) or None (EC2 ends them; the pool replaces them after)",
    )
    lead_minutes: StrictInt = Field(
        default=120,
        ge=MIN_LEAD_MINUTES,
        le=MAX_LEAD_MINUTES,
        description="how long before the block's end the sync acts",
    )
    extend_by_hours: StrictInt = Field(
        default=24,
        description="Extend: the extension's length (EC2's steps: 24 to 336 by 24, then by 168 "
        "up to 4368)",
    )
    max_extension_price: Decimal | None = Field(
        default=None,
        gt=0,
        description="Extend (required): the most one extension's upfront fee may be, in its "
        "currency (USD)",
    )

    @field_validator("extend_by_hours")
    @classmethod
    def _ec2_steps(cls, hours: int) -> int:
        daily = 24 <= hours <= DAILY_STEPS_UP_TO_HOURS and hours % 24 == 0
        weekly = DAILY_STEPS_UP_TO_HOURS < hours <= WEEKLY_STEPS_UP_TO_HOURS and hours % 168 == 0
        if not (daily or weekly):
            raise ValueError(
                "must be 24 to 336 hours in 24-hour steps, then 168-hour steps up to 4368 "
                "(EC2's extension durations)"
            )
        return hours

    @model_validator(mode="after")
    def _price_for_extend(self) -> CapacityBlockEnd:
        if self.action == EXTEND and self.max_extension_price is None:
            raise ValueError(
                "action Extend needs maxExtensionPrice (the most an extension may cost): "
                "the service never buys at a price it was not given"
            )
        return self

    @property
    def lead(self) -> timedelta:
        return timedelta(minutes=self.lead_minutes)
