"""Spot launches as AWS answers them (issue 12, findings 1 and 2).

1. The policy lets CreateFleet create `spot-instances-request` resources only when the request
   carries our managed tag. CreateFleet `instant` cannot tag spot requests (botocore's ec2 model,
   CreateFleet TagSpecifications: fleet, instance, volume, network-interface); a launch template
   can (LaunchTemplateTagSpecificationRequest: instance, volume, network-interface,
   spot-instances-request). Karpenter tags them there, for spot launch templates only.
2. `AuthFailure.ServiceLinkedRoleCreationNotPermitted` (no Spot service-linked role) makes spot
   unavailable in the account for the cache's lifetime, as Karpenter's instance provider does.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import Cloud, launch_request

NO_SPOT_ROLE = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"


def _tag_specifications(cloud: Cloud, template_name: str) -> dict[str, dict[str, str]]:
    versions = cloud.ec2.describe_launch_template_versions(LaunchTemplateName=template_name)
    data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return {
        spec["ResourceType"]: {t["Key"]: t["Value"] for t in spec["Tags"]}
        for spec in data.get("TagSpecifications", [])
    }


def _template_of(fleet_input: dict[str, Any]) -> str:
    config = fleet_input["LaunchTemplateConfigs"][0]
    return str(config["LaunchTemplateSpecification"]["LaunchTemplateName"])


def _capacity_of(fleet_input: dict[str, Any]) -> str:
    return str(fleet_input["TargetCapacitySpecification"]["DefaultTargetCapacityType"])


def test_spot_launch_template_tags_the_spot_requests_as_managed(
    cloud: Cloud, subnets: dict[str, str], image: str, fleet_inputs: list[dict[str, Any]]
) -> None:
    # Given a pool that launches spot, and one that launches on-demand
    setup_pool(cloud, subnets, image, capacity_types=("spot",))
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool="od", klass="od")
    # When a request is served by each
    cloud.send(launch_request("spot-1", nodePool="general"), launch_request("od-1", nodePool="od"))
    # Then the spot fleet's launch template tags the spot requests EC2 makes, as ours
    by_capacity = {_capacity_of(f): _template_of(f) for f in fleet_inputs}
    spot_tags = _tag_specifications(cloud, by_capacity["spot"])
    assert spot_tags["spot-instances-request"]["capacity-launcher:managed"] == "true"
    assert spot_tags["spot-instances-request"] == spot_tags["volume"]
    # And an on-demand template names no spot request (EC2 refuses tags for absent resources)
    assert "spot-instances-request" not in _tag_specifications(cloud, by_capacity["on-demand"])
    assert cloud.record("spot-1").status is RequestStatus.FULFILLED  # type: ignore[union-attr]


def _spot_fleets_fail_without_the_service_linked_role(cloud: Cloud) -> list[dict[str, Any]]:
    """EC2's answer to a spot CreateFleet in an account without the Spot service-linked role:
    nothing launched, the code in Errors[] (where Karpenter reads it); on-demand fleets go on."""
    refused: list[dict[str, Any]] = []

    def answer(params: dict[str, Any], **_: Any) -> Any:
        # `params` is the serialized query-protocol request here: flattened names.
        body = params["body"]
        if body.get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot":
            return None
        refused.append(body)
        error = {
            "ErrorCode": NO_SPOT_ROLE,
            "ErrorMessage": "The provided credentials do not have permission to create the "
            "service-linked role for EC2 Spot Instances.",
            "Lifecycle": "spot",
        }
        return SimpleNamespace(status_code=200), {"FleetId": "fleet-refused", "Errors": [error]}

    aws.client("ec2").meta.events.register("before-call.ec2.CreateFleet", answer)
    return refused


def test_without_the_spot_role_spot_is_unavailable_and_the_request_goes_on(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool allowing on-demand and spot, on-demand with room for one instance,
    # in an account where spot launches fail for want of the Spot service-linked role
    setup_pool(cloud, subnets, image, capacity_types=("on-demand", "spot"))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    refused = _spot_fleets_fail_without_the_service_linked_role(cloud)
    # When a request for three is served
    cloud.send(launch_request("no-spot-role-1", nodePool="general", count=3))
    # Then it keeps what on-demand gave, and its record says why spot did not help
    record = cloud.record("no-spot-role-1")
    assert record is not None
    assert (record.status, record.launched) == (RequestStatus.PARTIALLY_FULFILLED, 1)
    assert NO_SPOT_ROLE in {e.code for e in record.errors}
    spot_reasons = {u.reason for u in record.unavailable_offerings if u.capacity_type == "spot"}
    assert spot_reasons == {NO_SPOT_ROLE}
    assert len(refused) == 1
    # And every spot offering is cached as unavailable under the capacity type alone
    table = aws.client("dynamodb").get_item(
        TableName=get_settings().unavailable_offerings_table_name, Key={"offering": {"S": "spot"}}
    )
    assert table["Item"]["reason"]["S"] == NO_SPOT_ROLE

    # When, within the cache's lifetime, a fresh worker serves a pool of another instance type
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand", "spot"),
        types=("c5.large",),
        pool="other",
        klass="other",
    )
    moto_capacity.set_capacity("us-east-1", "c5.large", ZONE, "on-demand", 1)
    second_request = launch_request("no-spot-role-2", nodePool="other", count=2)
    cloud.send(second_request, batch=cloud.fresh_batch())
    # Then spot is not asked again (for any offering), on-demand still serves, and the record
    # says why
    second = cloud.record("no-spot-role-2")
    assert second is not None
    assert (second.status, second.launched) == (RequestStatus.PARTIALLY_FULFILLED, 1)
    assert len(refused) == 1
    skipped = {u.reason for u in second.unavailable_offerings if u.capacity_type == "spot"}
    assert skipped == {NO_SPOT_ROLE}


def test_without_the_spot_role_a_spot_only_request_fails_with_the_code(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a spot-only pool, and the code raised for the whole CreateFleet call
    setup_pool(cloud, subnets, image, capacity_types=("spot",))
    moto_capacity.inject_fault("ec2:CreateFleet", NO_SPOT_ROLE, times=1)
    # When a request is served
    cloud.send(launch_request("spot-only-1", nodePool="general"))
    # Then it fails with EC2's code (not a crash, not a retry), and spot is cached as unavailable
    record = cloud.record("spot-only-1")
    assert record is not None
    assert record.status is RequestStatus.FAILED
    assert [e.code for e in record.errors] == [NO_SPOT_ROLE]
    assert {u.reason for u in record.unavailable_offerings} == {NO_SPOT_ROLE}
