"""EC2 Fleet (instant): launching, describing where instances landed, and terminating them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client, error_code, error_message
from capacity_launcher.domain.errors import LaunchFailed, classify, retryable_error
from capacity_launcher.domain.fleet import FleetError, FleetResult, InstanceLanding
from capacity_launcher.domain.offerings import RESERVED, SPOT, CapacityType


class Fleet:
    def __init__(self, ec2: Any | None = None) -> None:
        self._ec2 = ec2 or client("ec2")

    def create(self, request: Mapping[str, Any]) -> FleetResult:
        """CreateFleet with the exact input given (replayable: same ClientToken, same answer)."""
        try:
            response = self._ec2.create_fleet(**request)
        except ClientError as error:
            raise _domain_error("CreateFleet", error) from error
        instance_ids = tuple(
            instance_id
            for group in response.get("Instances", [])
            for instance_id in group.get("InstanceIds", [])
        )
        errors = tuple(_fleet_error(e) for e in response.get("Errors", []))
        return FleetResult(response.get("FleetId"), instance_ids, errors)

    def describe(self, instance_ids: Sequence[str]) -> list[InstanceLanding]:
        if not instance_ids:
            return []
        try:
            pages = self._ec2.get_paginator("describe_instances").paginate(
                InstanceIds=list(instance_ids)
            )
            instances = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
        except ClientError as error:
            raise _domain_error("DescribeInstances", error) from error
        return [_landing(i) for i in instances]

    def terminate(self, instance_ids: Sequence[str]) -> None:
        if not instance_ids:
            return
        try:
            self._ec2.terminate_instances(InstanceIds=list(instance_ids))
        except ClientError as error:
            raise _domain_error("TerminateInstances", error) from error

    def tag(self, instance_ids: Sequence[str], tags: Mapping[str, str]) -> None:
        try:
            self._ec2.create_tags(
                Resources=list(instance_ids),
                Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
            )
        except ClientError as error:
            raise _domain_error("CreateTags", error) from error

    def find_managed(self, tag_filters: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Instances tagged `capacity-launcher:managed=true`, terminated ones too (EC2 lists them
        for about an hour: reconciliation then knows they are gone, not described late)."""
        filters = [{"Name": "tag:capacity-launcher:managed", "Values": ["true"]}]
        filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in (tag_filters or {}).items()]
        try:
            pages = self._ec2.get_paginator("describe_instances").paginate(Filters=filters)
            return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
        except ClientError as error:
            raise _domain_error("DescribeInstances", error) from error


def _fleet_error(raw: Mapping[str, Any]) -> FleetError:
    overrides = raw.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
    return FleetError(
        code=str(raw.get("ErrorCode", "Unknown")),
        message=str(raw.get("ErrorMessage", "")),
        instance_type=overrides.get("InstanceType"),
        zone=overrides.get("AvailabilityZone"),
        subnet_id=overrides.get("SubnetId"),
    )


def _landing(raw: Mapping[str, Any]) -> InstanceLanding:
    reservation_id = raw.get("CapacityReservationId")
    capacity_type: CapacityType = "on-demand"
    if raw.get("InstanceLifecycle") == "spot":
        capacity_type = SPOT
    elif reservation_id:
        capacity_type = RESERVED
    return InstanceLanding(
        instance_id=raw["InstanceId"],
        instance_type=raw["InstanceType"],
        zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
        capacity_type=capacity_type,
        capacity_reservation_id=reservation_id,
        state=raw.get("State", {}).get("Name", "pending"),
    )


def _domain_error(operation: str, error: ClientError) -> Exception:
    code = error_code(error)
    kind = classify(code)
    if kind.retryable:
        return retryable_error(operation, code, kind)
    return LaunchFailed(code, error_message(error))
