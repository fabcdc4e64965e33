"""EC2 Fleet in the domain's terms: the CreateFleet input an attempt becomes, and what comes back
(instances, per-override errors and the offerings they blame, where instances landed)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from capacity_launcher.domain.aws_errors import ErrorKind, classify, node_class_field
from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import RESERVED, SPOT, CapacityType, Offering
from capacity_launcher.domain.capacity.planning import LaunchAttempt
from capacity_launcher.domain.capacity.reservations import (
    FLEET_CAPACITY_TYPES,
    INTERRUPTIBLE_MARKET,
    ReservationUse,
)
from capacity_launcher.domain.records.detail_limits import MAX_LEFT_OUT_NAMED
from capacity_launcher.domain.records.status import ROOM_LEFT, CandidatesLeftOut, ErrorDetail
from capacity_launcher.domain.records.tags import as_ec2_tags

# The overrides one CreateFleet is sent at most: the offer is ordered first, then cut
# (docs/placement.md, How an instance type is chosen); what is cut is named on the record.
MAX_OVERRIDES_PER_FLEET = 100
# What a fleet error that blames no override says of an offering it left dry.
DEFAULT_DRY_CODE = "InsufficientInstanceCapacity"
# ReservedCapacityOptions.ReservationTypes of an interruptible reservation (botocore's
# FleetReservationType), and the allocation strategy that follows our override priorities.
INTERRUPTIBLE_RESERVATION_TYPE = "interruptible-capacity-reservation"
PRIORITIZED = "prioritized"


@dataclass(frozen=True)
class LaunchTemplate:
    """A launch template by name, and how the instances it launches use reservations."""

    name: str
    reservations: ReservationUse


@dataclass(frozen=True)
class FleetOffer:
    """What one CreateFleet offers EC2: its overrides in preference order, and the offerings
    of the attempt that did not fit under MAX_OVERRIDES_PER_FLEET."""

    overrides: tuple[dict[str, Any], ...]
    offered: tuple[Offering, ...]
    left_out: tuple[Offering, ...]

    def left_out_record(self) -> CandidatesLeftOut | None:
        """What the request's record says of the cut; None when nothing was left out."""
        if not self.left_out:
            return None
        offered_types = {o.instance_type for o in self.offered}
        unoffered = sorted({o.instance_type for o in self.left_out} - offered_types)
        return CandidatesLeftOut(
            offered=len(self.offered),
            left_out=len(self.left_out),
            override_limit=MAX_OVERRIDES_PER_FLEET,
            instance_types=unoffered[:MAX_LEFT_OUT_NAMED],
        )


def room_left_record(candidates: Candidates, covered: Collection[str]) -> CandidatesLeftOut | None:
    """What a request's record says of the candidate types its lease left out (only `covered`
    fit the room left); None when none was left out."""
    offerings = candidates.all()
    offered = [o for o in offerings if o.instance_type in covered]
    left_out = [o for o in offerings if o.instance_type not in covered]
    if not left_out:
        return None
    return CandidatesLeftOut(
        offered=len(offered),
        left_out=len(left_out),
        override_limit=MAX_OVERRIDES_PER_FLEET,
        instance_types=sorted({o.instance_type for o in left_out})[:MAX_LEFT_OUT_NAMED],
        reason=ROOM_LEFT,
    )


def preference_order(
    offerings: Sequence[Offering],
    instance_types: Mapping[str, InstanceTypeInfo],
    reserved_fit: Collection[tuple[str, str]] = (),
) -> list[Offering]:
    """The attempt's offerings in the order the request prefers them: those an open reservation
    it knows of fits (type and zone) first, then by price, each instance family taking its turn
    (the cheapest of every family, then the next of every family...) so that a cut keeps every
    family. With no price list in the service, price is estimated by size (GPUs, then vCPUs,
    then memory): within a family the smaller size is the cheaper. A reserved attempt keeps
    its own order (the most available first: docs/placement.md)."""
    if any(o.capacity_type == RESERVED for o in offerings):
        return list(offerings)

    def price(offering: Offering) -> tuple[float, float, float]:
        info = instance_types.get(offering.instance_type)
        if info is None:
            return (math.inf, math.inf, math.inf)
        return (info.gpu_count, info.vcpu, info.memory_mib)

    fit = set(reserved_fit)
    ranked = sorted(
        offerings,
        key=lambda o: ((o.instance_type, o.zone) not in fit, price(o), o.instance_type, o.zone),
    )
    turns: dict[tuple[bool, str], int] = {}
    keyed = []
    for position, offering in enumerate(ranked):
        family = (
            (offering.instance_type, offering.zone) not in fit,
            offering.instance_type.split(".", 1)[0],
        )
        turn = turns.get(family, 0)
        turns[family] = turn + 1
        keyed.append(((family[0], turn, position), offering))
    return [offering for _, offering in sorted(keyed, key=lambda pair: pair[0])]


