"""Before a Capacity Block ends, for launch requests that opted in (`capacityBlockEnd`).

A request's `capacityBlockEnd` (its action and lead; the length and price of an extension are
its NodePool's: block_end_policy.for_request) is kept on each of its instances' records
(`opt_in`). Each sync minute, for every active Capacity Block holding such instances whose end
is within a request's lead, `plan_block` decides, pure:

- **Evacuate**: one replacement launch per request, through the normal launch path (its own
  request id, `replacement_id`, derived from the original's, the block and its end, so a minute
  run again, or a redelivery, sends the same request and the launcher serves it once), for as
  many instances as the request has in the block, with the original's pool, requester,
  requirements, tags and priority, plus `capacity-reservation-id NotIn [<block>, ...]`: never
  on the ending block, nor on another block already due under the request's policy (blocks
  bought together end together: a replacement landed in one of them would be evacuated again
  at once, a launch wasted). The block's instances are terminated only as the replacement's
  run (`to_terminate`), so the request's count never drops while its pool allows other
  capacity.
- **Extend**: the block's extension is bought once per block end (domain/capacity/block_ends.py
  `decide`, with the pool's price); a request whose extension cannot be bought evacuates.

What was chosen per block end (`BlockEndState`) is noted before anything is sent or bought.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from capacity_launcher.domain.capacity.block_end_policy import (
    EVACUATE,
    EXTEND,
    CapacityBlockEnd,
    RequestBlockEnd,
    for_request,
)
from capacity_launcher.domain.capacity.block_ends import (
    POLICY_EVACUATE,
    BlockEndDecision,
    Noted,
    block_end_event,
    decide,
    due,
    due_blocks,
)
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.requirements import CAPACITY_RESERVATION_ID
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.status import Event

# The replacement's id keeps this much of the original's (REQUEST_ID_PATTERN: 128 at most).
KEPT_ID = 100


def opt_in(request: LaunchRequest) -> dict[str, Any] | None:
    """What an instance's record keeps of a request that opted in: its ask, and what a
    replacement repeats of it besides its pool, requester and tags (the record has those)."""
    ask = request.capacity_block_end
    if ask is None:
        return None
    kept: dict[str, Any] = {"capacityBlockEnd": ask.model_dump(by_alias=True, exclude_none=True)}
    if request.requirements:
        kept["requirements"] = request.to_dict()["requirements"]
    if request.priority_class_name is not None:
        kept["priorityClassName"] = request.priority_class_name
    return kept


@dataclass(frozen=True)
class OptedIn:
    """A request's instances in one block, with what its instance records kept."""

    request_id: str
    node_pool: str
    requester: str | None
    instances: tuple[str, ...]
    kept: Mapping[str, Any]
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def ask(self) -> RequestBlockEnd:
        return RequestBlockEnd.model_validate(self.kept["capacityBlockEnd"])


@dataclass(frozen=True)
class Replacement:
    """The replacement launch sent for one request's instances in an ending block."""

    request_id: str  # the original
    replacement_id: str
    count: int  # the original's instances in the block when it was decided
    body: Mapping[str, Any]


@dataclass(frozen=True)
class BlockEndState:
    """What was chosen for one block end (`ends_at`): the extension noted, the replacements
    sent; stored between minutes (conditioned on `version`)."""

    ends_at: int
    extension: Noted | None = None
    replacements: Mapping[str, Replacement] = field(default_factory=dict)
    version: int | None = None


@dataclass(frozen=True)
class BlockPlan:
    """One block's minute: the state to note, the replacements to send (new ones with their
    events), the extension to buy."""

    state: BlockEndState
    new: tuple[Replacement, ...] = ()
    events: tuple[Event, ...] = ()
    purchase: BlockEndDecision | None = None
    purchase_event: Event | None = None


def replacement_id(request_id: str, block: str, ends_at: int) -> str:
    """The replacement's request id: the original's, then a digest of it, the block and its
    end (the same every minute and every redelivery; another for a new end)."""
    digest = hashlib.sha256(f"{request_id}|{block}|{ends_at}".encode()).hexdigest()[:10]
    return f"{request_id[:KEPT_ID]}.evac-{digest}"


def replacement_request(opted: OptedIn, blocks: Sequence[str], new_id: str) -> dict[str, Any]:
    """The replacement launch request: the original's pool, requester, requirements, tags,
    priority and opt-in, for its instances in `blocks[0]`, never into any of `blocks`."""
    requirements = list(opted.kept.get("requirements", []))
    requirements.append(
        {"key": CAPACITY_RESERVATION_ID, "operator": "NotIn", "values": list(blocks)}
    )
    body: dict[str, Any] = {
        "requestId": new_id,
        "nodePool": opted.node_pool,
        "count": len(opted.instances),
        "requirements": requirements,
        "capacityBlockEnd": dict(opted.kept["capacityBlockEnd"]),
    }
    if opted.requester is not None:
        body["requester"] = opted.requester
    if opted.tags:
        body["tags"] = dict(opted.tags)
    if "priorityClassName" in opted.kept:
        body["priorityClassName"] = opted.kept["priorityClassName"]
    return body


