"""In-memory EC2 behind the launcher's ports: a fleet that answers CreateFleet per offering, the
launch templates it reads the reservation target from, the instance type catalogue, subnets by
zone and the reservations' shared snapshots (as Karpenter's `pkg/fake` EC2 API stands in for
EC2 in its provider tests).

`FakeFleet.create` reads the CreateFleet input the launcher built
(`domain/capacity/fleet.fleet_request`)
as EC2 would: overrides by priority, the whole target in the first offering that has room.
An offering marked dry (`dry`) answers InsufficientInstanceCapacity; a reserved attempt's
template targets one reservation, whose free slots (`room`) it fills, then answers
ReservationCapacityExceeded. A ClientToken seen before gets its first answer again. Not
modelled: open reservations an on-demand fleet may use first, Capacity Blocks' own markets,
eventual consistency (moto_capacity models those: tests/integration)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.fleet import (
    FleetError,
    FleetResult,
    InstanceLanding,
    LaunchTemplate,
    ManagedInstance,
)
from capacity_launcher.domain.capacity.image_architectures import (
    ImageArchitecture,
    ImageArchitectures,
)
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, RESERVED, SPOT, CapacityType
from capacity_launcher.domain.capacity.platforms import LINUX
from capacity_launcher.domain.capacity.reservation_state import ANYWHERE, ReservationScope
from capacity_launcher.domain.capacity.reservations import (
    ReservationSnapshot,
    ReservationSource,
    ReservedTarget,
    reservation_use,
    selection_of,
    selector_key,
    target_key,
)
from capacity_launcher.domain.errors import LaunchFailed, NodeClassRefused
from capacity_launcher.domain.records.tags import MANAGED

INSUFFICIENT_CAPACITY = "InsufficientInstanceCapacity"
RESERVATION_FULL = "ReservationCapacityExceeded"
IDEMPOTENT_MISMATCH = "IdempotentParameterMismatch"
_GONE = ("shutting-down", "terminated")


class FakeTemplates:
    """`Templates`: one template per (NodeClass, reservation target, spot), kept by name so the
    fleet reads what a CreateFleet's template says about reservations, as EC2 does."""

    def __init__(self, architecture: str = "x86_64") -> None:
        self.by_name: dict[str, LaunchTemplate] = {}
        self._architecture = architecture

    def ensure(
        self,
        node_class: NodeClass,
        target: ReservedTarget | None,
        *,
        spot: bool = False,
        image_id: str | None = None,
    ) -> LaunchTemplate:
        where = target.name if target is not None else ("spot" if spot else "any")
        name = f"{node_class.metadata.name}-{where}-{image_id or 'main'}"
        template = LaunchTemplate(name, reservation_use(node_class, target, spot=spot))
        self.by_name[name] = template
        return template

    def image_platform(self, node_class: NodeClass) -> str | None:
        return LINUX

    def security_group_ids(self, node_class: NodeClass) -> tuple[str, ...]:
        return tuple(node_class.spec.security_group_ids or ("sg-fake",))

    def instance_profile(self, node_class: NodeClass) -> str | None:
        """The class's own instanceProfile; a role's profile is the adapter's to make."""
        return node_class.spec.instance_profile

    def forget(self, names: Iterable[str]) -> None:
        """A launch found these templates gone: the next `ensure` makes them again."""
        for name in names:
            self.by_name.pop(name, None)

    def image_architectures(self, node_class: NodeClass) -> ImageArchitectures | None:
        image = node_class.spec.image_id or "ami-fake"
        return ImageArchitectures((ImageArchitecture(image, self._architecture),))


class FakeCatalog:
    """`Catalog`: the instance types given, each offered in its zones."""

    def __init__(self, types: Iterable[InstanceTypeInfo]) -> None:
        self.types = {t.name: t for t in types}

    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None = None
    ) -> list[InstanceTypeInfo]:
        wanted = set(zones)
        named = None if names is None else set(names)
        return [
            replace(t, zones=t.zones & wanted)
            for t in self.types.values()
            if t.zones & wanted and (named is None or t.name in named)
        ]


