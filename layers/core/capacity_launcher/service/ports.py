"""What the use cases need from the outside world, as narrow protocols adapters/ implements."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from capacity_launcher.domain.config import NodeClass, NodePool
from capacity_launcher.domain.fleet import FleetResult, InstanceLanding
from capacity_launcher.domain.instance_types import InstanceTypeInfo
from capacity_launcher.domain.intents import LaunchIntent
from capacity_launcher.domain.offerings import Turn
from capacity_launcher.domain.planning import ReservationSource, ReservedTarget
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.status import RequestRecord


class Configuration(Protocol):
    def node_pool(self, name: str) -> NodePool: ...
    def node_pools(self, *, fresh: bool = False) -> list[NodePool]: ...
    def node_class(self, name: str) -> NodeClass: ...


class Records(Protocol):
    def load(self, request_id: str) -> tuple[RequestRecord | None, list[LaunchIntent]]: ...
    def put_record(self, record: RequestRecord) -> None: ...
    def write_intent(self, intent: LaunchIntent) -> bool: ...
    def complete_intent(
        self, token: str, instance_ids: Sequence[str], errors: Iterable[Mapping[str, str]]
    ) -> None: ...
    def put_instances(self, instances: Iterable[Mapping[str, Any]]) -> None: ...


class Entry(Protocol):
    @property
    def reason(self) -> str: ...


class UnavailableCache(Protocol):
    def current(self) -> Mapping[str, Entry]: ...
    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> Any: ...
    # Single flight: claim offerings before asking EC2; end the claims once it answered.
    def take_turn(self, keys: Sequence[str]) -> Turn: ...
    def end_turn(
        self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()
    ) -> None: ...


class Limits(Protocol):
    def reserve(
        self,
        pool: str,
        lease_id: str,
        per_instance: Resources,
        count: int,
        min_count: int,
        limits: PoolLimits | None,
    ) -> int: ...
    def settle(self, pool: str, lease_id: str, members: Mapping[str, Resources]) -> None: ...
    def is_settled(self, pool: str, lease_id: str) -> bool: ...
    def cancel(self, pool: str, lease_id: str) -> bool: ...
    def stored_limits(self, pool: str) -> PoolLimits | None: ...


class FleetLauncher(Protocol):
    def create(self, request: Mapping[str, Any]) -> FleetResult: ...
    def describe(self, instance_ids: Sequence[str]) -> list[InstanceLanding]: ...
    def terminate(self, instance_ids: Sequence[str]) -> None: ...
    def tag(self, instance_ids: Sequence[str], tags: Mapping[str, str]) -> None: ...


class Templates(Protocol):
    def specification(
        self, node_class: NodeClass, target: ReservedTarget | None, *, spot: bool = False
    ) -> dict[str, Any]: ...
    def ensure(
        self, node_class: NodeClass, reservation_spec: Mapping[str, Any], *, spot: bool = False
    ) -> str: ...
    def image_platform(self, node_class: NodeClass) -> str | None: ...


class Catalog(Protocol):
    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None = None
    ) -> list[InstanceTypeInfo]: ...


class SubnetLookup(Protocol):
    def by_zone(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]: ...


class Reservations(Protocol):
    def sources(self, node_class: NodeClass) -> list[ReservationSource]: ...
    def claim(self, reservation_id: str, count: int) -> int | None: ...
    def give_back(self, reservation_id: str, count: int) -> None: ...
    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None: ...
    def note_launched(self, launched: Mapping[str, int]) -> None: ...


@dataclass(frozen=True)
class LaunchPorts:
    config: Configuration
    records: Records
    unavailable: UnavailableCache
    limits: Limits
    fleet: FleetLauncher
    templates: Templates
    catalog: Catalog
    subnets: SubnetLookup
    reservations: Reservations
