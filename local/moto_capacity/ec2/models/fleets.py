"""EC2 Fleet `instant`: which overrides get instances, in the order the allocation strategy says.

EC2 User Guide, "Allocation strategies for On-Demand Instances": `lowest-price` launches from
the cheapest pool first, `prioritized` from the override with the lowest Priority first.
"Use Capacity Reservations for On-Demand Instances": `use-capacity-reservations-first` fills
unused reservations before applying the strategy to the rest. `MinTargetCapacity` with
`SingleInstanceType` or `SingleAvailabilityZone` launches all of it in one pool or nothing.

An override whose image does not exist launches nothing: its error in the answer's `Errors` is
`InvalidAMIID.NotFound` (CreateFleetError, https://docs.aws.amazon.com/AWSEC2/latest/
APIReference/API_CreateFleetError.html: each override that launched nothing has its error code
and message, from EC2's error codes, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
errors-overview.html: "The specified AMI doesn't exist"). An override whose instance type does
not support the image's architecture (Image.Architecture against the type's
ProcessorInfo.SupportedArchitectures) fails the same way with InvalidParameterValue.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.ec2.exceptions import EC2ClientError

from moto_capacity.core.operations import OPERATION_CONTROLS
from moto_capacity.ec2.exceptions import (
    InvalidParameterCombination,
    InvalidParameterValue,
    MissingParameter,
    ReservationCapacityExceeded,
)

from .allocation import CapacityLedger, Placement
from .backend import Slot
from .launches import (
    InstanceAttributes,
    ReservationPreference,
    architecture_mismatch,
    image_platform,
    launch_template_data,
    launch_zone,
    resolved_template_spec,
    subnet_from_template,
    unknown_image,
)
from .offerings import CapacityType, price_of
from .reservations import CAPACITY_BLOCK_MARKET, INTERRUPTIBLE_MARKET

PRIORITIZED = ("prioritized", "capacity-optimized-prioritized")
ON_DEMAND = "on-demand"
RESERVATIONS_FIRST = "use-capacity-reservations-first"


@dataclass
class FleetCandidate:
    """One LaunchTemplateAndOverrides: a launch template version with one override applied."""

    index: int
    template_spec: dict[str, Any]
    overrides: dict[str, Any]
    data: dict[str, Any]
    attributes: InstanceAttributes
    preference: ReservationPreference
    subnet_id: str | None
    priority: float
    weight: float
    image_error: EC2ClientError | None = None

    @property
    def launch_template_and_overrides(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"LaunchTemplateSpecification": dict(self.template_spec)}
        if self.overrides:
            answer["Overrides"] = dict(self.overrides)
        return answer

    def unit_price(self, market: str) -> float:
        kind: CapacityType = "spot" if market == "spot" else "on-demand"
        return price_of(self.attributes.instance_type, kind) / self.weight


def fleet_candidates(ec2_backend: Any, configs: list[Mapping[str, Any]]) -> list[FleetCandidate]:
    candidates: list[FleetCandidate] = []
    for config in configs:
        spec = config.get("LaunchTemplateSpecification") or {}
        if not (spec.get("LaunchTemplateId") or spec.get("LaunchTemplateName")):
            raise InvalidParameterValue("Each LaunchTemplateConfig needs a launch template.")
        data = launch_template_data(ec2_backend, spec)
        template_spec = resolved_template_spec(ec2_backend, spec)
        preference = ReservationPreference.from_specification(
            data.get("CapacityReservationSpecification")
        )
        for override in config.get("Overrides") or [{}]:
            merged = {**data, **override}
            if not merged.get("InstanceType") or not merged.get("ImageId"):
                raise InvalidParameterValue(
                    "Each override needs an InstanceType and an ImageId, from the launch "
                    "template or the override."
                )
            placement = {**(data.get("Placement") or {}), **(override.get("Placement") or {})}
            subnet_id = override.get("SubnetId") or subnet_from_template(data)
            zone = override.get("AvailabilityZone") or placement.get("AvailabilityZone")
            attributes = InstanceAttributes(
                instance_type=merged["InstanceType"],
                platform=image_platform(ec2_backend, merged["ImageId"]),
                availability_zone=launch_zone(ec2_backend, subnet_id, zone),
                tenancy=placement.get("Tenancy") or "default",
                placement_group=placement.get("GroupName") or None,
            )
            priority = override.get("Priority")
            candidates.append(
                FleetCandidate(
                    index=len(candidates),
                    template_spec=template_spec,
                    overrides=dict(override),
                    data=merged,
                    attributes=attributes,
                    preference=preference,
                    subnet_id=subnet_id,
                    priority=math.inf if priority is None else float(priority),
                    weight=float(override.get("WeightedCapacity") or 1.0),
                    image_error=(
                        unknown_image(ec2_backend, merged["ImageId"])
                        or architecture_mismatch(
                            ec2_backend, merged["ImageId"], merged["InstanceType"]
                        )
                    ),
                )
            )
    if not candidates:
        raise InvalidParameterValue("LaunchTemplateConfigs must name at least one launch template.")
    return candidates


# DefaultTargetCapacityType capacity-block: the whole target in one Capacity Block.
BLOCK_TARGET_TYPE = "capacity-block"
RESERVED_CAPACITY = "reserved-capacity"
RESERVED_TARGET_TYPES = (BLOCK_TARGET_TYPE, RESERVED_CAPACITY)
# ReservedCapacityOptions.ReservationTypes (botocore's FleetReservationType), and the market each
# launches. On-Demand Capacity Reservations launch in the on-demand market, reservations only.
ODCR_RESERVATION_TYPE = "on-demand-capacity-reservation"
RESERVATION_TYPE_MARKETS = {
    ODCR_RESERVATION_TYPE: ODCR_RESERVATION_TYPE,
    "capacity-block": CAPACITY_BLOCK_MARKET,
    "interruptible-capacity-reservation": INTERRUPTIBLE_MARKET,
}


@dataclass(frozen=True)
class FleetTargets:
    """Each market's target in order; `chained`: each market takes only what the earlier ones
    left (ReservationTypes in their order, then the fallback market)."""

    markets: list[tuple[str, int]]
    chained: bool = False


def capacity_targets(
    spec: Mapping[str, Any], reserved_options: Mapping[str, Any] | None = None
) -> FleetTargets:
    """The target of each market; what neither names goes to the default type.

    "Launch instances into Capacity Blocks" / "interruptible Capacity Reservations" with EC2
    Fleet: `capacity-block` and `reserved-capacity` take the whole TotalTargetCapacity and
    cannot be mixed with OnDemandTargetCapacity or SpotTargetCapacity. ReservedCapacityOptions
    (API_ReservedCapacityOptionsRequest) go only with `reserved-capacity`, which launches into
    its ReservationTypes in their order, then its fallback market (`on-demand`) if it has one.
    """
    total = int(spec.get("TotalTargetCapacity") or 0)
    on_demand = int(spec.get("OnDemandTargetCapacity") or 0)
    spot = int(spec.get("SpotTargetCapacity") or 0)
    default = spec.get("DefaultTargetCapacityType") or "on-demand"
    if reserved_options and default != RESERVED_CAPACITY:
        raise InvalidParameterCombination(
            "ReservedCapacityOptions can be used only with DefaultTargetCapacityType "
            "reserved-capacity."
        )
    if default in RESERVED_TARGET_TYPES:
        if on_demand or spot:
            raise InvalidParameterCombination(
                f"OnDemandTargetCapacity and SpotTargetCapacity cannot be used with "
                f"DefaultTargetCapacityType {default}."
            )
        return _reserved_targets(default, total, reserved_options or {})
    rest = max(0, total - on_demand - spot)
    if default == "spot":
        spot += rest
    else:
        on_demand += rest
    targets: list[tuple[str, int]] = [("on-demand", on_demand), ("spot", spot)]
    return FleetTargets([(kind, target) for kind, target in targets if target > 0])


def _reserved_targets(default: str, total: int, options: Mapping[str, Any]) -> FleetTargets:
    if total <= 0:
        return FleetTargets([])
    if default == BLOCK_TARGET_TYPE:
        return FleetTargets([(CAPACITY_BLOCK_MARKET, total)])
    return FleetTargets(_reserved_capacity_markets(options, total), chained=True)


def _reserved_capacity_markets(options: Mapping[str, Any], total: int) -> list[tuple[str, int]]:
    types = list(options.get("ReservationTypes") or [])
    if not types:
        raise MissingParameter(
            "DefaultTargetCapacityType reserved-capacity needs "
            "ReservedCapacityOptions.ReservationTypes."
        )
    unknown = [t for t in types if t not in RESERVATION_TYPE_MARKETS]
    if unknown:
        raise InvalidParameterValue(
            f"Value ({unknown[0]}) for parameter ReservedCapacityOptions.ReservationTypes is "
            f"invalid; valid values: {', '.join(RESERVATION_TYPE_MARKETS)}."
        )
    target = options.get("CapacityReservationTarget") or {}
    if target.get("CapacityReservationIds") and target.get("CapacityReservationResourceGroupArns"):
        raise InvalidParameterCombination(
            "ReservedCapacityOptions.CapacityReservationTarget takes Capacity Reservation ids or "
            "resource group ARNs, not both."
        )
    markets = [(RESERVATION_TYPE_MARKETS[t], total) for t in dict.fromkeys(types)]
    fallback = (options.get("ReservedCapacityFallbackOptions") or {}).get("MarketTypes") or []
    if "on-demand" in fallback:
        markets.append(("on-demand", total))
    return markets


def check_one_block(candidates: list[FleetCandidate], targets: FleetTargets) -> None:
    """An EC2 Fleet launches into one Capacity Block: its templates may name only one."""
    if not any(market == CAPACITY_BLOCK_MARKET for market, _ in targets.markets):
        return
    blocks = {c.preference.reservation_id for c in candidates if c.preference.reservation_id}
    if len(blocks) > 1:
        raise InvalidParameterValue(
            f"An EC2 Fleet can launch into one Capacity Block only; its launch templates "
            f"name {len(blocks)} Capacity Reservations ({', '.join(sorted(blocks))})."
        )


def ordered_by_strategy(
    candidates: list[FleetCandidate], capacity_type: str, options: Mapping[str, Any]
) -> list[FleetCandidate]:
    if (options.get("AllocationStrategy") or "lowest-price") in PRIORITIZED:
        return sorted(candidates, key=lambda c: (c.priority, c.index))
    return sorted(candidates, key=lambda c: (c.unit_price(capacity_type), c.index))


@dataclass
class FleetOutcome:
    """What one market of a fleet got: slots per candidate, and each candidate's failure."""

    capacity_type: str
    slots: dict[int, list[Slot]] = field(default_factory=dict)
    errors: dict[int, EC2ClientError] = field(default_factory=dict)
    fulfilled: float = 0.0


