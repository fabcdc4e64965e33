"""Instant EC2 Fleets into reserved capacity: Capacity Blocks (one per fleet, by its own id,
insufficient capacity before it starts) and `reserved-capacity` with ReservedCapacityOptions,
as botocore's CreateFleet model has them (ReservationTypes in order, the on-demand fallback,
the Lifecycle values of the answer)."""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

BLOCK_TYPE = "p5.48xlarge"
BLOCK_MARKET = {"MarketType": "capacity-block"}


@pytest.fixture
def buy_block(ec2: Any) -> Callable[[], dict[str, Any]]:
    """Buy the next 1-day block of 2 x p5.48xlarge that has not been sold yet."""

    def buy() -> dict[str, Any]:
        offerings = ec2.describe_capacity_block_offerings(
            InstanceType=BLOCK_TYPE, InstanceCount=2, CapacityDurationHours=24
        )["CapacityBlockOfferings"]
        answer = ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offerings[0]["CapacityBlockOfferingId"],
            InstancePlatform="Linux/UNIX",
        )
        return answer["CapacityReservation"]  # type: ignore[no-any-return]

    return buy


def _block_template(launch_template: Callable[..., str], target: dict[str, str], zone: str) -> str:
    return launch_template(
        InstanceType=BLOCK_TYPE,
        Placement={"AvailabilityZone": zone},
        InstanceMarketOptions=BLOCK_MARKET,
        CapacityReservationSpecification={"CapacityReservationTarget": target},
    )


def _fleet(ec2: Any, templates: list[str], default: str, total: int = 2, **extra: Any) -> Any:
    return ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {"LaunchTemplateSpecification": {"LaunchTemplateName": name}} for name in templates
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": total,
            "DefaultTargetCapacityType": default,
        },
        **extra,
    )


def test_a_block_fleet_answers_lifecycle_capacity_block(
    ec2: Any,
    buy_block: Callable[[], dict[str, Any]],
    launch_template: Callable[..., str],
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleetInstance.html:
    Lifecycle says whether the instances are Spot, On-Demand, Capacity Block or interruptible
    (botocore's InstanceLifecycle enum has `capacity-block`)."""
    block = buy_block()
    advance_to(block["StartDate"], 1)
    target = {"CapacityReservationId": block["CapacityReservationId"]}
    template = _block_template(launch_template, target, block["AvailabilityZone"])

    fleet = _fleet(ec2, [template], "capacity-block")

    assert fleet["Errors"] == []
    assert [i["Lifecycle"] for i in fleet["Instances"]] == ["capacity-block"]


def test_a_block_fleet_through_a_group_is_refused_per_override(
    ec2: Any,
    buy_block: Callable[[], dict[str, Any]],
    launch_template: Callable[..., str],
    capacity_group: Callable[..., str],
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html: a launch
    into a Capacity Block must name the block's reservation id; through a group (even one
    holding only the block) nothing launches and the override's error is InvalidParameterValue
    (CreateFleetError)."""
    block = buy_block()
    advance_to(block["StartDate"], 1)
    group = capacity_group(block["CapacityReservationArn"])
    template = _block_template(
        launch_template, {"CapacityReservationResourceGroupArn": group}, block["AvailabilityZone"]
    )

    fleet = _fleet(ec2, [template], "capacity-block")

    assert fleet["Instances"] == []
    assert [(e["ErrorCode"], e["Lifecycle"]) for e in fleet["Errors"]] == [
        ("InvalidParameterValue", "capacity-block")
    ]


def test_a_fleet_launches_into_one_block_only(
    ec2: Any,
    buy_block: Callable[[], dict[str, Any]],
    launch_template: Callable[..., str],
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-capacity-blocks-walkthrough.html:
    an EC2 Fleet targets one Capacity Block reservation; templates naming two are refused."""
    first, second = buy_block(), buy_block()
    advance_to(max(first["StartDate"], second["StartDate"]), 1)
    templates = [
        _block_template(
            launch_template,
            {"CapacityReservationId": b["CapacityReservationId"]},
            b["AvailabilityZone"],
        )
        for b in (first, second)
    ]

    with pytest.raises(ClientError) as error:
        _fleet(ec2, templates, "capacity-block", total=4)

    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "one Capacity Block" in error.value.response["Error"]["Message"]


def test_a_block_that_has_not_started_answers_insufficient_capacity(
    ec2: Any, buy_block: Callable[[], dict[str, Any]], launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-capacity-blocks-walkthrough.html:
    "If you make requests to EC2 Fleet to launch into a Capacity Block that hasn't started yet,
    you will receive an Insufficient Capacity Error" (not InvalidParameterValue)."""
    block = buy_block()
    target = {"CapacityReservationId": block["CapacityReservationId"]}
    template = _block_template(launch_template, target, block["AvailabilityZone"])

    fleet = _fleet(ec2, [template], "capacity-block")

    assert fleet["Instances"] == []
    assert [e["ErrorCode"] for e in fleet["Errors"]] == ["InsufficientInstanceCapacity"]


def test_reserved_capacity_options_need_the_reserved_capacity_target_type(
    ec2: Any, launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ReservedCapacityOptionsRequest.html:
    "When you specify ReservedCapacityOptions, you must also set DefaultTargetCapacityType to
    reserved-capacity"; reserved-capacity launches into the ReservationTypes it is given, so it
    needs at least one."""
    template = launch_template(InstanceType="m5.large")
    options = {"ReservationTypes": ["interruptible-capacity-reservation"]}

    with pytest.raises(ClientError) as mixed:
        _fleet(ec2, [template], "on-demand", ReservedCapacityOptions=options)
    with pytest.raises(ClientError) as typeless:
        _fleet(ec2, [template], "reserved-capacity")

    assert mixed.value.response["Error"]["Code"] == "InvalidParameterCombination"
    assert typeless.value.response["Error"]["Code"] == "MissingParameter"


def test_reservation_types_in_order_then_the_on_demand_fallback(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    launch_template: Callable[..., str],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ReservedCapacityOptionsRequest.html:
    ReservationTypes is an ordered list; ReservedCapacityFallbackOptions MarketTypes on-demand
    launches the rest On-Demand, and without it the fleet does not fall back. An error of the
    on-demand-capacity-reservation type says that Lifecycle (API_CreateFleetError.html)."""
    odcr = reservation(InstanceCount=2)
    template = launch_template(
        InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}
    )
    types = {"ReservationTypes": ["on-demand-capacity-reservation"]}

    no_fallback = _fleet(ec2, [template], "reserved-capacity", 3, ReservedCapacityOptions=types)
    launched = [i for group in no_fallback["Instances"] for i in group["InstanceIds"]]
    assert len(launched) == 2
    assert [i["Lifecycle"] for i in no_fallback["Instances"]] == ["on-demand"]
    assert [(e["ErrorCode"], e["Lifecycle"]) for e in no_fallback["Errors"]] == [
        ("ReservationCapacityExceeded", "on-demand-capacity-reservation")
    ]
    described = ec2.describe_instances(InstanceIds=launched)["Reservations"]
    assert {i["CapacityReservationId"] for r in described for i in r["Instances"]} == {
        odcr["CapacityReservationId"]
    }

    fallback = {**types, "ReservedCapacityFallbackOptions": {"MarketTypes": ["on-demand"]}}
    with_fallback = _fleet(
        ec2, [template], "reserved-capacity", 3, ReservedCapacityOptions=fallback
    )
    assert sum(len(g["InstanceIds"]) for g in with_fallback["Instances"]) == 3
