"""RunInstances placement, as "Launch instances into an existing Capacity Reservation" says."""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

ZONE = "us-east-1a"


@pytest.fixture
def launch(ec2: Any, linux_ami: str) -> Callable[..., dict[str, Any]]:
    """RunInstances of m5.large in us-east-1a, one instance, unless told otherwise."""

    def run(count: int = 1, **overrides: Any) -> dict[str, Any]:
        request = {
            "ImageId": linux_ami,
            "MinCount": count,
            "MaxCount": count,
            "InstanceType": "m5.large",
            "Placement": {"AvailabilityZone": ZONE},
            **overrides,
        }
        return ec2.run_instances(**request)  # type: ignore[no-any-return]

    return run


def _target(reservation_id: str) -> dict[str, Any]:
    return {"CapacityReservationTarget": {"CapacityReservationId": reservation_id}}


def _error_code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_open_preference_uses_a_matching_open_reservation(
    launch: Any, reservation: Any, available_count: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]

    # When
    instance = launch()["Instances"][0]

    # Then
    assert instance["CapacityReservationId"] == rid
    assert instance["CapacityReservationSpecification"] == {"CapacityReservationPreference": "open"}
    assert available_count(rid) == 1


def test_open_preference_falls_back_to_on_demand_when_the_reservation_is_full(
    launch: Any, reservation: Any
) -> None:
    # Given a reservation of two
    rid = reservation()["CapacityReservationId"]

    # When three are launched
    instances = launch(count=3)["Instances"]

    # Then two run in the reservation, one On-Demand
    assert sorted(i.get("CapacityReservationId", "on-demand") for i in instances) == sorted(
        [rid, rid, "on-demand"]
    )


@pytest.mark.parametrize(
    "attribute",
    [
        {"InstanceType": "c5.large"},
        {"Placement": {"AvailabilityZone": "us-east-1b"}},
        {"Placement": {"AvailabilityZone": ZONE, "Tenancy": "dedicated"}},
    ],
    ids=["instance-type", "zone", "tenancy"],
)
def test_open_preference_ignores_a_reservation_with_other_attributes(
    launch: Any, reservation: Any, attribute: dict[str, Any]
) -> None:
    # Given
    reservation()

    # When
    instance = launch(**attribute)["Instances"][0]

    # Then
    assert "CapacityReservationId" not in instance


def test_open_preference_ignores_a_reservation_for_another_platform(
    launch: Any, reservation: Any, windows_ami: str
) -> None:
    reservation()
    instance = launch(ImageId=windows_ami)["Instances"][0]
    assert "CapacityReservationId" not in instance


def test_none_preference_never_uses_a_reservation(launch: Any, reservation: Any) -> None:
    # Given
    reservation()

    # When
    spec = {"CapacityReservationPreference": "none"}
    instance = launch(CapacityReservationSpecification=spec)["Instances"][0]

    # Then
    assert "CapacityReservationId" not in instance
    assert instance["CapacityReservationSpecification"] == spec


def test_targeted_reservation_is_used_only_when_targeted_explicitly(
    launch: Any, reservation: Any
) -> None:
    # Given
    rid = reservation(InstanceMatchCriteria="targeted")["CapacityReservationId"]

    # When
    untargeted = launch()["Instances"][0]
    targeted = launch(CapacityReservationSpecification=_target(rid))["Instances"][0]

    # Then
    assert "CapacityReservationId" not in untargeted
    assert targeted["CapacityReservationId"] == rid
    assert targeted["CapacityReservationSpecification"] == _target(rid)


def test_targeted_reservation_without_free_capacity_fails_with_reservation_capacity_exceeded(
    launch: Any, reservation: Any
) -> None:
    # Given a full reservation
    rid = reservation(InstanceCount=1)["CapacityReservationId"]
    launch(CapacityReservationSpecification=_target(rid))

    # When / Then
    with pytest.raises(ClientError) as error:
        launch(CapacityReservationSpecification=_target(rid))
    assert _error_code(error) == "ReservationCapacityExceeded"