def _fulfil(
    ledger: CapacityLedger,
    candidates: list[FleetCandidate],
    target: int,
    capacity_type: str,
    reservations_first: bool,
) -> FleetOutcome:
    outcome = FleetOutcome(capacity_type)
    for reservations_only in (True, False) if reservations_first else (False,):
        for candidate in candidates:
            remaining = target - outcome.fulfilled
            if remaining <= 0:
                break
            fault = candidate.image_error or (None if reservations_only else override_fault())
            if fault is not None:
                # "EC2 Fleet" partial success: this override fails in Errors, the rest go on.
                outcome.errors.setdefault(candidate.index, fault)
                continue
            placement = _place(
                ledger,
                candidate,
                math.ceil(remaining / candidate.weight),
                capacity_type,
                reservations_only,
            )
            outcome.slots.setdefault(candidate.index, []).extend(placement.slots)
            outcome.fulfilled += len(placement.slots) * candidate.weight
            if placement.failure is not None and not reservations_only:
                outcome.errors.setdefault(candidate.index, placement.failure)
    return outcome


def _place(
    ledger: CapacityLedger,
    candidate: FleetCandidate,
    count: int,
    capacity_type: str,
    reservations_only: bool,
) -> Placement:
    """One override's launch in its market; the ReservationTypes entry
    `on-demand-capacity-reservation` launches on-demand into reservations only."""
    if capacity_type != ODCR_RESERVATION_TYPE:
        return ledger.place(
            candidate.attributes,
            candidate.preference,
            count,
            capacity_type,
            reservations_only=reservations_only,
            fleet=True,
        )
    placement = ledger.place(
        candidate.attributes, candidate.preference, count, ON_DEMAND, reservations_only=True
    )
    if len(placement.slots) < count and placement.failure is None:
        target = candidate.preference.reservation_id or candidate.preference.group_arn
        placement.failure = ReservationCapacityExceeded(target or "open Capacity Reservations")
    return placement


