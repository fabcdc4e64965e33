"""Capacity Reservations in cluster placement groups.

"Use Capacity Reservations with cluster placement groups"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html): a reservation is created in a
cluster placement group (CreateCapacityReservation's PlacementGroupArn, which
DescribeCapacityReservations returns) and serves instances launched in that placement group.
"Using Capacity Reservation in cluster placement groups with a Capacity Reservation group"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-cpg-odcr-crg.html): a group target
with a placement group uses the members in that placement group; a group target alone uses the
members outside placement groups first, then those in any placement group.
"""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

PLACEMENT_GROUP = "arn:aws:ec2:us-east-1:123456789012:placement-group/training"


def _fleet(ec2: Any, template: str, count: int, **override: Any) -> dict[str, Any]:
    return ec2.create_fleet(  # type: ignore[no-any-return]
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
        },
        OnDemandOptions={"AllocationStrategy": "prioritized"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": "$Latest",
                },
                "Overrides": [
                    {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", **override}
                ],
            }
        ],
    )


def _landed(ec2: Any, answer: dict[str, Any]) -> list[tuple[str | None, str]]:
    ids = [i for group in answer.get("Instances", []) for i in group["InstanceIds"]]
    if not ids:
        return []
    described = ec2.describe_instances(InstanceIds=ids)
    return sorted(
        (i.get("CapacityReservationId"), i["Placement"].get("GroupName", ""))
        for r in described["Reservations"]
        for i in r["Instances"]
    )


def test_a_reservation_reports_the_placement_group_it_was_created_in(
    ec2: Any, reservation: Callable[..., dict[str, Any]]
) -> None:
    created = reservation(PlacementGroupArn=PLACEMENT_GROUP)
    described = ec2.describe_capacity_reservations(
        Filters=[{"Name": "placement-group-arn", "Values": [PLACEMENT_GROUP]}]
    )["CapacityReservations"]
    assert [r["CapacityReservationId"] for r in described] == [created["CapacityReservationId"]]
    assert described[0]["PlacementGroupArn"] == PLACEMENT_GROUP
    assert "PlacementGroupArn" not in reservation()


def test_a_malformed_placement_group_arn_is_refused(
    reservation: Callable[..., dict[str, Any]],
) -> None:
    with pytest.raises(ClientError) as error:
        reservation(PlacementGroupArn="training")
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_a_targeted_launch_lands_in_the_reservation_only_placed_in_its_group(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    launch_template: Callable[..., str],
) -> None:
    # Given a targeted reservation in the placement group `training`
    reserved = reservation(PlacementGroupArn=PLACEMENT_GROUP, InstanceMatchCriteria="targeted")
    rid = reserved["CapacityReservationId"]
    template = launch_template(
        CapacityReservationSpecification={
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": rid},
        }
    )
    # When a fleet targets it without the placement group, nothing launches
    unplaced = _fleet(ec2, template, 1)
    assert _landed(ec2, unplaced) == []
    assert unplaced["Errors"][0]["ErrorCode"] == "InvalidParameterValue"
    assert "placement group" in unplaced["Errors"][0]["ErrorMessage"]
    # And when it names the placement group, its instances land in the reservation and the group
    placed = _fleet(ec2, template, 2, Placement={"GroupName": "training"})
    assert _landed(ec2, placed) == [(rid, "training"), (rid, "training")]


def test_an_open_reservation_in_a_group_serves_only_launches_in_that_group(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    launch_template: Callable[..., str],
) -> None:
    rid = reservation(PlacementGroupArn=PLACEMENT_GROUP)["CapacityReservationId"]
    template = launch_template(
        CapacityReservationSpecification={"CapacityReservationPreference": "open"}
    )
    assert _landed(ec2, _fleet(ec2, template, 1)) == [(None, "")]
    placed = _fleet(ec2, template, 1, Placement={"GroupName": "training"})
    assert _landed(ec2, placed) == [(rid, "training")]


def test_a_group_with_a_placement_group_uses_its_members_in_that_group(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    launch_template: Callable[..., str],
    capacity_group: Callable[..., str],
) -> None:
    # Given a group of one reservation outside any placement group and one inside `training`
    outside = reservation(InstanceMatchCriteria="targeted", InstanceCount=1)
    inside = reservation(
        PlacementGroupArn=PLACEMENT_GROUP, InstanceMatchCriteria="targeted", InstanceCount=1
    )
    group = capacity_group(outside["CapacityReservationArn"], inside["CapacityReservationArn"])
    template = launch_template(
        CapacityReservationSpecification={
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group},
        }
    )
    # When one instance targets the group in the placement group, it takes the member inside
    placed = _fleet(ec2, template, 1, Placement={"GroupName": "training"})
    assert _landed(ec2, placed) == [(inside["CapacityReservationId"], "training")]


def test_a_group_alone_uses_members_outside_placement_groups_first(
    ec2: Any,
    reservation: Callable[..., dict[str, Any]],
    launch_template: Callable[..., str],
    capacity_group: Callable[..., str],
) -> None:
    inside = reservation(
        PlacementGroupArn=PLACEMENT_GROUP, InstanceMatchCriteria="targeted", InstanceCount=1
    )
    outside = reservation(InstanceMatchCriteria="targeted", InstanceCount=1)
    group = capacity_group(inside["CapacityReservationArn"], outside["CapacityReservationArn"])
    template = launch_template(
        CapacityReservationSpecification={
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group},
        }
    )
    first = _fleet(ec2, template, 1)
    assert _landed(ec2, first) == [(outside["CapacityReservationId"], "")]
    # Then the member in a placement group, its instance placed in that group
    second = _fleet(ec2, template, 1)
    assert _landed(ec2, second) == [(inside["CapacityReservationId"], "training")]
