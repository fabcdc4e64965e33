"""Before a Capacity Block ends, for launch requests that opted in (`capacityBlockEnd`): run by
the reservation sync each minute, after reconciliation has said which of our instances each
reservation holds (domain/capacity/request_block_ends.py decides; docs/static-capacity.md).

For each active Capacity Block holding instances of requests that opted in, with one of them
due: the block end's state is read, the domain plans, the state is written (conditioned on the
version read) before anything is sent, bought or published, so a second sync at once does
nothing. Then the new replacements are sent to the launch queue (and one noted earlier with no
record yet is sent again: the same id and body, which the launcher serves once), the extension
chosen is bought (refused: noted as an evacuation, done the next minute), and the original's
instances in the block are terminated as many as its replacement launched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from capacity_launcher.domain.capacity.block_end_policy import EVACUATE, CapacityBlockEnd
from capacity_launcher.domain.capacity.block_ends import (
    PURCHASE_FAILED,
    Noted,
    due,
    wants_offerings,
)
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.request_block_ends import (
    BlockEndState,
    BlockPlan,
    OptedIn,
    extension_policy,
    plan_block,
    policies,
    to_terminate,
)
from capacity_launcher.domain.capacity.reservation_state import HeldInstance
from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot
from capacity_launcher.domain.records.instance_records import RUNNING, InstanceRecord
from capacity_launcher.domain.records.status import Event, RequestRecord
from capacity_launcher.observability import logger
from capacity_launcher.service.block_ends import BlockEnds, Unread
from capacity_launcher.service.ports import (
    Configuration,
    InstanceItems,
    Records,
    RequestBlockEndStates,
)


@dataclass
class RequestBlockEndReport:
    """The replacements sent, the instances terminated and the events published this minute."""

    sent: list[str] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Blocks whose state another sync moved meanwhile: nothing done for them this minute.
    skipped: list[str] = field(default_factory=list)


class RequestBlockEnds:
    def __init__(
        self,
        config: Configuration,
        instances: InstanceItems,
        records: Records,
        states: RequestBlockEndStates,
        block_ends: BlockEnds,
        send: Callable[[Mapping[str, Any]], str],
        terminate: Callable[[Sequence[str]], list[str]],
        publish: Callable[..., None],
        clock: Callable[[], datetime],
    ) -> None:
        self._config = config
        self._instances = instances
        self._records = records
        self._states = states
        self._block_ends = block_ends
        self._send = send
        self._terminate = terminate
        self._publish = publish
        self._clock = clock

    def run(
        self,
        reservations: Mapping[str, ReservationSnapshot],
        held: Mapping[str, Sequence[HeldInstance]],
    ) -> RequestBlockEndReport:
        """`reservations`: what EC2 says of every reservation now; `held`: our instances in
        each (reconciliation's)."""
        report = RequestBlockEndReport()
        now = self._clock()
        blocks = [
            r
            for rid, r in sorted(reservations.items())
            if r.kind.ends_early and r.state == ACTIVE and r.end_date is not None and held.get(rid)
        ]
        if not blocks:
            return report
        active = [
            r
            for r in reservations.values()
            if r.kind.ends_early and r.state == ACTIVE and r.end_date is not None
        ]
        pools = {p.name: p.spec.capacity_block_end for p in self._config.node_pools()}
        for block in blocks:
            opted = self._opted_in(held[block.reservation_id])
            followed = policies(opted, pools)
            if any(due(p, block, now) for _, p in followed):
                self._one(block, now, followed, active, report)
        return report

    def _opted_in(self, held: Sequence[HeldInstance]) -> list[OptedIn]:
        """The requests that opted in with instances among `held`, from their instance records."""
        found = self._instances.many([h.instance_id for h in held])
        by_request: dict[str, list[InstanceRecord]] = {}
        for record in found.values():
            if record.block_end and record.request_id and record.state == RUNNING:
                by_request.setdefault(record.request_id, []).append(record)
        return [
            OptedIn(
                request_id,
                records[0].node_pool or "",
                records[0].requester,
                tuple(sorted(r.instance_id for r in records)),
                records[0].block_end or {},
                records[0].request_tags,
            )
            for request_id, records in sorted(by_request.items())
        ]

    def _one(
        self,
        block: ReservationSnapshot,
        now: datetime,
        followed: list[tuple[OptedIn, CapacityBlockEnd]],
        active: Sequence[ReservationSnapshot],
        report: RequestBlockEndReport,
    ) -> None:
        assert block.end_date is not None
        rid = block.reservation_id
        state = self._states.read(rid, int(block.end_date.timestamp()))
        offerings = self._offerings(block, now, followed, state)
        if isinstance(offerings, Unread):
            return  # decided the next minute
        plan = plan_block(block, now, followed, state, offerings, active)
        if plan.state != state and not self._states.write(rid, plan.state):
            report.skipped.append(rid)
            return
        records = self._send_replacements(plan, report)
        events = list(plan.events) + self._buy(block, plan, state)
        self._terminate_replaced(plan.state, dict(followed_instances(followed)), records, report)
        if events:
            self._publish(*events)
            report.events += events
            logger.info(
                "Capacity Block ending: requests that opted in evacuated or extended",
                extra={"block": rid, "events": [e.detail for e in events]},
            )

    def _offerings(
        self,
        block: ReservationSnapshot,
        now: datetime,
        followed: list[tuple[OptedIn, CapacityBlockEnd]],
        state: BlockEndState,
    ) -> Sequence[BlockExtensionOffering] | Unread | None:
        """The block's offerings when the extension's policy needs them this minute, else ()."""
        extension = extension_policy(followed, block, now)
        if extension is None or not wants_offerings(extension, block, now, state.extension):
            return ()
        return self._block_ends.offerings("requests", extension, block)

    def _send_replacements(
        self, plan: BlockPlan, report: RequestBlockEndReport
    ) -> Mapping[str, RequestRecord]:
        """The new replacements sent, and those noted before with no record yet sent again
        (the same id and body: the launcher serves it once); their records."""
        new = {r.replacement_id for r in plan.new}
        replacements = plan.state.replacements.values()
        records = self._records.get_records([r.replacement_id for r in replacements])
        for replacement in replacements:
            if replacement.replacement_id in new or replacement.replacement_id not in records:
                self._send(replacement.body)
                report.sent.append(replacement.replacement_id)
        return records

    def _buy(self, block: ReservationSnapshot, plan: BlockPlan, read: BlockEndState) -> list[Event]:
        """The extension chosen, bought: its event; refused, noted as an evacuation instead."""
        if plan.purchase is None or plan.purchase.offering is None:
            return []
        if self._block_ends.purchase("requests", block, plan.purchase.offering):
            assert plan.purchase_event is not None
            return [plan.purchase_event]
        after = replace(plan.state, version=(read.version or 0) + 1)
        noted = Noted(EVACUATE, after.ends_at, PURCHASE_FAILED)
        self._states.write(block.reservation_id, replace(after, extension=noted))
        return []

    def _terminate_replaced(
        self,
        state: BlockEndState,
        in_block: Mapping[str, Sequence[str]],
        records: Mapping[str, RequestRecord],
        report: RequestBlockEndReport,
    ) -> None:
        """The original's instances in the block, as many as its replacement launched."""
        going: list[str] = []
        for original, replacement in sorted(state.replacements.items()):
            record = records.get(replacement.replacement_id)
            if record is None or not record.is_final or not record.launched:
                continue
            going += to_terminate(replacement, in_block.get(original, ()), record.launched)
        if going:
            self._terminate(going)
            report.terminated += going


def followed_instances(
    followed: Sequence[tuple[OptedIn, CapacityBlockEnd]],
) -> list[tuple[str, Sequence[str]]]:
    """Each request's instances in the block."""
    return [(o.request_id, o.instances) for o, _ in followed]