def test_targeted_reservation_with_other_attributes_fails_with_invalid_parameter_value(
    launch: Any, reservation: Any
) -> None:
    rid = reservation()["CapacityReservationId"]
    with pytest.raises(ClientError) as error:
        launch(InstanceType="c5.large", CapacityReservationSpecification=_target(rid))
    assert _error_code(error) == "InvalidParameterValue"


def test_targeted_reservation_that_is_not_active_fails(
    ec2: Any, launch: Any, reservation: Any
) -> None:
    rid = reservation()["CapacityReservationId"]
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    with pytest.raises(ClientError) as error:
        launch(CapacityReservationSpecification=_target(rid))
    assert _error_code(error) == "InvalidParameterValue"


def test_targeted_reservation_that_does_not_exist_fails_with_not_found(launch: Any) -> None:
    with pytest.raises(ClientError) as error:
        launch(CapacityReservationSpecification=_target("cr-0123456789abcdef0"))
    assert _error_code(error) == "InvalidCapacityReservationId.NotFound"


def test_group_target_uses_a_matching_reservation_in_the_group(
    launch: Any, reservation: Any, capacity_group: Any
) -> None:
    # Given a targeted reservation for c5.large and one for m5.large, both in the group
    other = reservation(InstanceType="c5.large", InstanceMatchCriteria="targeted")
    member = reservation(InstanceMatchCriteria="targeted")
    group_arn = capacity_group(other["CapacityReservationArn"], member["CapacityReservationArn"])

    # When
    spec = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group_arn}}
    instance = launch(CapacityReservationSpecification=spec)["Instances"][0]

    # Then
    assert instance["CapacityReservationId"] == member["CapacityReservationId"]
    assert instance["CapacityReservationSpecification"] == spec


def test_group_target_without_capacity_falls_back_to_on_demand(
    launch: Any, reservation: Any, capacity_group: Any
) -> None:
    # Given a group whose only reservation has one slot
    member = reservation(InstanceCount=1)
    group_arn = capacity_group(member["CapacityReservationArn"])
    spec = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group_arn}}

    # When
    instances = launch(count=2, CapacityReservationSpecification=spec)["Instances"]

    # Then
    assert sorted(i.get("CapacityReservationId", "on-demand") for i in instances) == sorted(
        [member["CapacityReservationId"], "on-demand"]
    )


def test_capacity_reservations_only_with_a_group_target_fails_instead_of_falling_back(
    launch: Any, reservation: Any, capacity_group: Any
) -> None:
    # Given an empty group
    group_arn = capacity_group()
    spec = {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group_arn},
    }

    # When / Then
    with pytest.raises(ClientError) as error:
        launch(CapacityReservationSpecification=spec)
    assert _error_code(error) == "ReservationCapacityExceeded"


def test_capacity_reservations_only_with_an_id_target_fails_instead_of_falling_back(
    launch: Any, reservation: Any
) -> None:
    rid = reservation(InstanceCount=1)["CapacityReservationId"]
    spec = {"CapacityReservationPreference": "capacity-reservations-only", **_target(rid)}
    with pytest.raises(ClientError) as error:
        launch(count=2, CapacityReservationSpecification=spec)
    assert _error_code(error) == "ReservationCapacityExceeded"


def test_launch_template_capacity_reservation_specification_is_honoured(
    launch: Any, reservation: Any, launch_template: Any
) -> None:
    # Given a template targeting a reservation
    rid = reservation(InstanceMatchCriteria="targeted")["CapacityReservationId"]
    name = launch_template(CapacityReservationSpecification=_target(rid))

    # When
    instance = launch(LaunchTemplate={"LaunchTemplateName": name})["Instances"][0]

    # Then
    assert instance["CapacityReservationId"] == rid


