"""CreateFleet `instant`: per-override errors, strategies, reservations, all-or-nothing, tokens."""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

REGION = "us-east-1"


@pytest.fixture
def fleet(ec2: Any) -> Callable[..., dict[str, Any]]:
    """CreateFleet instant, on-demand, with one LaunchTemplateConfig."""

    def create(
        template: str, overrides: list[dict[str, Any]], target: int = 1, **extra: Any
    ) -> Any:
        return ec2.create_fleet(
            Type="instant",
            TargetCapacitySpecification={
                "TotalTargetCapacity": target,
                "DefaultTargetCapacityType": extra.pop("capacity_type", "on-demand"),
            },
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": template,
                        "Version": "$Latest",
                    },
                    "Overrides": overrides,
                }
            ],
            **extra,
        )

    return create


def _override(
    instance_type: str, zone: str, subnets: dict[str, str], **extra: Any
) -> dict[str, Any]:
    return {
        "InstanceType": instance_type,
        "SubnetId": subnets[zone],
        "AvailabilityZone": zone,
        **extra,
    }


def _instance_ids(answer: dict[str, Any]) -> list[str]:
    return [i for group in answer["Instances"] for i in group["InstanceIds"]]


def test_dry_override_returns_an_error_entry_and_the_fleet_launches_elsewhere(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given us-east-1a has no m5.large
    moto_capacity.set_capacity(REGION, "m5.large", "us-east-1a", "on-demand", 0)
    dry = _override("m5.large", "us-east-1a", default_subnets)
    wet = _override("m5.large", "us-east-1b", default_subnets)

    # When
    answer = fleet(launch_template(), [dry, wet], target=2)

    # Then
    assert len(answer["Errors"]) == 1
    error = answer["Errors"][0]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["Lifecycle"] == "on-demand"
    assert error["LaunchTemplateAndOverrides"]["Overrides"] == dry
    assert error["LaunchTemplateAndOverrides"]["LaunchTemplateSpecification"]["Version"] == "1"
    assert len(answer["Instances"]) == 1
    group = answer["Instances"][0]
    assert group["LaunchTemplateAndOverrides"]["Overrides"] == wet
    assert group["Lifecycle"] == "on-demand"
    assert group["InstanceType"] == "m5.large"
    assert len(group["InstanceIds"]) == 2


def test_partially_available_pool_launches_what_fits_and_reports_the_rest(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given one m5.large left in us-east-1a
    moto_capacity.set_capacity(REGION, "m5.large", "us-east-1a", "on-demand", 1)

    # When
    answer = fleet(
        launch_template(), [_override("m5.large", "us-east-1a", default_subnets)], target=3
    )

    # Then
    assert len(_instance_ids(answer)) == 1
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"]


def test_lowest_price_launches_the_cheapest_override_first(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given m5.large (0.096) listed before c5.large (0.085)
    overrides = [
        _override("m5.large", "us-east-1a", default_subnets),
        _override("c5.large", "us-east-1a", default_subnets),
    ]

    # When
    answer = fleet(
        launch_template(), overrides, OnDemandOptions={"AllocationStrategy": "lowest-price"}
    )

    # Then
    assert [group["InstanceType"] for group in answer["Instances"]] == ["c5.large"]


def test_prioritized_launches_the_lowest_priority_number_first(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    overrides = [
        _override("c5.large", "us-east-1a", default_subnets, Priority=2.0),
        _override("m5.large", "us-east-1a", default_subnets, Priority=1.0),
    ]
    answer = fleet(
        launch_template(), overrides, OnDemandOptions={"AllocationStrategy": "prioritized"}
    )
    assert [group["InstanceType"] for group in answer["Instances"]] == ["m5.large"]


def test_use_capacity_reservations_first_fills_reservations_before_the_strategy(
    fleet: Any, launch_template: Any, reservation: Any, default_subnets: dict[str, str]
) -> None:
    # Given an open m5.large reservation; c5.large is cheaper
    rid = reservation(InstanceCount=1)["CapacityReservationId"]
    overrides = [
        _override("c5.large", "us-east-1a", default_subnets),
        _override("m5.large", "us-east-1a", default_subnets),
    ]
    options = {
        "AllocationStrategy": "lowest-price",
        "CapacityReservationOptions": {"UsageStrategy": "use-capacity-reservations-first"},
    }

    # When
    answer = fleet(launch_template(), overrides, target=2, OnDemandOptions=options)

    # Then one lands in the reservation, the other in the cheapest pool
    by_type = {group["InstanceType"]: group["InstanceIds"] for group in answer["Instances"]}
    assert len(by_type["m5.large"]) == 1
    assert len(by_type["c5.large"]) == 1
    assert moto_capacity.state()["reservations"][0]["instanceIds"] == by_type["m5.large"]
    assert moto_capacity.state()["reservations"][0]["capacityReservationId"] == rid


def test_reservations_only_template_on_a_full_reservation_fails_with_reservation_capacity_exceeded(
    fleet: Any, launch_template: Any, reservation: Any, default_subnets: dict[str, str]
) -> None:
    # Given a template that may only use a one-slot reservation
    rid = reservation(InstanceCount=1, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    template = launch_template(
        CapacityReservationSpecification={
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": rid},
        }
    )

    # When asking for two
    answer = fleet(template, [_override("m5.large", "us-east-1a", default_subnets)], target=2)

    # Then one lands in the reservation, and no On-Demand fallback happens
    assert len(_instance_ids(answer)) == 1
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["ReservationCapacityExceeded"]


def test_template_targeting_a_group_launches_into_its_reservation(
    ec2: Any,
    fleet: Any,
    launch_template: Any,
    reservation: Any,
    capacity_group: Any,
    default_subnets: dict[str, str],
) -> None:
    # Given
    member = reservation(InstanceMatchCriteria="targeted")
    group_arn = capacity_group(member["CapacityReservationArn"])
    template = launch_template(
        CapacityReservationSpecification={
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group_arn},
        }
    )

    # When
    answer = fleet(template, [_override("m5.large", "us-east-1a", default_subnets)], target=2)

    # Then
    described = ec2.describe_instances(InstanceIds=_instance_ids(answer))["Reservations"]
    instances = [i for r in described for i in r["Instances"]]
    assert {i["CapacityReservationId"] for i in instances} == {member["CapacityReservationId"]}
    assert answer["Errors"] == []


def test_min_target_capacity_with_single_availability_zone_is_all_or_nothing(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given one free m5.large in each of two zones
    for zone in ("us-east-1a", "us-east-1b"):
        moto_capacity.set_capacity(REGION, "m5.large", zone, "on-demand", 1)
    overrides = [_override("m5.large", z, default_subnets) for z in ("us-east-1a", "us-east-1b")]
    options = {"SingleAvailabilityZone": True, "MinTargetCapacity": 2}

    # When two are needed in one zone
    answer = fleet(launch_template(), overrides, target=2, OnDemandOptions=options)

    # Then nothing launches, and the pools still hold their capacity
    assert answer["Instances"] == []
    assert {e["ErrorCode"] for e in answer["Errors"]} == {"InsufficientInstanceCapacity"}
    assert {p["count"] for p in moto_capacity.state()["pools"]} == {1}


def test_min_target_capacity_with_single_instance_type_picks_a_type_that_fits(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given c5.large (cheapest) has one left, m5.large has plenty
    moto_capacity.set_capacity(REGION, "c5.large", "us-east-1a", "on-demand", 1)
    overrides = [
        _override("c5.large", "us-east-1a", default_subnets),
        _override("m5.large", "us-east-1a", default_subnets),
    ]
    options = {"SingleInstanceType": True, "MinTargetCapacity": 2}

    # When
    answer = fleet(launch_template(), overrides, target=2, OnDemandOptions=options)

    # Then all land on one type
    assert [(g["InstanceType"], len(g["InstanceIds"])) for g in answer["Instances"]] == [
        ("m5.large", 2)
    ]


def test_min_target_capacity_without_a_single_pool_option_is_invalid(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    with pytest.raises(ClientError) as error:
        fleet(
            launch_template(),
            [_override("m5.large", "us-east-1a", default_subnets)],
            OnDemandOptions={"MinTargetCapacity": 1},
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_same_client_token_and_input_returns_the_same_fleet_and_launches_nothing_new(
    ec2: Any, fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given
    template = launch_template()
    overrides = [_override("m5.large", "us-east-1a", default_subnets)]
    first = fleet(template, overrides, target=2, ClientToken="request-42")

    # When
    again = fleet(template, overrides, target=2, ClientToken="request-42")

    # Then
    assert again["FleetId"] == first["FleetId"]
    assert _instance_ids(again) == _instance_ids(first)
    running = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
    )
    assert sum(len(r["Instances"]) for r in running["Reservations"]) == 2


def test_same_client_token_with_other_input_fails_with_idempotent_parameter_mismatch(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    template = launch_template()
    overrides = [_override("m5.large", "us-east-1a", default_subnets)]
    fleet(template, overrides, target=1, ClientToken="request-43")
    with pytest.raises(ClientError) as error:
        fleet(template, overrides, target=2, ClientToken="request-43")
    assert error.value.response["Error"]["Code"] == "IdempotentParameterMismatch"


def test_tag_specifications_tag_the_instances_volumes_and_fleet(
    ec2: Any, fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given
    tags = [{"Key": "capacity-launcher:request-id", "Value": "r-1"}]
    spec = [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "fleet")]
    template = launch_template(TagSpecifications=[{"ResourceType": "volume", "Tags": tags}])

    # When
    answer = fleet(
        template, [_override("m5.large", "us-east-1a", default_subnets)], TagSpecifications=spec
    )

    # Then
    instance = ec2.describe_instances(InstanceIds=_instance_ids(answer))["Reservations"][0][
        "Instances"
    ][0]
    assert {"Key": "capacity-launcher:request-id", "Value": "r-1"} in instance["Tags"]
    assert {"Key": "aws:ec2:fleet-id", "Value": answer["FleetId"]} in instance["Tags"]
    volume_id = instance["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]
    volume = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"][0]
    assert {"Key": "capacity-launcher:request-id", "Value": "r-1"} in volume["Tags"]
    described = ec2.describe_fleets(FleetIds=[answer["FleetId"]])["Fleets"][0]
    assert described["Tags"] == tags


def test_spot_fleet_launches_spot_lifecycle_and_reports_a_dry_spot_pool(
    ec2: Any, fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # Given spot m5.large is gone in us-east-1a
    moto_capacity.set_capacity(REGION, "m5.large", "us-east-1a", "spot", 0)
    overrides = [_override("m5.large", z, default_subnets) for z in ("us-east-1a", "us-east-1b")]

    # When
    answer = fleet(launch_template(), overrides, capacity_type="spot")

    # Then
    assert [(e["ErrorCode"], e["Lifecycle"]) for e in answer["Errors"]] == [
        ("InsufficientInstanceCapacity", "spot")
    ]
    assert answer["Instances"][0]["Lifecycle"] == "spot"
    instance = ec2.describe_instances(InstanceIds=_instance_ids(answer))["Reservations"][0][
        "Instances"
    ][0]
    assert instance["InstanceLifecycle"] == "spot"


def test_an_override_whose_image_does_not_exist_launches_nothing_and_reports_invalid_ami(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str]
) -> None:
    # CreateFleetError (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # API_CreateFleetError.html): an override that launched nothing has EC2's error code;
    # errors-overview.html: InvalidAMIID.NotFound, the AMI does not exist.
    # Given a template naming an image this account and region do not have
    missing = launch_template(ImageId="ami-00000000000000000")
    known = launch_template()

    # When
    lost = fleet(missing, [_override("m5.large", "us-east-1a", default_subnets)])
    served = fleet(known, [_override("m5.large", "us-east-1a", default_subnets)])

    # Then the unknown image launches nothing and names the image; a known one launches
    assert lost["Instances"] == []
    (error,) = lost["Errors"]
    assert error["ErrorCode"] == "InvalidAMIID.NotFound"
    assert "ami-00000000000000000" in error["ErrorMessage"]
    assert len(_instance_ids(served)) == 1


def test_an_override_whose_type_cannot_run_the_image_architecture_reports_invalid_parameter(
    fleet: Any, launch_template: Any, default_subnets: dict[str, str], arm64_ami: str
) -> None:
    # CreateFleetError (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # API_CreateFleetError.html): each override that launched nothing has its error; the AMI's
    # Architecture (API_Image.html) must be in the type's ProcessorInfo.SupportedArchitectures
    # (API_ProcessorInfo.html), else InvalidParameterValue (errors-overview.html).
    # Given an arm64 image and two overrides: x86_64-only c5.large, arm64 m6g.large
    template = launch_template(ImageId=arm64_ami)
    overrides = [
        _override("c5.large", "us-east-1a", default_subnets, Priority=1.0),
        _override("m6g.large", "us-east-1a", default_subnets, Priority=2.0),
    ]

    # When c5.large is tried first
    answer = fleet(template, overrides, OnDemandOptions={"AllocationStrategy": "prioritized"})

    # Then c5.large fails naming both architectures, and m6g.large launches
    (error,) = answer["Errors"]
    assert error["ErrorCode"] == "InvalidParameterValue"
    assert error["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"] == "c5.large"
    assert "'x86_64' of the specified instance type" in error["ErrorMessage"]
    assert "'arm64' of the specified AMI" in error["ErrorMessage"]
    (launched,) = answer["Instances"]
    assert launched["InstanceType"] == "m6g.large"