class FakeSubnets:
    """`SubnetLookup`: subnet id -> zone; a NodeClass's `subnetIds` grouped by zone."""

    def __init__(self, zones: Mapping[str, str]) -> None:
        self.zones = dict(zones)

    def by_zone(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        for subnet in sorted(node_class.spec.subnet_ids or ()):
            found.setdefault(self.zones[subnet], []).append(subnet)
        return {zone: tuple(ids) for zone, ids in found.items()}


class FakeReservations:
    """`Reservations`: the shared snapshots of the reservations given, which the NodeClass's
    selection reaches (an id, a group, or selector terms, resolved by the domain), with slots
    claimed, given back, marked exhausted and taken by launches. `refuse` makes a NodeClass's
    selection one AWS refuses for good."""

    def __init__(self, snapshots: Iterable[ReservationSnapshot], clock: Callable[[], float]):
        self.snapshots = {s.reservation_id: s for s in snapshots}
        self._clock = clock
        self.refused: dict[str, str] = {}

    def sources(
        self,
        node_class: NodeClass,
        scope: ReservationScope = ANYWHERE,
        enough_room: Callable[[Sequence[ReservationSource]], bool] | None = None,
        *,
        most_room_first: bool = False,
    ) -> list[ReservationSource]:
        """Every reservation reached (a page read, as the real port may stop at, is the real
        port's concern: its conformance is tests/integration)."""
        selection = selection_of(node_class)
        if not selection:
            return []
        name = node_class.metadata.name
        if name in self.refused:
            raise NodeClassRefused("InvalidParameter", self.refused[name], name, selection.field)
        named = selection.named_ids()
        reached = [
            r.reservation_id
            for r in self.snapshots.values()
            if r.reservation_id in named or scope.admits((r.instance_type, r.zone))
        ]
        members: dict[str, list[str]] = {selector_key(t): reached for t in selection.terms}
        if selection.target is not None and selection.target.group_arn is not None:
            arn = selection.target.group_arn
            members[target_key(arn)] = [i for i in reached if arn in self.snapshots[i].groups]
        return selection.resolve(self.snapshots, members)

    def as_of(self, node_class: NodeClass) -> float | None:
        return self._clock()

    def claim(
        self, reservation_id: str, count: int, take: Callable[[int], bool] | None = None
    ) -> int | None:
        """What the snapshot allows of `count`; `take(n)` writes the n slots' take (an intent's
        transaction, `FakeRecords.write_intent`), or the fake takes them itself."""
        found = self.snapshots.get(reservation_id)
        if found is None:
            return None
        allowed = found.claimable(count)
        if allowed and take is not None:
            return allowed if take(allowed) else 0
        self.snapshots[reservation_id] = replace(found, available=found.available - allowed)
        return allowed

    def take_claimable(self, reservation_id: str, count: int) -> bool:
        """`count` slots taken if the snapshot has them claimable (the adapter's condition)."""
        found = self.snapshots.get(reservation_id)
        if found is None or found.claimable(count) < count:
            return False
        self.snapshots[reservation_id] = replace(found, available=found.available - count)
        return True

    def give_back(self, reservation_id: str, count: int) -> None:
        """As the shared snapshot's conditional ADD: the whole count back, or none of it when
        that would make more than the total available."""
        found = self.snapshots.get(reservation_id)
        if found is not None and 0 < count <= found.total - found.available:
            self.snapshots[reservation_id] = replace(found, available=found.available + count)

    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None:
        for reservation_id in reservation_ids:
            if reservation_id in self.snapshots:
                found = self.snapshots[reservation_id]
                self.snapshots[reservation_id] = replace(found, exhausted=True)

    def landed_in(
        self, node_class: NodeClass, reservation_ids: Collection[str], known: Collection[str]
    ) -> dict[str, ReservationSnapshot]:
        """None unread: `sources` returns every reservation reached (the real port's read of a
        group's member landed in unread: tests/integration/test_group_reads.py)."""
        return {}

    def note_launched(self, launched: Mapping[str, int]) -> None:
        for reservation_id, count in launched.items():
            found = self.snapshots.get(reservation_id)
            if found is not None:
                available = max(found.available - count, 0)
                self.snapshots[reservation_id] = replace(found, available=available)


@dataclass
class FakeInstance:
    landing: InstanceLanding
    tags: dict[str, str] = field(default_factory=dict)
    launched_at: datetime | None = None


class FakeFleet:
    """`FleetLauncher`: EC2 Fleet (instant) over in-memory capacity (see the module docstring).

    `dry`: (capacity type, instance type, zone) with no capacity; `room`: each reservation's
    free slots as EC2 counts them (its placement from `reservations`); `calls`: every input."""

    def __init__(
        self,
        templates: FakeTemplates,
        subnets: FakeSubnets,
        reservations: Iterable[ReservationSnapshot] = (),
    ) -> None:
        self._templates = templates
        self._subnets = subnets
        self.reservations = {r.reservation_id: r for r in reservations}
        self.room: dict[str, int] = {r.reservation_id: r.available for r in reservations}
        self.dry: set[tuple[str, str, str]] = set()
        self.instances: dict[str, FakeInstance] = {}
        self.calls: list[Mapping[str, Any]] = []
        self.answers: dict[str, FleetResult] = {}
        self._asked: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def create(self, request: Mapping[str, Any]) -> FleetResult:
        self.calls.append(request)
        token = str(request["ClientToken"])
        asked = {k: v for k, v in request.items() if k != "ClientToken"}
        if token in self.answers:
            # EC2's idempotency: the same token and input, the same answer; other input, refused
            if self._asked[token] != asked:
                message = f"The client token '{token}' was already used with different parameters."
                raise LaunchFailed(IDEMPOTENT_MISMATCH, message)
            return self.answers[token]
        self._asked[token] = asked
        wanted = int(request["TargetCapacitySpecification"]["TotalTargetCapacity"])
        tags = {
            t["Key"]: t["Value"]
            for spec in request.get("TagSpecifications", ())
            if spec["ResourceType"] == "instance"
            for t in spec["Tags"]
        }
        market: CapacityType = SPOT if "SpotOptions" in request else ON_DEMAND
        launched: list[str] = []
        errors: list[FleetError] = []
        for override, template in self._overrides(request):
            if len(launched) >= wanted:
                break
            got, error = self._place(override, template, wanted - len(launched), tags, market)
            launched += got
            if error is not None:
                errors.append(error)
        # As EC2's answer: type, zone and lifecycle, never the reservation an instance is in.
        answered = tuple(
            replace(
                self.instances[i].landing,
                capacity_type=market,
                capacity_reservation_id=None,
                state="pending",
            )
            for i in launched
        )
        result = FleetResult(tuple(launched), tuple(errors), answered)
        self.answers[token] = result
        return result

    def _overrides(
        self, request: Mapping[str, Any]
    ) -> list[tuple[Mapping[str, Any], LaunchTemplate]]:
        by_name = self._templates.by_name
        pairs = [
            (override, by_name[config["LaunchTemplateSpecification"]["LaunchTemplateName"]])
            for config in request["LaunchTemplateConfigs"]
            for override in config["Overrides"]
        ]
        return sorted(pairs, key=lambda pair: float(pair[0].get("Priority", 0)))

    def _place(
        self,
        override: Mapping[str, Any],
        template: LaunchTemplate,
        count: int,
        tags: Mapping[str, str],
        market: CapacityType,
    ) -> tuple[list[str], FleetError | None]:
        instance_type, subnet = str(override["InstanceType"]), str(override["SubnetId"])
        zone = self._subnets.zones[subnet]
        target = template.reservations.target
        if target is not None and target.reservation_id is not None:
            reservation = self.reservations.get(target.reservation_id)
            if reservation is None or (reservation.instance_type, reservation.zone) != (
                instance_type,
                zone,
            ):
                return [], None  # the override does not match the targeted reservation
            take = min(count, self.room[target.reservation_id])
            self.room[target.reservation_id] -= take
            got = self._launch(take, instance_type, zone, RESERVED, target.reservation_id, tags)
            if take < count:
                message = f"reservation {target.reservation_id} has no free slot"
                return got, FleetError(RESERVATION_FULL, message, instance_type, zone, subnet)
            return got, None
        if (market, instance_type, zone) in self.dry:
            message = f"We currently do not have sufficient {instance_type} capacity in {zone}"
            return [], FleetError(INSUFFICIENT_CAPACITY, message, instance_type, zone, subnet)
        return self._launch(count, instance_type, zone, market, None, tags), None

    def _launch(
        self,
        count: int,
        instance_type: str,
        zone: str,
        capacity: CapacityType,
        reservation_id: str | None,
        tags: Mapping[str, str],
    ) -> list[str]:
        ids = [f"i-{next(self._ids):017x}" for _ in range(count)]
        for instance_id in ids:
            landing = InstanceLanding(
                instance_id, instance_type, zone, capacity, reservation_id, "running"
            )
            self.instances[instance_id] = FakeInstance(landing, dict(tags))
        return ids

    def describe(self, instance_ids: Sequence[str]) -> list[InstanceLanding]:
        return [self.instances[i].landing for i in instance_ids if i in self.instances]

    def terminate(self, instance_ids: Sequence[str], *, fresh: bool = False) -> list[str]:
        """The ids EC2 does not know (gone already); terminated ones are terminated again."""
        gone = []
        for instance_id in instance_ids:
            found = self.instances.get(instance_id)
            if found is None:
                gone.append(instance_id)  # EC2 forgot it (or never knew it)
                continue
            if found.landing.state in _GONE:
                continue  # EC2 still lists it: terminating it again succeeds, as EC2's does
            found.landing = replace(found.landing, state="terminated")
            reservation = found.landing.capacity_reservation_id
            if reservation is not None:
                self.room[reservation] += 1
        return gone

    def tag(self, instance_ids: Sequence[str], tags: Mapping[str, str]) -> list[str]:
        untagged = []
        for instance_id in instance_ids:
            if instance_id in self.instances:
                self.instances[instance_id].tags.update(tags)
            else:
                untagged.append(instance_id)
        return untagged

    def find_managed(self, tag_filters: Mapping[str, str] | None = None) -> list[ManagedInstance]:
        """The instances tagged as the launcher's (`MANAGED`), and with `tag_filters`."""
        wanted = {MANAGED: "true", **(tag_filters or {})}
        return [
            ManagedInstance(
                x.landing.instance_id,
                x.landing.instance_type,
                x.landing.state,
                x.landing.zone,
                x.landing.capacity_type,
                x.landing.capacity_reservation_id,
                x.launched_at,
                dict(x.tags),
            )
            for x in self.instances.values()
            if all(x.tags.get(k) == v for k, v in wanted.items())
        ]

    def live(self) -> list[InstanceLanding]:
        """The instances not terminated."""
        return [x.landing for x in self.instances.values() if x.landing.state not in _GONE]
