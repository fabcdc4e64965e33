"""Static NodePools (`spec.replicas`): each sync minute, every static pool is brought toward its
replicas (docs/static-capacity.md).

For each static pool: the launches it sent that have ended are let go (one that launched
nothing marks its zone dry for a while; one Rejected holds the pool's launches for as long, so
a pool whose NodeClass is missing does not send a rejected request every minute); the pool's
members are read with their instance records; the domain plans (`static_pools.plan`); the
extras are terminated; the new launches are recorded in the pool's state (conditioned on the
version read) before they are sent, so a second sync at once sends none and a crash between
the two leaves a launch counted in flight (for IN_FLIGHT_SECONDS at most), never a duplicate.

Each launch is an ordinary launch request (one instance, pinned to its zone) sent to the launch
queue: it has a request id, a record and events, and goes through the pool's limits and
reservations first as any request does. Requests from anyone else that name a static pool are
refused (service/resolution.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.capacity.block_ends import Noted, due_blocks
from capacity_launcher.domain.capacity.requirements import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_TYPE,
    RESERVED,
    ZONE,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.capacity.static_pools import (
    DRY_ZONE_SECONDS,
    HOLD_ALL_ZONES,
    IN_FLIGHT_SECONDS,
    InFlight,
    StaticMember,
    StaticState,
    leaving_reservations,
    plan,
    reserved_capacity,
    static_request_id,
    still_dry,
)
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.records.status import Event, RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import PoolMembers
from capacity_launcher.service.block_ends import BlockEndOutcome, BlockEnds
from capacity_launcher.service.ports import (
    Configuration,
    InstanceItems,
    Records,
    Reservations,
    StaticPoolStates,
    SubnetLookup,
)


@dataclass
class StaticReport:
    """Per static pool: the requests sent and the instances terminated this minute."""

    launched: dict[str, list[str]] = field(default_factory=dict)
    terminated: dict[str, list[str]] = field(default_factory=dict)
    # Pools whose state another sync moved meanwhile, or whose reservations (replicasFrom)
    # could not be read: nothing sent or terminated for them this minute.
    skipped: list[str] = field(default_factory=list)
    # What pools did before a Capacity Block's end (capacityBlockEnd): the events published.
    events: list[Event] = field(default_factory=list)


class StaticPools:
    def __init__(
        self,
        config: Configuration,
        subnets: SubnetLookup,
        members: PoolMembers,
        instances: InstanceItems,
        records: Records,
        states: StaticPoolStates,
        send: Callable[[Mapping[str, Any]], str],
        terminate: Callable[[Sequence[str]], list[str]],
        clock: Callable[[], datetime],
        reservations: Reservations | None = None,
        block_ends: BlockEnds | None = None,
        publish: Callable[..., None] | None = None,
    ) -> None:
        self._block_ends = block_ends
        self._publish = publish
        self._config = config
        self._subnets = subnets
        self._members = members
        self._instances = instances
        self._records = records
        self._states = states
        self._send = send
        self._terminate = terminate
        self._clock = clock
        self._reservations = reservations

    def run(self) -> StaticReport:
        report = StaticReport()
        for pool in self._config.node_pools():
            if pool.spec.replicas is not None:
                self._keep(pool, report)
        return report

    def _keep(self, pool: NodePool, report: StaticReport) -> None:
        name = pool.metadata.name
        now = int(self._clock().timestamp())
        state = self._states.read(name)
        in_flight, dry = self._ended(state, now)
        limit = pool.spec.limits.instances if pool.spec.limits is not None else None
        members = self._current(name)
        skipped = still_dry(dry, now)
        try:
            replicas, zones, leaving, held = self._target(pool)
        except CapacityLauncherError as unread:
            # Its reservations unread: neither filled nor emptied on a guess this minute.
            report.skipped.append(name)
            logger.warning(
                "static NodePool's reservations unread: pool left as it is this minute",
                extra={"nodePool": name, "error": str(unread)},
            )
            return
        ending = BlockEndOutcome()
        if self._block_ends is not None:
            ending = self._block_ends.plan(pool, held, members, state.block_ends, self._clock())
        evacuating = ending.evacuating
        due = due_blocks(pool.spec.capacity_block_end, held, self._clock())
        planned = plan(
            replicas, limit, members, in_flight, zones, skipped, leaving, evacuating, due
        )
        if HOLD_ALL_ZONES in skipped:
            planned = replace(planned, launch=())  # a launch was Rejected: held a while
        if planned.terminate:
            self._terminate(list(planned.terminate))
            report.terminated[name] = list(planned.terminate)
            logger.info(
                "static NodePool over its replicas: instances terminated",
                extra={"nodePool": name, "replicas": replicas, "instances": planned.terminate},
            )
        sent = tuple(
            InFlight(static_request_id(name, now, index), zone, now)
            for index, zone in enumerate(planned.launch)
        )
        after = StaticState(in_flight + sent, skipped, state.version, ending.noted)
        if after != state and not self._states.write(name, after):
            report.skipped.append(name)
            return
        for launch in sent:
            self._send(_launch_request(name, launch, pool.spec.replicas_from, planned.avoid))
        self._bought(pool, after, ending, members, report)
        if sent:
            report.launched[name] = [s.request_id for s in sent]
            logger.info(
                "static NodePool short of its replicas: launches sent",
                extra={"nodePool": name, "replicas": replicas, "requests": report.launched[name]},
            )

    def _bought(
        self,
        pool: NodePool,
        state: StaticState,
        ending: BlockEndOutcome,
        members: Sequence[StaticMember],
        report: StaticReport,
    ) -> None:
        """The extensions chosen (noted already) bought; the events of the minute published.
        An extension EC2 refused is noted as an evacuation in its place."""
        events = list(ending.events)
        refused: dict[str, Noted] = {}
        for block, decision in ending.purchases:
            assert self._block_ends is not None
            inside = [m.instance_id for m in members if m.reservation_id == block.reservation_id]
            event, instead = self._block_ends.buy(pool, block, decision, inside)
            events.append(event)
            if instead is not None:
                refused[block.reservation_id] = instead
        if refused:
            version = (state.version or 0) + 1
            noted = state.block_ends | refused
            self._states.write(
                pool.metadata.name, replace(state, version=version, block_ends=noted)
            )
        if events and self._publish is not None:
            self._publish(*events)
        report.events += events

    def _ended(self, state: StaticState, now: int) -> tuple[tuple[InFlight, ...], dict[str, int]]:
        """The launches still in flight, and the dry zones with those this minute found."""
        going: list[InFlight] = []
        dry = dict(state.dry_until)
        records = self._records.get_records([launch.request_id for launch in state.in_flight])
        for launch in state.in_flight:
            record = records.get(launch.request_id)
            if record is None:
                if now - launch.sent_at < IN_FLIGHT_SECONDS:
                    going.append(launch)  # not received yet
                continue
            if not record.is_final:
                going.append(launch)
            elif record.status is RequestStatus.REJECTED:
                dry[HOLD_ALL_ZONES] = now + DRY_ZONE_SECONDS
            elif record.launched == 0 and launch.zone is not None:
                dry[launch.zone] = now + DRY_ZONE_SECONDS
        return tuple(going), dry

    def _current(self, pool: str) -> list[StaticMember]:
        ids = [m.instance_id for m in self._members.members(pool)]
        found = self._instances.many(ids)
        return [
            StaticMember(i, r.zone, r.capacity_type, r.launched_at, r.capacity_reservation_id)
            if (r := found.get(i)) is not None
            else StaticMember(i, None, "on-demand", None)
            for i in ids
        ]

    def _target(self, pool: NodePool) -> tuple[int, list[str], set[str], list[ReservationSnapshot]]:
        """The replicas to keep, the zones to launch in, the reservations leaving soon, and the
        NodeClass's reservations (read for `replicasFrom` and `capacityBlockEnd` only).
        With `replicasFrom: Reserved`: what the NodeClass's active reservations hold
        (`replicas` at most), in their zones only."""
        replicas, zones = pool.spec.replicas or 0, self._zones(pool)
        wanted = pool.spec.replicas_from is not None or pool.spec.capacity_block_end is not None
        if not wanted or self._reservations is None:
            # With replicasFrom and nothing known of the reservations: nothing kept on-demand.
            return (0 if pool.spec.replicas_from else replicas), zones, set(), []
        node_class = self._config.node_class(pool.spec.node_class_ref)
        sources = self._reservations.sources(node_class, enough_room=lambda _: True)
        held = [r for source in sources for r in source.reservations]
        if pool.spec.replicas_from is None:
            return replicas, zones, set(), held
        now = self._clock()
        target = min(replicas, reserved_capacity(held, now))
        in_zones = [z for z in zones if any(r.zone == z for r in held)]
        return target, in_zones, leaving_reservations(held, now), held

    def _zones(self, pool: NodePool) -> list[str]:
        """The zones the pool may launch in: its class's subnets' zones its requirements allow."""
        node_class = self._config.node_class(pool.spec.node_class_ref)
        zones = sorted(self._subnets.by_zone(node_class))
        return pool.spec.requirements_set().allowed_values(ZONE, zones)


def _launch_request(
    pool: str, launch: InFlight, reserved_only: str | None, avoid: Collection[str] = ()
) -> dict[str, Any]:
    """One instance, pinned to its zone; into reservations only for a pool whose replicas
    follow its reservations (never on-demand for that part); never into a block the pool
    evacuates nor into another already due under its policy (`avoid`)."""
    body: dict[str, Any] = {"requestId": launch.request_id, "nodePool": pool, "count": 1}
    requirements = []
    if launch.zone is not None:
        requirements.append({"key": ZONE, "operator": "In", "values": [launch.zone]})
    if reserved_only is not None:
        requirements.append({"key": CAPACITY_TYPE, "operator": "In", "values": [RESERVED]})
    if avoid:
        requirements.append(
            {"key": CAPACITY_RESERVATION_ID, "operator": "NotIn", "values": sorted(avoid)}
        )
    if requirements:
        body["requirements"] = requirements
    return body