def policies(
    opted: Sequence[OptedIn], pools: Mapping[str, CapacityBlockEnd | None]
) -> list[tuple[OptedIn, CapacityBlockEnd]]:
    """Each request with the policy it follows now: its ask within its pool's policy as it is
    now (a pool deleted, or one that refuses the ask now, leaves the request out: it gets what
    a request that did not opt in gets)."""
    followed = []
    for o in sorted(opted, key=lambda o: o.request_id):
        if o.node_pool not in pools:
            continue
        policy = for_request(pools[o.node_pool], o.ask)
        if policy is not None:
            followed.append((o, policy))
    return followed


def extension_policy(
    followed: Sequence[tuple[OptedIn, CapacityBlockEnd]], block: ReservationSnapshot, now: datetime
) -> CapacityBlockEnd | None:
    """The policy an extension of the block is decided by: the first due request's that asks
    Extend (by request id), or None when none does."""
    extending = [p for o, p in followed if p.action == EXTEND and due(p, block, now)]
    return extending[0] if extending else None


def plan_block(
    block: ReservationSnapshot,
    now: datetime,
    followed: Sequence[tuple[OptedIn, CapacityBlockEnd]],
    state: BlockEndState,
    offerings: Sequence[BlockExtensionOffering] | None = (),
    blocks: Sequence[ReservationSnapshot] = (),
) -> BlockPlan:
    """What is done this minute for `block` (see the module docstring). `offerings`: the
    extension offerings read when `block_ends.wants_offerings` says the extension policy needs
    them (None: EC2 refused to offer); `blocks`: the active Capacity Blocks now (a replacement
    stays off those already due under its policy)."""
    assert block.end_date is not None
    now_due = [(o, p) for o, p in followed if due(p, block, now)]
    extension = extension_policy(followed, block, now)
    decision = None
    if extension is not None:
        decision = decide(extension, block, now, state.extension, offerings)
    noted = state.extension
    if decision is not None and decision.new:
        noted = Noted(decision.action, state.ends_at, decision.reason)
    replacements = dict(state.replacements)
    new: list[Replacement] = []
    events: list[Event] = []
    for opted, policy in now_due:
        reason = _evacuation_reason(policy, decision)
        if opted.request_id in replacements or reason is None:
            continue
        avoid = _due_blocks(block, blocks, policy, now)
        made, event = _replacement(block, state.ends_at, opted, avoid, policy, reason)
        replacements[opted.request_id] = made
        new.append(made)
        events.append(event)
    after = replace(state, extension=noted, replacements=replacements)
    if decision is None or decision.action != EXTEND or not decision.new:
        return BlockPlan(after, tuple(new), tuple(events))
    assert extension is not None
    bought = _extension_event(block, now_due, decision, extension)
    return BlockPlan(after, tuple(new), tuple(events), decision, bought)


def _evacuation_reason(policy: CapacityBlockEnd, decision: BlockEndDecision | None) -> str | None:
    """Why a due request evacuates, or None while its block is extended (or waited on)."""
    if policy.action != EXTEND:
        return POLICY_EVACUATE
    if decision is None or not decision.evacuating:
        return None
    return decision.reason


def _due_blocks(
    block: ReservationSnapshot,
    blocks: Sequence[ReservationSnapshot],
    policy: CapacityBlockEnd,
    now: datetime,
) -> tuple[str, ...]:
    """`block`, then every other block already due under `policy` (sorted: `due_blocks`, which
    a static pool's evacuation avoids as well)."""
    others = [rid for rid in due_blocks(policy, blocks, now) if rid != block.reservation_id]
    return (block.reservation_id, *others)


def _replacement(
    block: ReservationSnapshot,
    ends_at: int,
    opted: OptedIn,
    avoid: tuple[str, ...],
    policy: CapacityBlockEnd,
    reason: str,
) -> tuple[Replacement, Event]:
    """The request's replacement (off every block in `avoid`) and the event announcing it."""
    new_id = replacement_id(opted.request_id, block.reservation_id, ends_at)
    body = replacement_request(opted, avoid, new_id)
    made = Replacement(opted.request_id, new_id, len(opted.instances), body)
    evacuating = BlockEndDecision(EVACUATE, reason, new=True)
    detail = {"requestId": opted.request_id, "replacementRequestId": new_id}
    event = block_end_event(opted.node_pool, block, evacuating, opted.instances, policy, detail)
    return made, event


def _extension_event(
    block: ReservationSnapshot,
    now_due: Sequence[tuple[OptedIn, CapacityBlockEnd]],
    decision: BlockEndDecision,
    extension: CapacityBlockEnd,
) -> Event:
    """The extension's event, naming the requests it keeps."""
    extenders = [o for o, p in now_due if p.action == EXTEND]
    requests: dict[str, Any] = {"requestIds": [o.request_id for o in extenders]}
    inside = sorted(i for o in extenders for i in o.instances)
    return block_end_event(extenders[0].node_pool, block, decision, inside, extension, requests)


def to_terminate(replacement: Replacement, in_block: Sequence[str], launched: int) -> list[str]:
    """The original's instances in the block to terminate now that its replacement launched
    `launched`: as many as run elsewhere, never more (the others run until EC2 ends them);
    the same ones whatever minute asks (by id)."""
    keep = max(0, replacement.count - launched)
    ordered = sorted(in_block)
    return ordered[: max(0, len(ordered) - keep)]
