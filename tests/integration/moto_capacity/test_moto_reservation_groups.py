"""Capacity Reservation groups in resource-groups ("Work with Capacity Reservation groups")."""

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from moto_capacity.resourcegroups.models import (
    ALLOWED_RESOURCE_TYPES,
    CAPACITY_RESERVATION_TYPE,
    GENERIC_CONFIGURATION,
)


def test_pool_group_gets_the_generic_restriction_to_capacity_reservations(
    resource_groups: Any,
) -> None:
    # When a group is created with only the pool configuration
    group = resource_groups.create_group(
        Name="gpu", Configuration=[{"Type": "AWS::EC2::CapacityReservationPool"}]
    )

    # Then it only accepts Capacity Reservations
    configuration = resource_groups.get_group_configuration(Group="gpu")["GroupConfiguration"]
    generic = [c for c in configuration["Configuration"] if c["Type"] == GENERIC_CONFIGURATION]
    assert generic[0]["Parameters"] == [
        {"Name": ALLOWED_RESOURCE_TYPES, "Values": [CAPACITY_RESERVATION_TYPE]}
    ]
    assert group["Group"]["GroupArn"] == "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"


def test_group_arn_carries_the_region_it_was_created_in(
    aws: None, boto_session: boto3.Session
) -> None:
    client = boto_session.client("resource-groups", region_name="eu-west-1")
    group = client.create_group(
        Name="gpu", Configuration=[{"Type": "AWS::EC2::CapacityReservationPool"}]
    )
    assert group["Group"]["GroupArn"].startswith("arn:aws:resource-groups:eu-west-1:")
    assert client.get_group(Group=group["Group"]["GroupArn"])["Group"]["Name"] == "gpu"


def test_pool_group_with_other_allowed_resource_types_is_rejected(resource_groups: Any) -> None:
    with pytest.raises(ClientError) as error:
        resource_groups.create_group(
            Name="gpu",
            Configuration=[
                {"Type": "AWS::EC2::CapacityReservationPool"},
                {
                    "Type": GENERIC_CONFIGURATION,
                    "Parameters": [{"Name": ALLOWED_RESOURCE_TYPES, "Values": ["AWS::EC2::Host"]}],
                },
            ],
        )
    assert error.value.response["Error"]["Code"] == "BadRequestException"


def test_group_resources_adds_reservations_and_lists_them(
    resource_groups: Any, reservation: Any, capacity_group: Any
) -> None:
    # Given
    arn = reservation()["CapacityReservationArn"]
    group_arn = capacity_group()

    # When
    answer = resource_groups.group_resources(Group=group_arn, ResourceArns=[arn])

    # Then
    assert answer["Succeeded"] == [arn]
    assert answer["Failed"] == []
    listed = resource_groups.list_group_resources(Group=group_arn)
    assert listed["ResourceIdentifiers"] == [
        {"ResourceArn": arn, "ResourceType": CAPACITY_RESERVATION_TYPE}
    ]
    assert listed["Resources"] == [
        {"Identifier": {"ResourceArn": arn, "ResourceType": CAPACITY_RESERVATION_TYPE}}
    ]


def test_group_resources_refuses_other_resource_types_and_unknown_reservations(
    resource_groups: Any, capacity_group: Any
) -> None:
    # Given
    group_arn = capacity_group()
    bucket = "arn:aws:s3:::some-bucket"
    missing = "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0"

    # When
    answer = resource_groups.group_resources(Group=group_arn, ResourceArns=[bucket, missing])

    # Then
    assert answer["Succeeded"] == []
    assert sorted(f["ResourceArn"] for f in answer["Failed"]) == sorted([bucket, missing])


def test_ungroup_resources_removes_a_reservation_from_the_group(
    resource_groups: Any, reservation: Any, capacity_group: Any
) -> None:
    arn = reservation()["CapacityReservationArn"]
    group_arn = capacity_group(arn)
    answer = resource_groups.ungroup_resources(Group=group_arn, ResourceArns=[arn])
    assert answer["Succeeded"] == [arn]
    assert resource_groups.list_group_resources(Group=group_arn)["ResourceIdentifiers"] == []


def test_get_groups_for_capacity_reservation_names_the_groups_holding_it(
    ec2: Any, reservation: Any, capacity_group: Any
) -> None:
    # Given
    created = reservation()
    group_arn = capacity_group(created["CapacityReservationArn"])
    capacity_group()

    # When
    answer = ec2.get_groups_for_capacity_reservation(
        CapacityReservationId=created["CapacityReservationId"]
    )

    # Then
    assert answer["CapacityReservationGroups"] == [
        {"GroupArn": group_arn, "OwnerId": "123456789012"}
    ]


def test_deletion_protected_group_cannot_be_deleted_while_it_has_members(
    resource_groups: Any, reservation: Any
) -> None:
    # Given
    resource_groups.create_group(
        Name="protected",
        Configuration=[
            {"Type": "AWS::EC2::CapacityReservationPool"},
            {
                "Type": GENERIC_CONFIGURATION,
                "Parameters": [
                    {"Name": ALLOWED_RESOURCE_TYPES, "Values": [CAPACITY_RESERVATION_TYPE]},
                    {"Name": "deletion-protection", "Values": ["UNLESS_EMPTY"]},
                ],
            },
        ],
    )
    arn = reservation()["CapacityReservationArn"]
    resource_groups.group_resources(Group="protected", ResourceArns=[arn])

    # When / Then
    with pytest.raises(ClientError) as error:
        resource_groups.delete_group(Group="protected")
    assert error.value.response["Error"]["Code"] == "BadRequestException"
    resource_groups.ungroup_resources(Group="protected", ResourceArns=[arn])
    resource_groups.delete_group(Group="protected")