def fleet_offer(
    attempt: LaunchAttempt,
    subnets: Mapping[str, Sequence[str]],
    instance_types: Mapping[str, InstanceTypeInfo] | None = None,
    reserved_fit: Collection[tuple[str, str]] = (),
) -> FleetOffer:
    """One override per offering x subnet of its zone, zone set on each (so every per-override
    error maps back to its offering), cut at MAX_OVERRIDES_PER_FLEET after ordering: every
    offering's first subnet before any offering's second, so the cut drops subnets before it
    drops offerings. Priority is the offering's rank. A reserved attempt into a cluster
    placement group's reservations places every override in that group (EC2 gives such a
    reservation's capacity only to instances placed in its group)."""
    ranked = [
        o
        for o in preference_order(attempt.offerings, instance_types or {}, reserved_fit)
        if subnets.get(o.zone)
    ]
    rounds = max((len(subnets[o.zone]) for o in ranked), default=0)
    placement = placement_of(attempt)
    overrides: list[dict[str, Any]] = []
    offered: dict[Offering, None] = {}
    for round_ in range(rounds):
        for rank, offering in enumerate(ranked):
            zone_subnets = subnets[offering.zone]
            if round_ >= len(zone_subnets) or len(overrides) >= MAX_OVERRIDES_PER_FLEET:
                continue
            offered[offering] = None
            overrides.append(
                {
                    "InstanceType": offering.instance_type,
                    "SubnetId": zone_subnets[round_],
                    "AvailabilityZone": offering.zone,
                    "Priority": float(rank),
                    **placement,
                }
            )
    left_out = tuple(o for o in ranked if o not in offered)
    return FleetOffer(tuple(overrides), tuple(offered), left_out)


def placement_of(attempt: LaunchAttempt) -> dict[str, Any]:
    """The Placement each override of `attempt` carries: its target's cluster placement group
    (CreateFleet's FleetLaunchTemplateOverridesRequest.Placement.GroupName), or nothing."""
    if attempt.target is None or attempt.target.placement_group is None:
        return {}
    return {"Placement": {"GroupName": attempt.target.placement_group}}


def template_configs(
    overrides: Sequence[Mapping[str, Any]],
    launch_template: LaunchTemplate,
    by_type: Mapping[str, LaunchTemplate] | None = None,
) -> list[dict[str, Any]]:
    """CreateFleet's LaunchTemplateConfigs: one per launch template, each with the overrides of
    the instance types that launch from it (`by_type`; `launch_template` for the others), in the
    order their first override comes. Priorities stay the offer's, which EC2 compares across
    configs; MAX_OVERRIDES_PER_FLEET counts the overrides of all of them."""
    grouped: dict[str, tuple[LaunchTemplate, list[dict[str, Any]]]] = {}
    for override in overrides:
        template = (by_type or {}).get(override["InstanceType"], launch_template)
        grouped.setdefault(template.name, (template, []))[1].append(dict(override))
    if not grouped:  # no override at all: the template alone, as before
        grouped[launch_template.name] = (launch_template, [])
    return [
        {
            "LaunchTemplateSpecification": {
                "LaunchTemplateName": template.name,
                "Version": "$Latest",
            },
            "Overrides": group,
        }
        for template, group in grouped.values()
    ]


def template_names(fleet_input: Mapping[str, Any]) -> list[str]:
    """The launch templates a CreateFleet input names."""
    return [
        str(c["LaunchTemplateSpecification"]["LaunchTemplateName"])
        for c in fleet_input.get("LaunchTemplateConfigs", [])
        if "LaunchTemplateName" in c.get("LaunchTemplateSpecification", {})
    ]


