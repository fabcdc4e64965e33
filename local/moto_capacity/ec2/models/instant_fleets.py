"""CreateFleet `Type=instant`: plan under the capacity lock, launch through moto, answer as EC2.

ClientToken idempotency ("Ensure idempotency in Amazon EC2 API requests"): the same token
with the same input returns the first answer and launches nothing; with other input it fails
with IdempotentParameterMismatch.
"""

import copy
import json
import math
from collections.abc import Mapping
from typing import Any

from moto.ec2.utils import convert_tag_spec, filter_iam_instance_profiles
from moto.iam.exceptions import NotFoundException

from moto_capacity.ec2.exceptions import IdempotentParameterMismatch, InvalidIamInstanceProfile

from .allocation import CapacityLedger
from .backend import CAPACITY_LOCK, FleetRecord, InstanceCapacity, Slot, capacity_backend
from .fleets import (
    ODCR_RESERVATION_TYPE,
    FleetCandidate,
    FleetOutcome,
    capacity_targets,
    check_one_block,
    fleet_candidates,
    launch_market,
)
from .fleets import plan_capacity_type as plan
from .launches import WINDOWS, set_lifecycle, stamp_launch
from .reservations import CAPACITY_BLOCK_MARKET

_NOT_PART_OF_THE_INPUT = ("ClientToken", "DryRun")


def _fingerprint(params: Mapping[str, Any]) -> str:
    relevant = {key: value for key, value in params.items() if key not in _NOT_PART_OF_THE_INPUT}
    return json.dumps(relevant, sort_keys=True, default=str)