def launch_market(capacity_type: str) -> str:
    """The market an instance of this fleet market runs in (DescribeInstances' lifecycle)."""
    return ON_DEMAND if capacity_type == ODCR_RESERVATION_TYPE else capacity_type


def override_fault() -> EC2ClientError | None:
    fault = OPERATION_CONTROLS.fault_for("ec2:CreateFleet", scope="override")
    return None if fault is None else EC2ClientError(fault.code, fault.message)


def _single_pool_groups(
    candidates: list[FleetCandidate], single_type: bool, single_zone: bool
) -> list[list[FleetCandidate]]:
    grouped: dict[tuple[str, str], list[FleetCandidate]] = {}
    for candidate in candidates:
        key = (
            candidate.attributes.instance_type if single_type else "",
            candidate.attributes.availability_zone if single_zone else "",
        )
        grouped.setdefault(key, []).append(candidate)
    return list(grouped.values())


def plan_capacity_type(
    ledger: CapacityLedger,
    candidates: list[FleetCandidate],
    target: int,
    capacity_type: str,
    options: Mapping[str, Any],
) -> tuple[CapacityLedger, FleetOutcome]:
    """Plan one capacity type on a fork of `ledger`; returns the fork to carry on with."""
    single_type = bool(options.get("SingleInstanceType"))
    single_zone = bool(options.get("SingleAvailabilityZone"))
    min_target = int(options.get("MinTargetCapacity") or 0)
    if min_target and not (single_type or single_zone):
        raise InvalidParameterValue(
            "MinTargetCapacity requires SingleInstanceType or SingleAvailabilityZone."
        )
    if min_target > target:
        raise InvalidParameterValue("MinTargetCapacity cannot exceed the target capacity.")
    reservations_first = capacity_type == "on-demand" and (
        (options.get("CapacityReservationOptions") or {}).get("UsageStrategy") == RESERVATIONS_FIRST
    )
    ordered = ordered_by_strategy(candidates, capacity_type, options)
    best: tuple[CapacityLedger, FleetOutcome] | None = None
    errors: dict[int, EC2ClientError] = {}
    for group in _single_pool_groups(ordered, single_type, single_zone):
        trial = ledger.fork()
        outcome = _fulfil(trial, group, target, capacity_type, reservations_first)
        for index, error in outcome.errors.items():
            errors.setdefault(index, error)
        if best is None or outcome.fulfilled > best[1].fulfilled:
            best = (trial, outcome)
        if outcome.fulfilled >= target:
            break
    assert best is not None
    chosen_ledger, chosen = best
    chosen.errors = errors
    if chosen.fulfilled < min_target:
        # All or nothing: below MinTargetCapacity no instance is launched.
        return ledger.fork(), FleetOutcome(capacity_type, errors=errors)
    return chosen_ledger, chosen
