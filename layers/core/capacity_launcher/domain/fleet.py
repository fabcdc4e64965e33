"""EC2 Fleet in the domain's terms: the CreateFleet input an attempt becomes, and what comes back
(instances, per-override errors and the offerings they blame, where instances landed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from capacity_launcher.domain.aws_errors import ErrorKind, classify, node_class_field
from capacity_launcher.domain.offerings import RESERVED, SPOT, CapacityType, Offering
from capacity_launcher.domain.planning import LaunchAttempt
from capacity_launcher.domain.reservations import FLEET_CAPACITY_TYPES, ReservationUse
from capacity_launcher.domain.status import ErrorDetail
from capacity_launcher.domain.tags import as_ec2_tags

# EC2 accepts many overrides per fleet; past a few dozen, the first ones win anyway.
MAX_OVERRIDES_PER_FLEET = 100
# What a fleet error that blames no override says of an offering it left dry.
DEFAULT_DRY_CODE = "InsufficientInstanceCapacity"


@dataclass(frozen=True)
class LaunchTemplate:
    """A launch template by name, and how the instances it launches use reservations."""

    name: str
    reservations: ReservationUse


def fleet_request(
    attempt: LaunchAttempt,
    *,
    count: int,
    client_token: str,
    launch_template: LaunchTemplate,
    subnets: Mapping[str, Sequence[str]],
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """CreateFleet (instant) input: one override per instance type x subnet, zone set on each,
    so every per-override error maps back to its offering."""
    overrides = [
        {
            "InstanceType": offering.instance_type,
            "SubnetId": subnet,
            "AvailabilityZone": offering.zone,
            "Priority": float(priority),
        }
        for priority, offering in enumerate(attempt.offerings)
        for subnet in subnets.get(offering.zone, ())
    ][:MAX_OVERRIDES_PER_FLEET]
    capacity = "spot" if attempt.capacity_type == SPOT else "on-demand"
    market = launch_template.reservations.market
    target: dict[str, Any] = {
        "TotalTargetCapacity": count,
        "DefaultTargetCapacityType": capacity,
        ("SpotTargetCapacity" if capacity == "spot" else "OnDemandTargetCapacity"): count,
    }
    if market is not None:
        # Blocks and interruptible reservations take the whole target in their own capacity type.
        target = {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": FLEET_CAPACITY_TYPES[market],
        }
    request: dict[str, Any] = {
        "ClientToken": client_token,
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": launch_template.name,
                    "Version": "$Latest",
                },
                "Overrides": overrides,
            }
        ],
        "TargetCapacitySpecification": target,
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": as_ec2_tags(tags)},
            {"ResourceType": "fleet", "Tags": as_ec2_tags(tags)},
        ],
    }
    if capacity == "spot":
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif attempt.capacity_type == RESERVED:
        # Reserved capacity is paid for already: follow our order, not EC2's price list.
        request["OnDemandOptions"] = {"AllocationStrategy": "prioritized"}
    else:
        options: dict[str, Any] = {"AllocationStrategy": "lowest-price"}
        if launch_template.reservations.preference == "open":
            options["CapacityReservationOptions"] = {
                "UsageStrategy": "use-capacity-reservations-first"
            }
        request["OnDemandOptions"] = options
    return request


@dataclass(frozen=True)
class FleetError:
    """One CreateFleet error; `instance_type` and `zone` are None for fleet-wide errors."""

    code: str
    message: str
    instance_type: str | None
    zone: str | None
    subnet_id: str | None

    @property
    def kind(self) -> ErrorKind:
        return classify(self.code)


@dataclass(frozen=True)
class FleetResult:
    instance_ids: tuple[str, ...]
    errors: tuple[FleetError, ...]


@dataclass(frozen=True)
class InstanceLanding:
    """Where EC2 says an instance is, and which reservation (if any) it is billed to."""

    instance_id: str
    instance_type: str
    zone: str
    capacity_type: CapacityType
    capacity_reservation_id: str | None
    state: str


@dataclass(frozen=True)
class ManagedInstance:
    """An instance of ours (tagged managed) as EC2 lists it, terminated ones too: what
    reconciliation repairs usage and records from, and what a replay looks for."""

    instance_id: str
    instance_type: str
    state: str | None  # None: EC2 said none
    zone: str | None
    capacity_type: CapacityType
    capacity_reservation_id: str | None
    launched_at: datetime | None
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Blamed:
    """What a CreateFleet's errors say of the offerings of the attempt that made it."""

    # Offerings with no capacity now, each once, in the order the errors blame them.
    dry: list[Offering] = field(default_factory=list)
    # Every (offering, code) an insufficient-capacity error blamed, for the request record.
    hits: list[tuple[Offering, str]] = field(default_factory=list)
    # Errors no retry can fix (spot unavailable included, so the record says why spot did not help).
    fatal: list[ErrorDetail] = field(default_factory=list)
    # A spot error that stands for every spot offering (cached under the capacity type alone).
    spot_unavailable: FleetError | None = None

    def tell(self, error: ErrorDetail) -> None:
        """A fatal error, once: EC2 repeats one (a missing image) on every override."""
        if error not in self.fatal:
            self.fatal.append(error)

    def unavailable_marks(self, errors: Sequence[FleetError]) -> list[tuple[str, str, str]]:
        """(ICE-cache key, code, message) for every dry offering, spot under `spot` alone."""
        marks = [
            (o.key, *error_for(errors, o))
            for o in self.dry
            if self.spot_unavailable is None or o.capacity_type != SPOT
        ]
        if self.spot_unavailable is not None:
            marks.append((SPOT, self.spot_unavailable.code, self.spot_unavailable.message))
        return marks


def blame(errors: Sequence[FleetError], offerings: Sequence[Offering]) -> Blamed:
    """Match each error to the offerings it names (fleet-wide errors name every offering)."""
    blamed = Blamed()
    for error in errors:
        kind = classify(error.code)
        if kind is ErrorKind.INSUFFICIENT_CAPACITY:
            hit = [o for o in offerings if _names(error, o)]
        elif kind is ErrorKind.SPOT_UNAVAILABLE:
            hit = [o for o in offerings if o.capacity_type == SPOT]
            blamed.spot_unavailable = error
            blamed.tell(ErrorDetail(code=error.code, message=error.message))
        else:
            if not kind.retryable:
                where = node_class_field(error.code)
                message = f"{where}: {error.message}" if where else error.message
                blamed.tell(ErrorDetail(code=error.code, message=message))
            continue
        blamed.dry += [o for o in hit if o not in blamed.dry]
        blamed.hits.extend((o, error.code) for o in hit)
    return blamed


def error_for(errors: Sequence[FleetError], offering: Offering) -> tuple[str, str]:
    """The (code, message) EC2 gave for an offering: its override's error, or a fleet-wide one."""
    for error in errors:
        if _names(error, offering):
            return error.code, error.message
    return DEFAULT_DRY_CODE, ""


def _names(error: FleetError, offering: Offering) -> bool:
    return error.instance_type in (None, offering.instance_type) and error.zone in (
        None,
        offering.zone,
    )