def test_describe_instances_reports_reservation_id_and_specification(
    ec2: Any, launch: Any, reservation: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]
    instance_id = launch()["Instances"][0]["InstanceId"]

    # When
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]

    # Then
    assert described["CapacityReservationId"] == rid
    assert described["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "open"
    }


def test_terminating_an_instance_frees_its_reservation_slot(
    ec2: Any, launch: Any, reservation: Any, available_count: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]
    instance_id = launch()["Instances"][0]["InstanceId"]

    # When
    ec2.terminate_instances(InstanceIds=[instance_id])

    # Then
    assert available_count(rid) == 2


def test_stopping_an_instance_frees_its_slot_and_starting_takes_one_again(
    ec2: Any, launch: Any, reservation: Any, available_count: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]
    instance_id = launch()["Instances"][0]["InstanceId"]

    # When / Then
    ec2.stop_instances(InstanceIds=[instance_id])
    assert available_count(rid) == 2
    ec2.start_instances(InstanceIds=[instance_id])
    assert available_count(rid) == 1


def test_dry_on_demand_pool_fails_with_insufficient_instance_capacity(launch: Any) -> None:
    # Given
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)

    # When / Then
    with pytest.raises(ClientError) as error:
        launch()
    assert _error_code(error) == "InsufficientInstanceCapacity"


def test_finite_pool_launches_between_min_and_max_count(
    launch: Any, ec2: Any, linux_ami: str
) -> None:
    # Given two instances of capacity
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 2)

    # When asking for at least one, at most five
    instances = ec2.run_instances(
        ImageId=linux_ami,
        MinCount=1,
        MaxCount=5,
        InstanceType="m5.large",
        Placement={"AvailabilityZone": ZONE},
    )["Instances"]

    # Then two launch, and the pool is dry
    assert len(instances) == 2
    with pytest.raises(ClientError) as error:
        launch()
    assert _error_code(error) == "InsufficientInstanceCapacity"


def test_terminating_an_instance_from_a_finite_pool_gives_its_capacity_back(
    ec2: Any, launch: Any
) -> None:
    # Given a pool of one, used
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    instance_id = launch()["Instances"][0]["InstanceId"]

    # When
    ec2.terminate_instances(InstanceIds=[instance_id])

    # Then
    assert launch()["Instances"][0]["InstanceId"] != instance_id


def test_spot_launch_uses_the_spot_pool_and_never_a_reservation(
    launch: Any, reservation: Any
) -> None:
    # Given an open reservation and a dry spot pool
    reservation()
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "spot", 0)

    # When / Then
    with pytest.raises(ClientError) as error:
        launch(InstanceMarketOptions={"MarketType": "spot"})
    assert _error_code(error) == "InsufficientInstanceCapacity"


@pytest.mark.parametrize("via", ["SubnetId", "NetworkInterfaces"])
def test_the_subnet_decides_the_zone_a_reservation_must_match(
    launch: Any, reservation: Any, default_subnets: dict[str, str], via: str
) -> None:
    # Given a reservation in us-east-1b
    rid = reservation(AvailabilityZone="us-east-1b")["CapacityReservationId"]
    subnet = default_subnets["us-east-1b"]
    where = (
        {"SubnetId": subnet}
        if via == "SubnetId"
        else {"NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": subnet}]}
    )

    # When launching into its zone's subnet, without naming the zone
    instance = launch(Placement={}, **where)["Instances"][0]

    # Then
    assert instance["Placement"]["AvailabilityZone"] == "us-east-1b"
    assert instance["CapacityReservationId"] == rid