def fleet_request(
    attempt: LaunchAttempt,
    *,
    count: int,
    client_token: str,
    launch_template: LaunchTemplate,
    subnets: Mapping[str, Sequence[str]],
    tags: Mapping[str, str],
    offer: FleetOffer | None = None,
    templates_by_type: Mapping[str, LaunchTemplate] | None = None,
) -> dict[str, Any]:
    """CreateFleet (instant) input over `offer` (by default the attempt's `fleet_offer` in its
    own order), in the market its launch template needs (botocore's CreateFleet model;
    Karpenter's CreateFleetInputBuilder). `templates_by_type`: the template of each instance
    type whose image is not `launch_template`'s (a NodeClass with an image per architecture)."""
    offer = offer or fleet_offer(attempt, subnets)
    request: dict[str, Any] = {
        "ClientToken": client_token,
        "Type": "instant",
        "LaunchTemplateConfigs": template_configs(
            offer.overrides, launch_template, templates_by_type
        ),
        "TargetCapacitySpecification": {"TotalTargetCapacity": count},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": as_ec2_tags(tags)},
            {"ResourceType": "fleet", "Tags": as_ec2_tags(tags)},
        ],
    }
    request.update(_market_options(attempt, launch_template.reservations, count))
    return request


def _market_options(attempt: LaunchAttempt, use: ReservationUse, count: int) -> dict[str, Any]:
    """The target capacity type and the options of each market:

    - Capacity Block: `capacity-block`, and no options at all (neither OnDemandOptions nor
      ReservedCapacityOptions: the block is the one target of the fleet);
    - interruptible reservation: `reserved-capacity` with ReservedCapacityOptions naming the
      `interruptible-capacity-reservation` type, in our priority order;
    - ordinary reservation: on-demand, `prioritized` (paid for already: our order, not price);
    - spot: `price-capacity-optimized`; on-demand: `lowest-price`, reservations first when the
      NodeClass's preference is `open`."""
    target = TargetCapacity(count)
    if use.market is not None:
        # Blocks and interruptible reservations take the whole target in their own capacity type.
        options: dict[str, Any] = {
            "TargetCapacitySpecification": target.of(FLEET_CAPACITY_TYPES[use.market])
        }
        if use.market == INTERRUPTIBLE_MARKET:
            options["ReservedCapacityOptions"] = {
                "ReservationTypes": [INTERRUPTIBLE_RESERVATION_TYPE],
                "AllocationStrategy": PRIORITIZED,
            }
        return options
    if attempt.capacity_type == SPOT:
        return {
            "TargetCapacitySpecification": target.of("spot", "SpotTargetCapacity"),
            "SpotOptions": {"AllocationStrategy": "price-capacity-optimized"},
        }
    on_demand: dict[str, Any] = {"AllocationStrategy": "lowest-price"}
    if attempt.capacity_type == RESERVED:
        on_demand = {"AllocationStrategy": PRIORITIZED}
    elif use.preference == "open":
        on_demand["CapacityReservationOptions"] = {
            "UsageStrategy": "use-capacity-reservations-first"
        }
    return {
        "TargetCapacitySpecification": target.of("on-demand", "OnDemandTargetCapacity"),
        "OnDemandOptions": on_demand,
    }


@dataclass(frozen=True)
class TargetCapacity:
    count: int

    def of(self, default_type: str, market_field: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "TotalTargetCapacity": self.count,
            "DefaultTargetCapacityType": default_type,
        }
        if market_field is not None:
            spec[market_field] = self.count
        return spec


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
class InstanceLanding:
    """Where EC2 says an instance is, and which reservation (if any) it is billed to."""

    instance_id: str
    instance_type: str
    zone: str
    capacity_type: CapacityType
    capacity_reservation_id: str | None
    state: str


@dataclass(frozen=True)
class FleetResult:
    instance_ids: tuple[str, ...]
    errors: tuple[FleetError, ...]
    # What CreateFleet's own answer says of each instance (type, zone, lifecycle; never the
    # reservation it landed in): empty when unknown (a stored answer, a replayed intent).
    answered: tuple[InstanceLanding, ...] = ()

    def landings_answered(self) -> list[InstanceLanding] | None:
        """The answer's facts of every instance, in order; None when any is missing."""
        facts = {x.instance_id: x for x in self.answered}
        if any(i not in facts for i in self.instance_ids):
            return None
        return [facts[i] for i in self.instance_ids]


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
