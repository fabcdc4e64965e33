"""What a static NodePool does before a Capacity Block holding its instances ends.

EC2 terminates a Capacity Block's instances 30 minutes before its end date
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html). A static pool's
`capacityBlockEnd` (hub only: Karpenter has no equivalent) says what the sync does from
`leadMinutes` before that end, for each block holding some of the pool's instances:

- **Evacuate**: replacements are launched elsewhere the pool allows (never into that block:
  other reservations, on-demand where the pool allows it), and the block's instances are
  terminated only as replacements run (`static_pools.plan`), so the pool's count never drops
  while its pool allows other capacity.
- **Extend**: an extension offering of `extendByHours` is bought when its upfront fee is known
  and within `maxExtensionPrice` (the cheapest such); at most one per block end (the sync notes
  its choice before it buys, and a noted extension is waited on). With none that fits, too late
  to buy (EC2 sells extensions until 1 hour before the end), or the one bought still unpaid
  with half the lead gone, the pool evacuates.
- **None**: nothing beyond what EC2 does (the instances end; the pool replaces them after).

`decide` is the whole choice, pure: the service reads the offerings and buys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.capacity.block_end_policy import (
    EVACUATE,
    EXTEND,
    NONE,
    CapacityBlockEnd,
)
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.reservations import (
    ACTIVE,
    BLOCK_TERMINATION_LEAD,
    ReservationSnapshot,
)
from capacity_launcher.domain.records.status import (
    BLOCK_EVACUATING,
    BLOCK_EXTENSION_PURCHASED,
    Event,
    format_timestamp,
)

# The sync waits on an extension it bought and that is not yet paid until this part of the
# lead is left: then it evacuates (EC2 fails an unpaid extension 35 minutes before the end).
WAIT_SHARE = 0.5
# EC2 sells an extension from 56 days up to 1 hour before the block ends.
LAST_EXTENSION_BEFORE_END = timedelta(hours=1)

# Why the sync did what it did (the event's `reason`).
POLICY_EVACUATE = "PolicyEvacuate"
NO_OFFERING = "NoExtensionOffered"
OVER_PRICE = "NoOfferingWithinPrice"
TOO_LATE = "TooLateToExtend"
EXTENSION_UNPAID = "ExtensionUnpaid"
PURCHASE_FAILED = "ExtensionPurchaseFailed"
WITHIN_PRICE = "OfferingWithinPrice"
EXTENSION_PENDING = "ExtensionPending"


@dataclass(frozen=True)
class Noted:
    """What the sync chose for one block end, kept in the pool's state between minutes."""

    action: str  # EVACUATE or EXTEND
    ends_at: int  # the block's end date (epoch seconds) the choice was for
    reason: str


@dataclass(frozen=True)
class BlockEndDecision:
    """For one ending block this minute: evacuate, buy `offering`, or wait; `new` when the
    choice differs from the one noted (it is then noted and announced)."""

    action: str  # EVACUATE, EXTEND, or NONE (wait / nothing)
    reason: str
    offering: BlockExtensionOffering | None = None
    new: bool = False

    @property
    def evacuating(self) -> bool:
        return self.action == EVACUATE


def due(policy: CapacityBlockEnd | None, block: ReservationSnapshot, now: datetime) -> bool:
    """Whether the pool acts on `block` now: an active Capacity Block within the lead of its end
    (the end date as EC2 says it now: an extension paid moves it)."""
    if policy is None or policy.action == NONE:
        return False
    if not block.kind.ends_early or block.state != ACTIVE or block.end_date is None:
        return False
    return now >= block.end_date - policy.lead


def due_blocks(
    policy: CapacityBlockEnd | None, blocks: Iterable[ReservationSnapshot], now: datetime
) -> list[str]:
    """Every block of `blocks` already due under `policy` (sorted): where a replacement must not
    go, whether it holds the pool's (or the request's) instances or not (blocks bought together
    end together: one landed in a twin would be evacuated again a minute later)."""
    return sorted({b.reservation_id for b in blocks if due(policy, b, now)})


