"""EC2 Fleet in the domain's terms: the CreateFleet input an attempt becomes, and what comes back
(instances, per-override errors, where instances landed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capacity_launcher.domain.errors import ErrorKind, classify
from capacity_launcher.domain.offerings import RESERVED, SPOT, CapacityType
from capacity_launcher.domain.planning import LaunchAttempt
from capacity_launcher.domain.tags import as_ec2_tags

# EC2 accepts many overrides per fleet; past a few dozen, the first ones win anyway.
MAX_OVERRIDES_PER_FLEET = 100


def fleet_request(
    attempt: LaunchAttempt,
    *,
    count: int,
    client_token: str,
    launch_template: str,
    subnets: Mapping[str, Sequence[str]],
    tags: Mapping[str, str],
    open_reservations_first: bool,
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
    request: dict[str, Any] = {
        "ClientToken": client_token,
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": launch_template,
                    "Version": "$Latest",
                },
                "Overrides": overrides,
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": capacity,
            ("SpotTargetCapacity" if capacity == "spot" else "OnDemandTargetCapacity"): count,
        },
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
        if open_reservations_first:
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
