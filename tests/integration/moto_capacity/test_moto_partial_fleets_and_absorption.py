"""CreateFleet partial success, and running instances taken into new reservations.

- EC2 User Guide, "EC2 Fleet request types" / CreateFleet `Errors`
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html): an instant
  fleet answers the instances it launched and one error per override that failed, throttling
  (`RequestLimitExceeded`) included.
- EC2 User Guide, "Launch instances into an existing Capacity Reservation"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html):
  running instances with matching attributes and an `open` preference run in a new `open`
  reservation once it is active; "Work with Capacity Reservation groups": instances targeting a
  group use its members.
"""

from collections.abc import Callable
from typing import Any

import pytest

import moto_capacity

ZONE = "us-east-1a"


def _fleet(ec2: Any, template: str, *zones: str) -> dict[str, Any]:
    return ec2.create_fleet(  # type: ignore[no-any-return]
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 2,
            "DefaultTargetCapacityType": "on-demand",
        },
        OnDemandOptions={"AllocationStrategy": "prioritized"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template},
                "Overrides": [
                    {"InstanceType": "m5.large", "AvailabilityZone": z, "Priority": float(p)}
                    for p, z in enumerate(zones)
                ],
            }
        ],
    )


def test_an_override_fault_throttles_one_override_while_the_next_launches(
    ec2: Any, launch_template: Callable[..., str]
) -> None:
    """CreateFleet `Errors`: RequestLimitExceeded for one override beside launched instances."""
    moto_capacity.inject_fault(
        "ec2:CreateFleet",
        "RequestLimitExceeded",
        "Request limit exceeded.",
        times=1,
        scope="override",
    )

    answer = _fleet(ec2, launch_template(), ZONE, "us-east-1b")

    (error,) = answer["Errors"]
    assert error["ErrorCode"] == "RequestLimitExceeded"
    assert error["ErrorMessage"] == "Request limit exceeded."
    assert error["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == ZONE
    (launched,) = answer["Instances"]
    assert launched["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == "us-east-1b"
    assert len(launched["InstanceIds"]) == 2


def test_override_scope_is_only_for_create_fleet() -> None:
    with pytest.raises(ValueError, match="scope override applies only to ec2:CreateFleet"):
        moto_capacity.inject_fault("ec2:RunInstances", "RequestLimitExceeded", scope="override")


def test_a_new_open_reservation_takes_in_matching_running_instances(
    ec2: Any, reservation: Callable[..., dict[str, Any]], linux_ami: str, available_count: Any
) -> None:
    """ "Launch instances into an existing Capacity Reservation": open + matching → runs in it."""
    running = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=3,
        MaxCount=3,
        Placement={"AvailabilityZone": ZONE},
    )["Instances"]
    avoiding = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE},
        CapacityReservationSpecification={"CapacityReservationPreference": "none"},
    )["Instances"][0]

    rid = reservation(InstanceCount=2)["CapacityReservationId"]
    described = ec2.describe_instances(
        InstanceIds=[i["InstanceId"] for i in running] + [avoiding["InstanceId"]]
    )
    by_id = {i["InstanceId"]: i for r in described["Reservations"] for i in r["Instances"]}

    assert available_count(rid) == 0
    taken = [i for i in running if by_id[i["InstanceId"]].get("CapacityReservationId") == rid]
    assert len(taken) == 2
    assert "CapacityReservationId" not in by_id[avoiding["InstanceId"]]


def test_a_targeted_reservation_takes_in_nothing(
    ec2: Any, reservation: Callable[..., dict[str, Any]], linux_ami: str, available_count: Any
) -> None:
    ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE},
    )

    rid = reservation(InstanceMatchCriteria="targeted")["CapacityReservationId"]

    assert available_count(rid) == 2


def test_a_pending_reservation_takes_in_instances_when_it_becomes_active(
    ec2: Any, reservation: Callable[..., dict[str, Any]], linux_ami: str, available_count: Any
) -> None:
    ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE},
    )
    moto_capacity.set_consistency(reservation_pending_seconds=10)
    rid = reservation()["CapacityReservationId"]

    while_pending = available_count(rid)
    moto_capacity.advance_clock(10)

    assert while_pending == 2
    assert available_count(rid) == 1


def test_a_new_group_member_takes_in_instances_targeting_the_group(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    capacity_group: Callable[..., str],
    resource_groups: Any,
    linux_ami: str,
    available_count: Any,
) -> None:
    """ "Work with Capacity Reservation groups": instances targeting a group use its members."""
    group = capacity_group()
    launched = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group}
        },
    )["Instances"][0]
    member = reservation(InstanceMatchCriteria="targeted")

    resource_groups.group_resources(Group=group, ResourceArns=[member["CapacityReservationArn"]])
    described = ec2.describe_instances(InstanceIds=[launched["InstanceId"]])

    assert "CapacityReservationId" not in launched
    assert available_count(member["CapacityReservationId"]) == 1
    assert (
        described["Reservations"][0]["Instances"][0]["CapacityReservationId"]
        == member["CapacityReservationId"]
    )
