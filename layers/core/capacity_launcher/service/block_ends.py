"""Before a Capacity Block holding a static pool's instances ends: the pool's `capacityBlockEnd`
applied, each sync minute, by the static pools' keeper (service/static_pools.py).

For each block due (domain/capacity/block_ends.py, `due`) holding some of the pool's instances:
the block's extension offerings are read when the choice needs them, the domain decides, and
the outcome says which blocks the pool evacuates this minute, the choices to note in the pool's
state, the extensions to buy and the events to publish. The keeper notes the choices (its
state's write, conditioned on the version read) before it buys or publishes, so a second sync
at once buys nothing: at most one extension is bought per block end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.aws_errors import is_block_not_extensible
from capacity_launcher.domain.capacity.block_end_policy import (
    EVACUATE,
    EXTEND,
    NONE,
    CapacityBlockEnd,
)
from capacity_launcher.domain.capacity.block_ends import (
    PURCHASE_FAILED,
    BlockEndDecision,
    Noted,
    block_end_event,
    decide,
    due,
    wants_offerings,
)
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.capacity.static_pools import StaticMember
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.domain.records.status import Event
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import BlockExtensionSales


@dataclass
class BlockEndOutcome:
    """One pool's minute: the blocks it evacuates, the choices to keep, what to buy, what to say."""

    evacuating: set[str] = field(default_factory=set)
    noted: dict[str, Noted] = field(default_factory=dict)
    purchases: list[tuple[ReservationSnapshot, BlockEndDecision]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


class Unread:
    """The offerings could not be read this minute."""


class BlockEnds:
    def __init__(self, sales: BlockExtensionSales | None) -> None:
        """`sales` None: no extension can be bought (every Extend falls back to evacuating)."""
        self._sales = sales

    def plan(
        self,
        pool: NodePool,
        held: Sequence[ReservationSnapshot],
        members: Sequence[StaticMember],
        noted: dict[str, Noted],
        now: datetime,
    ) -> BlockEndOutcome:
        outcome = BlockEndOutcome()
        policy = pool.spec.capacity_block_end
        if policy is None:
            return outcome
        blocks = {r.reservation_id: r for r in held if due(policy, r, now)}
        # A choice is kept while its block is due: one ended or extended since is forgotten.
        outcome.noted = {rid: n for rid, n in noted.items() if rid in blocks}
        for rid, block in sorted(blocks.items()):
            inside = [m.instance_id for m in members if m.reservation_id == rid]
            if not inside:
                continue
            offerings: Sequence[BlockExtensionOffering] | None = ()
            if wants_offerings(policy, block, now, noted.get(rid)):
                read = self.offerings(pool.metadata.name, policy, block)
                if isinstance(read, Unread):
                    continue  # unread this minute: decided the next
                offerings = read
            decision = decide(policy, block, now, noted.get(rid), offerings)
            self._apply(pool.metadata.name, policy, block, decision, inside, outcome)
        return outcome

    def buy(
        self,
        pool: NodePool,
        block: ReservationSnapshot,
        decision: BlockEndDecision,
        inside: Sequence[str],
    ) -> tuple[Event, Noted | None]:
        """Buy the extension `decision` chose (noted already): its event, or, when EC2 refuses,
        the evacuation's event and the choice to note in its place."""
        policy = pool.spec.capacity_block_end
        assert policy is not None
        assert decision.offering is not None
        name = pool.metadata.name
        if not self.purchase(name, block, decision.offering):
            evacuate = BlockEndDecision(EVACUATE, PURCHASE_FAILED, new=True)
            assert block.end_date is not None
            noted = Noted(EVACUATE, int(block.end_date.timestamp()), PURCHASE_FAILED)
            return block_end_event(name, block, evacuate, inside, policy), noted
        return block_end_event(name, block, decision, inside, policy), None

    def purchase(
        self, who: str, block: ReservationSnapshot, offering: BlockExtensionOffering
    ) -> bool:
        """Buy `offering` for `block` (chosen and noted already); False when EC2 refuses.
        `who`: the pool (or the requests) it is bought for, for the log."""
        assert self._sales is not None
        try:
            bought = self._sales.purchase_extension(offering.offering_id, block.reservation_id)
        except LaunchFailed as refused:
            logger.warning(
                "Capacity Block extension refused: the block is evacuated",
                extra={"nodePool": who, "block": block.reservation_id, "error": str(refused)},
            )
            return False
        logger.info(
            "Capacity Block extension bought",
            extra={"nodePool": who, "block": block.reservation_id, "status": bought.status},
        )
        return True

    def offerings(
        self, pool: str, policy: CapacityBlockEnd, block: ReservationSnapshot
    ) -> list[BlockExtensionOffering] | Unread | None:
        """The block's offerings; None when EC2 will not extend it now (an extension of it is
        payment-pending); Unread when unread (then nothing is decided on a guess). `pool`: who
        asks, for the log."""
        if self._sales is None:
            return []
        try:
            return self._sales.extension_offerings(block.reservation_id, policy.extend_by_hours)
        except LaunchFailed as refused:
            if is_block_not_extensible(refused.code):
                return None
            logger.warning(
                "Capacity Block extension offerings unread: decided next minute",
                extra={"nodePool": pool, "block": block.reservation_id, "error": str(refused)},
            )
            return Unread()

    @staticmethod
    def _apply(
        pool: str,
        policy: CapacityBlockEnd,
        block: ReservationSnapshot,
        decision: BlockEndDecision,
        inside: list[str],
        outcome: BlockEndOutcome,
    ) -> None:
        rid = block.reservation_id
        if decision.evacuating:
            outcome.evacuating.add(rid)
        if decision.action == NONE or not decision.new:
            return
        assert block.end_date is not None
        outcome.noted[rid] = Noted(
            decision.action, int(block.end_date.timestamp()), decision.reason
        )
        if decision.action == EXTEND:
            outcome.purchases.append((block, decision))  # its event once bought
        else:
            outcome.events.append(block_end_event(pool, block, decision, inside, policy))
