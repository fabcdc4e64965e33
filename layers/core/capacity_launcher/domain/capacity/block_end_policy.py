"""`spec.capacityBlockEnd` of a NodePool, and `capacityBlockEnd` of a launch request that opts
in: what the sync does before a Capacity Block holding the pool's (or the request's) instances
ends (the choice itself: domain/capacity/block_ends.py and request_block_ends.py;
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
    """`spec.capacityBlockEnd` of a NodePool: what the sync does for a static pool's instances;
    on a dynamic pool, what its launch requests may opt in to (docs/static-capacity.md)."""

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


# Set by a NodePool's `spec.capacityBlockEnd` only: a requester never chooses a price or a length.
POOL_ONLY_FIELDS = ("maxExtensionPrice", "extendByHours")


class RequestBlockEnd(Document):
    """`capacityBlockEnd` of a launch request: its opt-in to have its instances in a Capacity
    Block replaced (Evacuate) or the block extended (Extend) before the block ends, as far as
    its NodePool's `spec.capacityBlockEnd` allows (`for_request`; docs/static-capacity.md)."""

    action: Literal["Evacuate", "Extend"] = Field(
        default="Evacuate",
        description="Evacuate (a replacement launch elsewhere the pool allows, then the block's "
        "instances terminated) or Extend (an extension bought within the NodePool's "
        "maxExtensionPrice, else evacuate)",
    )
    lead_minutes: StrictInt | None = Field(
        default=None,
        ge=MIN_LEAD_MINUTES,
        le=MAX_LEAD_MINUTES,
        description="how long before the block's end the sync acts (default: the NodePool's, "
        "else 120)",
    )

    @model_validator(mode="before")
    @classmethod
    def _pool_only(cls, data: object) -> object:
        if isinstance(data, dict):
            named = [f for f in POOL_ONLY_FIELDS if f in data]
            if named:
                raise ValueError(
                    f"{', '.join(named)} cannot be set by a requester: an extension's length "
                    "and price come from the NodePool's spec.capacityBlockEnd"
                )
        return data


def request_refusal(pool: CapacityBlockEnd | None, ask: RequestBlockEnd) -> str | None:
    """Why a NodePool with `pool` as its `capacityBlockEnd` refuses a request's `ask` (the rule
    broken, naming the field), or None. A pool without one lets requests evacuate; `None`
    lets them do nothing; `Evacuate` only evacuate; `Extend` evacuate or extend (within its
    price: the service never buys at a price a requester named)."""
    if pool is not None and pool.action == NONE:
        return (
            "capacityBlockEnd: the NodePool's spec.capacityBlockEnd.action is None: its "
            "requests cannot opt in to evacuation or extension"
        )
    if ask.action == EXTEND and (pool is None or pool.action != EXTEND):
        return (
            "capacityBlockEnd.action: Extend needs the NodePool's spec.capacityBlockEnd.action "
            "to be Extend (its maxExtensionPrice bounds what is bought); ask Evacuate"
        )
    return None


def for_request(pool: CapacityBlockEnd | None, ask: RequestBlockEnd) -> CapacityBlockEnd | None:
    """The policy a request's instances follow: its action and lead, the NodePool's length and
    price; None when the pool (as it is now) refuses the ask: the request then gets what one
    that did not opt in gets (the `Capacity Block Expiring` event)."""
    if request_refusal(pool, ask) is not None:
        return None
    lead = ask.lead_minutes or (pool.lead_minutes if pool is not None else 120)
    if ask.action == EVACUATE:
        return CapacityBlockEnd(action=EVACUATE, lead_minutes=lead)
    assert pool is not None
    return pool.model_copy(update={"lead_minutes": lead})