def create_instant_fleet(ec2_backend: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateFleet result for an instant fleet, replayed when the ClientToken was seen."""
    client_token = params.get("ClientToken")
    if not client_token:
        return _launch_fleet(ec2_backend, params)
    backend = capacity_backend(ec2_backend)
    fingerprint = _fingerprint(params)
    with backend.client_token_lock(client_token):
        record = backend.fleet_records.get(client_token)
        if record is not None:
            if record.fingerprint != fingerprint:
                raise IdempotentParameterMismatch(client_token)
            return copy.deepcopy(record.result)
        result = _launch_fleet(ec2_backend, params)
        backend.fleet_records[client_token] = FleetRecord(fingerprint, copy.deepcopy(result))
        return result


def _launch_fleet(ec2_backend: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    candidates = fleet_candidates(ec2_backend, params.get("LaunchTemplateConfigs") or [])
    reserved_options = params.get("ReservedCapacityOptions") or {}
    targets = capacity_targets(params.get("TargetCapacitySpecification") or {}, reserved_options)
    check_one_block(candidates, targets)
    for candidate in candidates:
        _instance_profile(ec2_backend, candidate)  # refused before anything launches
    backend = capacity_backend(ec2_backend)
    outcomes: list[FleetOutcome] = []
    with CAPACITY_LOCK:
        ledger = CapacityLedger(backend)
        fulfilled = 0.0
        for capacity_type, target in targets.markets:
            wanted = math.ceil(target - fulfilled) if targets.chained else target
            if wanted <= 0:
                break
            ledger, outcome = plan(
                ledger, candidates, wanted, capacity_type, _options(params, capacity_type)
            )
            outcomes.append(outcome)
            fulfilled += outcome.fulfilled
        ledger.commit()
    fleet = _register_fleet(ec2_backend, params)
    try:
        instances = [
            _launch_candidate(ec2_backend, fleet, candidates[index], outcome, slots, params)
            for outcome in outcomes
            for index, slots in outcome.slots.items()
            if slots
        ]
    except Exception:
        _release_unattached(backend, outcomes)
        raise
    fleet.fulfilled_capacity = sum(outcome.fulfilled for outcome in outcomes)
    errors = [
        {
            "LaunchTemplateAndOverrides": candidates[index].launch_template_and_overrides,
            "Lifecycle": fleet_lifecycle(outcome.capacity_type, error=True),
            "ErrorCode": error.code,
            "ErrorMessage": error.message,
        }
        for outcome in outcomes
        for index, error in outcome.errors.items()
    ]
    return {"FleetId": fleet.id, "Instances": instances, "Errors": errors}


def _options(params: Mapping[str, Any], capacity_type: str) -> Mapping[str, Any]:
    """The options that order one market's overrides: SpotOptions for spot, OnDemandOptions for
    on-demand, ReservedCapacityOptions for the reserved-capacity types (its one strategy,
    `prioritized`; a Capacity Block fleet has no options and keeps the request's order)."""
    if capacity_type == "spot":
        return params.get("SpotOptions") or {}
    if capacity_type == "on-demand":
        return params.get("OnDemandOptions") or {}
    if capacity_type == CAPACITY_BLOCK_MARKET:
        return {"AllocationStrategy": "prioritized"}
    return params.get("ReservedCapacityOptions") or {"AllocationStrategy": "prioritized"}


def fleet_lifecycle(market: str, *, error: bool = False) -> str:
    """CreateFleet's `Lifecycle` (botocore's InstanceLifecycle: spot, on-demand,
    interruptible-capacity-reservation, capacity-block). An error of the
    on-demand-capacity-reservation type says that type (CreateFleetError); its instances are
    on-demand."""
    if market == ODCR_RESERVATION_TYPE:
        return ODCR_RESERVATION_TYPE if error else "on-demand"
    return market


def _register_fleet(ec2_backend: Any, params: Mapping[str, Any]) -> Any:
    """A moto Fleet with nothing launched by moto itself, so DescribeFleets and friends work."""
    target_spec = dict(params.get("TargetCapacitySpecification") or {})
    fleet = ec2_backend.create_fleet(
        on_demand_options=params.get("OnDemandOptions") or {},
        spot_options=params.get("SpotOptions") or {},
        target_capacity_specification={"TotalTargetCapacity": 0},
        launch_template_configs=params.get("LaunchTemplateConfigs") or [],
        excess_capacity_termination_policy=params.get("ExcessCapacityTerminationPolicy"),
        replace_unhealthy_instances=params.get("ReplaceUnhealthyInstances"),
        terminate_instances_with_expiration=params.get("TerminateInstancesWithExpiration"),
        fleet_type="instant",
        valid_from=params.get("ValidFrom"),
        valid_until=params.get("ValidUntil"),
        tag_specifications=params.get("TagSpecifications") or [],
    )
    fleet.target_capacity_specification = target_spec
    fleet.target_capacity = int(target_spec.get("TotalTargetCapacity") or 0)
    return fleet


def _launch_candidate(
    ec2_backend: Any,
    fleet: Any,
    candidate: FleetCandidate,
    outcome: FleetOutcome,
    slots: list[Slot],
    params: Mapping[str, Any],
) -> dict[str, Any]:
    request_tags = convert_tag_spec(params.get("TagSpecifications") or [])
    template_tags = convert_tag_spec(candidate.data.get("TagSpecifications") or [])
    reservation = ec2_backend.run_instances(
        candidate.data["ImageId"],
        len(slots),
        None,
        [],
        instance_type=candidate.attributes.instance_type,
        is_instance_type_default=False,
        subnet_id=candidate.subnet_id,
        placement=None if candidate.subnet_id else candidate.attributes.availability_zone,
        region_name=ec2_backend.region_name,
        launch_template=candidate.template_spec,
        fleet_id=fleet.id,
        instance_market_options=launch_market(outcome.capacity_type),
        tags={
            "instance": {**request_tags.get("instance", {}), "aws:ec2:fleet-id": fleet.id},
            "volume": {**template_tags.get("volume", {}), **request_tags.get("volume", {})},
        },
    )
    profile = _instance_profile(ec2_backend, candidate)
    if profile is not None:
        for instance in reservation.instances:
            ec2_backend.associate_iam_instance_profile(
                instance_id=instance.id, iam_instance_profile_arn=profile.arn
            )
    backend = capacity_backend(ec2_backend)
    launch_spec = (
        fleet.launch_specs[candidate.index] if candidate.index < len(fleet.launch_specs) else None
    )
    for instance, slot in zip(reservation.instances, slots, strict=True):
        market = launch_market(outcome.capacity_type)
        capacity = InstanceCapacity(slot, candidate.attributes, candidate.preference, market)
        backend.attach(instance, slot, capacity)
        set_lifecycle(instance, market)
        stamp_launch(instance)
        fleet.on_demand_instances.append(
            {"id": reservation.id, "instance": instance, "launch_spec": launch_spec}
        )
    slots.clear()
    answer = {
        "LaunchTemplateAndOverrides": candidate.launch_template_and_overrides,
        "Lifecycle": fleet_lifecycle(outcome.capacity_type),
        "InstanceIds": [instance.id for instance in reservation.instances],
        "InstanceType": candidate.attributes.instance_type,
    }
    if candidate.attributes.platform.startswith(WINDOWS):
        answer["Platform"] = "Windows"
    return answer


def _instance_profile(ec2_backend: Any, candidate: FleetCandidate) -> Any:
    """The IAM instance profile the candidate's launch template names (by Name or Arn), which
    EC2 gives each instance it launches (DescribeInstances shows it as IamInstanceProfile);
    InvalidParameterValue when IAM does not have it. None when the template names none.
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateIamInstanceProfileSpecificationRequest.html
    """
    named = candidate.data.get("IamInstanceProfile") or {}
    if not named.get("Name") and not named.get("Arn"):
        return None
    try:
        return filter_iam_instance_profiles(
            ec2_backend.account_id,
            partition=ec2_backend.partition,
            iam_instance_profile_arn=named.get("Arn"),
            iam_instance_profile_name=named.get("Name"),
        )
    except NotFoundException:
        raise InvalidIamInstanceProfile(str(named.get("Name") or named.get("Arn"))) from None


def _release_unattached(backend: Any, outcomes: list[FleetOutcome]) -> None:
    # Launched candidates cleared their slots; what is left was planned but never launched.
    backend.release_slots(
        [slot for outcome in outcomes for slots in outcome.slots.values() for slot in slots]
    )