def test_capacity_reservations_only_without_a_target_uses_open_reservations_or_fails(
    launch: Any, reservation: Any
) -> None:
    # Given one open slot
    rid = reservation(InstanceCount=1)["CapacityReservationId"]
    spec = {"CapacityReservationPreference": "capacity-reservations-only"}

    # When / Then the first launch takes it, the second fails instead of going On-Demand
    assert (
        launch(CapacityReservationSpecification=spec)["Instances"][0]["CapacityReservationId"]
        == rid
    )
    with pytest.raises(ClientError) as error:
        launch(CapacityReservationSpecification=spec)
    assert _error_code(error) == "ReservationCapacityExceeded"


def test_an_image_that_does_not_exist_is_refused_with_invalid_ami_id_not_found(
    launch: Any, ec2: Any
) -> None:
    # RunInstances, errors-overview (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # errors-overview.html): InvalidAMIID.NotFound when the AMI does not exist.
    with pytest.raises(ClientError) as refused:
        launch(ImageId="ami-00000000000000000")

    assert refused.value.response["Error"]["Code"] == "InvalidAMIID.NotFound"
    assert "ami-00000000000000000" in refused.value.response["Error"]["Message"]
    assert ec2.describe_instances()["Reservations"] == []


def test_a_malformed_image_id_is_refused_with_invalid_ami_id_malformed(
    launch: Any, ec2: Any
) -> None:
    # errors-overview (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # errors-overview.html): InvalidAMIID.Malformed, the AMI ID is malformed ("ami-..."), which
    # EC2 answers before looking the image up (moto's own test_error_on_invalid_ami_format).
    with pytest.raises(ClientError) as refused:
        launch(ImageId="invalid-ami-format")

    assert refused.value.response["Error"]["Code"] == "InvalidAMIID.Malformed"
    assert refused.value.response["Error"]["Message"] == (
        'Invalid id: "invalid-ami-format" (expecting "ami-...")'
    )
    assert ec2.describe_instances()["Reservations"] == []


def test_a_type_that_cannot_run_the_image_architecture_is_refused_with_invalid_parameter(
    launch: Any, ec2: Any, arm64_ami: str
) -> None:
    # RunInstances: the AMI's Architecture (https://docs.aws.amazon.com/AWSEC2/latest/
    # APIReference/API_Image.html) must be one of the type's ProcessorInfo.SupportedArchitectures
    # (API_ProcessorInfo.html); EC2 refuses otherwise with InvalidParameterValue
    # (errors-overview.html) naming both architectures.
    with pytest.raises(ClientError) as refused:
        launch(ImageId=arm64_ami, InstanceType="c5.large")

    assert _error_code(refused) == "InvalidParameterValue"
    message = refused.value.response["Error"]["Message"]
    assert "'x86_64' of the specified instance type" in message
    assert "'arm64' of the specified AMI" in message
    assert ec2.describe_instances()["Reservations"] == []
    # The same image on an arm64 type launches.
    assert launch(ImageId=arm64_ami, InstanceType="m6g.large")["Instances"][0]["InstanceType"] == (
        "m6g.large"
    )


def test_launch_time_is_the_emulators_clock(launch: Any, ec2: Any, launch_template: Any) -> None:
    """EC2 API Reference, Instance: LaunchTime is when the instance was launched
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html). The emulator's
    clock is the time there: after an advance, an instance launched now carries the advanced
    time, by RunInstances and by CreateFleet alike."""
    from moto_capacity.core.clock import CLOCK

    CLOCK.advance(6 * 3600)
    ran = launch()["Instances"][0]
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": launch_template(),
                    "Version": "$Latest",
                },
                "Overrides": [{"InstanceType": "m5.large", "AvailabilityZone": ZONE}],
            }
        ],
    )
    (fleet_id,) = fleet["Instances"][0]["InstanceIds"]
    described = ec2.describe_instances(InstanceIds=[ran["InstanceId"], fleet_id])
    times = [i["LaunchTime"] for r in described["Reservations"] for i in r["Instances"]]
    assert len(times) == 2
    for launched in times:
        assert abs((launched - CLOCK.now()).total_seconds()) < 60