def wants_offerings(
    policy: CapacityBlockEnd, block: ReservationSnapshot, now: datetime, noted: Noted | None
) -> bool:
    """Whether `decide` needs the block's extension offerings this minute (the only EC2 read
    it needs): Extend, nothing noted for this end yet, and still in time to buy."""
    return (
        policy.action == EXTEND
        and _noted_for(block, noted) is None
        and block.end_date is not None
        and now < block.end_date - LAST_EXTENSION_BEFORE_END
    )


def decide(
    policy: CapacityBlockEnd,
    block: ReservationSnapshot,
    now: datetime,
    noted: Noted | None,
    offerings: Sequence[BlockExtensionOffering] | None = (),
) -> BlockEndDecision:
    """What the pool does for `block`, due now (see the module docstring). `noted`: the choice
    kept for this block; `offerings`: what EC2 offers (None: EC2 refused to offer, as it does
    while an extension of the block is payment-pending)."""
    assert block.end_date is not None
    current = _noted_for(block, noted)
    if current is not None and current.action == EVACUATE:
        return BlockEndDecision(EVACUATE, current.reason)
    if current is not None:  # an extension bought for this end, not paid yet
        left = block.end_date - now
        if left > policy.lead * WAIT_SHARE:
            return BlockEndDecision(NONE, EXTENSION_PENDING)
        return BlockEndDecision(EVACUATE, EXTENSION_UNPAID, new=True)
    if policy.action == EVACUATE:
        return BlockEndDecision(EVACUATE, POLICY_EVACUATE, new=True)
    if now >= block.end_date - LAST_EXTENSION_BEFORE_END:
        return BlockEndDecision(EVACUATE, TOO_LATE, new=True)
    if offerings is None:
        return BlockEndDecision(NONE, EXTENSION_PENDING)
    chosen = cheapest_within(offerings, policy.max_extension_price)
    if chosen is not None:
        return BlockEndDecision(EXTEND, WITHIN_PRICE, chosen, new=True)
    return BlockEndDecision(EVACUATE, OVER_PRICE if offerings else NO_OFFERING, new=True)


def cheapest_within(
    offerings: Sequence[BlockExtensionOffering], max_price: Decimal | None
) -> BlockExtensionOffering | None:
    """The cheapest offering whose fee is known and at most `max_price` (none unknown is
    bought: a fee EC2 does not state is never taken for cheap)."""
    if max_price is None:
        return None
    priced = [o for o in offerings if o.upfront_fee is not None and o.upfront_fee <= max_price]
    return min(priced, key=lambda o: (o.upfront_fee, o.offering_id), default=None)


def _noted_for(block: ReservationSnapshot, noted: Noted | None) -> Noted | None:
    """The choice noted for the block's current end (one for an earlier end is stale: the block
    was extended since, and its new end is a new decision)."""
    if noted is None or block.end_date is None:
        return None
    return noted if noted.ends_at == int(block.end_date.timestamp()) else None


def block_end_event(
    pool: str,
    block: ReservationSnapshot,
    decision: BlockEndDecision,
    instances: Sequence[str],
    policy: CapacityBlockEnd,
    extra: Mapping[str, Any] | None = None,
) -> Event:
    """The event saying what the pool did for `block` and why (schemas/block-end-event.json);
    `extra`: for requests that opted in, the requests (domain/capacity/request_block_ends.py)."""
    assert block.end_date is not None
    detail: dict[str, Any] = {
        "nodePool": pool,
        "capacityReservationId": block.reservation_id,
        "instanceType": block.instance_type,
        "zone": block.zone,
        "endDate": format_timestamp(block.end_date),
        "instancesTerminatedAt": format_timestamp(block.end_date - BLOCK_TERMINATION_LEAD),
        "action": decision.action,
        "reason": decision.reason,
        "instances": sorted(instances),
    }
    if policy.max_extension_price is not None:
        detail["maxExtensionPrice"] = str(policy.max_extension_price)
    offering = decision.offering
    if offering is not None:
        detail |= {
            "offeringId": offering.offering_id,
            "extensionEndDate": format_timestamp(offering.ends_at),
            "extensionHours": offering.duration_hours,
            "upfrontFee": None if offering.upfront_fee is None else str(offering.upfront_fee),
            "currencyCode": offering.currency,
        }
    detail |= extra or {}
    detail_type = BLOCK_EXTENSION_PURCHASED if decision.action == EXTEND else BLOCK_EVACUATING
    return Event(detail_type, detail, (block.reservation_id,))
