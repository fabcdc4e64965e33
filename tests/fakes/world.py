"""A launcher over fakes: `FakeWorld` builds every port `Launcher` uses from a NodeClass, its
NodePools, instance types and reservations, on one clock the test moves, and keeps each fake
for the test to arrange (an offering dry, a reservation's room) and to read back (records,
intents, leases, instances)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.domain.apis.config import NodeClass, NodePool, PoolSet
from capacity_launcher.domain.apis.documents import parse_document, revision_of
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.errors import NotFound
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.launch import Launcher, LaunchReport
from capacity_launcher.service.ports import LaunchPorts
from tests.fakes.ec2 import FakeCatalog, FakeFleet, FakeReservations, FakeSubnets, FakeTemplates
from tests.fakes.leases import FakeLeases
from tests.fakes.stores import FakeInstances, FakeRecords, FakeUnavailable

ZONES = {"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"}
START = datetime(2025, 1, 6, 12, 0, tzinfo=UTC)


@dataclass
class FakeClock:
    """The time: `now()` for the launcher, `seconds()` for the stores; `advance` moves it."""

    at: datetime = START

    def now(self) -> datetime:
        return self.at

    def seconds(self) -> float:
        return self.at.timestamp()

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


class FakeConfig:
    """`Configuration`: the documents given, at generation 1."""

    def __init__(self, documents: Iterable[NodeClass | NodePool]) -> None:
        self.classes = {d.metadata.name: d for d in documents if isinstance(d, NodeClass)}
        self.pools = {d.metadata.name: d for d in documents if isinstance(d, NodePool)}

    def node_pool(self, name: str) -> NodePool:
        if name not in self.pools:
            raise NotFound("NodePool", name)
        return self.pools[name]

    def node_pools(self, *, fresh: bool = False) -> list[NodePool]:
        return list(self.pools.values())

    def pool_set(self, *, fresh: bool = False) -> PoolSet:
        return PoolSet(1, tuple(self.pools.values()))

    def node_class(self, name: str) -> NodeClass:
        if name not in self.classes:
            raise NotFound("NodeClass", name)
        return self.classes[name]

    def node_classes(self, *, fresh: bool = False) -> list[NodeClass]:
        return list(self.classes.values())

    def capacity_quotas(self, *, fresh: bool = False) -> list[CapacityQuota]:
        return []

    def priority_value(self, name: str) -> int | None:
        return None

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        return QuotaSet(None)

    def forget(self) -> None:
        return None


def an_instance_type(name: str, vcpu: int, memory_gib: int) -> InstanceTypeInfo:
    return InstanceTypeInfo(
        name, ("x86_64",), vcpu, memory_gib * 1024, zones=frozenset(ZONES.values())
    )


INSTANCE_TYPES = (an_instance_type("m5.large", 2, 8), an_instance_type("m5.xlarge", 4, 16))


def a_node_class(name: str = "default", **spec: Any) -> NodeClass:
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": name},
            "spec": {
                "imageId": "ami-0123456789abcdef0",
                "subnetIds": sorted(ZONES),
                "securityGroupIds": ["sg-0123456789abcdef0"],
                **spec,
            },
        }
    )
    assert isinstance(document, NodeClass)
    return document


def a_node_pool(name: str = "default", node_class: str = "default", **spec: Any) -> NodePool:
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": node_class, **spec},
        }
    )
    assert isinstance(document, NodePool)
    return document


def a_reservation(
    reservation_id: str, instance_type: str, zone: str, available: int
) -> ReservationSnapshot:
    return ReservationSnapshot(reservation_id, instance_type, zone, "active", available, available)


@dataclass
class FakeWorld:
    """Every fake a launch reads and writes, and the launcher over them."""

    documents: Sequence[NodeClass | NodePool]
    instance_types: Sequence[InstanceTypeInfo] = INSTANCE_TYPES
    reservations: Sequence[ReservationSnapshot] = ()
    clock: FakeClock = field(default_factory=FakeClock)

    def __post_init__(self) -> None:
        self.config = FakeConfig(self.documents)
        self.records = FakeRecords()
        self.instances = FakeInstances()
        self.unavailable = FakeUnavailable(self.clock.seconds)
        pools, classes = self.config.pools, self.config.classes
        self.leases = FakeLeases(
            {name: pool.spec.limits for name, pool in pools.items()},
            self.clock.seconds,
            revisions={name: revision_of(pool) for name, pool in pools.items()},
            node_classes={name: revision_of(node_class) for name, node_class in classes.items()},
            pools_generation=self.config.pool_set().generation or 0,
        )
        self.leases.record_sink = self.instances  # a settle writes its instances' records
        self.leases.completion_sink = self.records  # and marks its intents done
        self.templates = FakeTemplates()
        self.subnets = FakeSubnets(ZONES)
        self.fleet = FakeFleet(self.templates, self.subnets, self.reservations)
        self.catalog = FakeCatalog(self.instance_types)
        self.snapshots = FakeReservations(self.reservations, self.clock.seconds)
        self.records.slots = self.snapshots  # an intent's claim and give-back ride its writes

    @property
    def ports(self) -> LaunchPorts:
        return LaunchPorts(
            config=self.config,
            records=self.records,
            instances=self.instances,
            unavailable=self.unavailable,
            leases=self.leases,
            fleet=self.fleet,
            templates=self.templates,
            catalog=self.catalog,
            subnets=self.subnets,
            reservations=self.snapshots,
        )

    def launcher(self, max_attempts: int = 4) -> Launcher:
        return Launcher(
            self.ports, max_attempts=max_attempts, clock=self.clock.now, sleep=self.clock.advance
        )

    def serve(self, *requests: Mapping[str, Any], first: bool = True) -> LaunchReport:
        """One group's serve, as the batch hands it over (`first`: their first delivery)."""
        launcher = self.launcher()
        prepared = [launcher.prepare(parse_launch_request(r), self.clock.now()) for r in requests]
        ids = [p.request.request_id for p in prepared] if first else []
        return launcher.serve(prepared, first=ids)

    def record(self, request_id: str) -> RequestRecord:
        found = self.records.get_record(request_id)
        assert found is not None, f"no record stored for {request_id}"
        return found
