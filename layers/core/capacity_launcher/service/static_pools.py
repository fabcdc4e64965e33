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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.capacity.requirements import ZONE
from capacity_launcher.domain.capacity.static_pools import (
    DRY_ZONE_SECONDS,
    HOLD_ALL_ZONES,
    IN_FLIGHT_SECONDS,
    InFlight,
    StaticMember,
    StaticState,
    plan,
    static_request_id,
    still_dry,
)
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import PoolMembers
from capacity_launcher.service.ports import (
    Configuration,
    InstanceItems,
    Records,
    StaticPoolStates,
    SubnetLookup,
)


@dataclass
class StaticReport:
    """Per static pool: the requests sent and the instances terminated this minute."""

    launched: dict[str, list[str]] = field(default_factory=dict)
    terminated: dict[str, list[str]] = field(default_factory=dict)
    # Pools whose state another sync moved meanwhile: nothing sent for them this minute.
    skipped: list[str] = field(default_factory=list)


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
    ) -> None:
        self._config = config
        self._subnets = subnets
        self._members = members
        self._instances = instances
        self._records = records
        self._states = states
        self._send = send
        self._terminate = terminate
        self._clock = clock

    def run(self) -> StaticReport:
        report = StaticReport()
        for pool in self._config.node_pools():
            if pool.spec.replicas is not None:
                self._keep(pool, pool.spec.replicas, report)
        return report

    def _keep(self, pool: NodePool, replicas: int, report: StaticReport) -> None:
        name = pool.metadata.name
        now = int(self._clock().timestamp())
        state = self._states.read(name)
        in_flight, dry = self._ended(state, now)
        limit = pool.spec.limits.instances if pool.spec.limits is not None else None
        members = self._current(name)
        skipped = still_dry(dry, now)
        planned = plan(replicas, limit, members, in_flight, self._zones(pool), skipped)
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
        after = StaticState(in_flight + sent, skipped, state.version)
        if after != state and not self._states.write(name, after):
            report.skipped.append(name)
            return
        for launch in sent:
            self._send(_launch_request(name, launch))
        if sent:
            report.launched[name] = [s.request_id for s in sent]
            logger.info(
                "static NodePool short of its replicas: launches sent",
                extra={"nodePool": name, "replicas": replicas, "requests": report.launched[name]},
            )

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
            StaticMember(i, r.zone, r.capacity_type, r.launched_at)
            if (r := found.get(i)) is not None
            else StaticMember(i, None, "on-demand", None)
            for i in ids
        ]

    def _zones(self, pool: NodePool) -> list[str]:
        """The zones the pool may launch in: its class's subnets' zones its requirements allow."""
        node_class = self._config.node_class(pool.spec.node_class_ref)
        zones = sorted(self._subnets.by_zone(node_class))
        return pool.spec.requirements_set().allowed_values(ZONE, zones)


def _launch_request(pool: str, launch: InFlight) -> dict[str, Any]:
    body: dict[str, Any] = {"requestId": launch.request_id, "nodePool": pool, "count": 1}
    if launch.zone is not None:
        body["requirements"] = [{"key": ZONE, "operator": "In", "values": [launch.zone]}]
    return body
