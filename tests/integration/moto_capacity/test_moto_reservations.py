"""Capacity Reservation API: create, describe (filters, paging), modify, cancel, expire, tags."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity


def test_create_capacity_reservation_is_active_with_all_capacity_available(
    reservation: Any,
) -> None:
    # Given / When
    created = reservation(InstanceCount=3)

    # Then
    assert created["CapacityReservationId"].startswith("cr-")
    assert created["State"] == "active"
    assert created["TotalInstanceCount"] == 3
    assert created["AvailableInstanceCount"] == 3
    assert created["AvailabilityZoneId"] == "use1-az6"
    assert created["InstanceMatchCriteria"] == "open"
    assert created["CapacityReservationArn"] == (
        f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{created['CapacityReservationId']}"
    )


def test_create_capacity_reservation_in_a_zone_of_another_region_is_invalid(
    reservation: Any,
) -> None:
    with pytest.raises(ClientError) as error:
        reservation(AvailabilityZone="eu-west-1a")
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_limited_end_date_type_requires_an_end_date(reservation: Any) -> None:
    with pytest.raises(ClientError) as error:
        reservation(EndDateType="limited")
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_describe_filters_by_state_type_zone_platform_tenancy_criteria_owner_and_tags(
    ec2: Any, reservation: Any
) -> None:
    # Given
    wanted = reservation(
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}
        ],
    )
    reservation(InstanceType="c5.large", AvailabilityZone="us-east-1b")

    # When
    filters = [
        {"Name": "state", "Values": ["active"]},
        {"Name": "instance-type", "Values": ["m5.large"]},
        {"Name": "availability-zone", "Values": ["us-east-1a"]},
        {"Name": "instance-platform", "Values": ["Linux/UNIX"]},
        {"Name": "tenancy", "Values": ["default"]},
        {"Name": "instance-match-criteria", "Values": ["targeted"]},
        {"Name": "owner-id", "Values": ["123456789012"]},
        {"Name": "tag:team", "Values": ["ml"]},
        {"Name": "tag-key", "Values": ["team"]},
    ]
    found = ec2.describe_capacity_reservations(Filters=filters)["CapacityReservations"]

    # Then
    assert [r["CapacityReservationId"] for r in found] == [wanted["CapacityReservationId"]]
    assert found[0]["Tags"] == [{"Key": "team", "Value": "ml"}]


def test_describe_pages_with_max_results_and_next_token(ec2: Any, reservation: Any) -> None:
    # Given
    created = [reservation()["CapacityReservationId"] for _ in range(3)]

    # When
    first = ec2.describe_capacity_reservations(MaxResults=2)
    second = ec2.describe_capacity_reservations(MaxResults=2, NextToken=first["NextToken"])

    # Then
    pages = first["CapacityReservations"] + second["CapacityReservations"]
    assert [r["CapacityReservationId"] for r in pages] == created
    assert "NextToken" not in second


def test_describe_an_unknown_id_fails_with_not_found(ec2: Any) -> None:
    with pytest.raises(ClientError) as error:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])
    assert error.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"


def test_modify_changes_the_instance_count_and_keeps_available_exact(
    ec2: Any, reservation: Any, linux_ami: str, available_count: Any
) -> None:
    # Given one of two slots used
    created = reservation()
    rid = created["CapacityReservationId"]
    ec2.run_instances(
        ImageId=linux_ami,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        Placement={"AvailabilityZone": "us-east-1a"},
    )

    # When
    ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=5)

    # Then
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])[
        "CapacityReservations"
    ][0]
    assert found["TotalInstanceCount"] == 5
    assert available_count(rid) == 4


def test_reservation_past_its_end_date_is_expired_and_not_used(
    ec2: Any, reservation: Any, linux_ami: str
) -> None:
    """EC2 API Reference, CreateCapacityReservation, EndDate
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateCapacityReservation.html):
    cancelled within an hour from the specified time."""
    # Given a reservation whose end date has just passed
    rid = reservation()["CapacityReservationId"]
    ec2.modify_capacity_reservation(
        CapacityReservationId=rid,
        EndDateType="limited",
        EndDate=datetime.now(UTC) - timedelta(seconds=1),
    )

    # When the hour after it is over
    moto_capacity.advance_clock(3600)
    state = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
    launched = ec2.run_instances(
        ImageId=linux_ami,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        Placement={"AvailabilityZone": "us-east-1a"},
    )

    # Then
    assert state["CapacityReservations"][0]["State"] == "expired"
    assert "CapacityReservationId" not in launched["Instances"][0]


def test_a_reservation_ends_within_the_hour_after_its_end_date_not_at_it(
    ec2: Any, reservation: Any
) -> None:
    """EC2 API Reference, CreateCapacityReservation, EndDate
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateCapacityReservation.html):
    "the Capacity Reservation is cancelled within an hour from the specified time"."""

    def state(rid: str) -> str:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
        return str(found["CapacityReservations"][0]["State"])

    # Given EC2 taking 10 minutes after the end date, and a reservation ending in a minute
    moto_capacity.set_lifecycle(end_date_lag_seconds=600)
    rid = reservation()["CapacityReservationId"]
    end = datetime.now(UTC) + timedelta(seconds=60)
    ec2.modify_capacity_reservation(CapacityReservationId=rid, EndDateType="limited", EndDate=end)

    # When the end date passes, then it is still active for those 10 minutes, then expired
    moto_capacity.advance_clock(60 + 590)
    assert state(rid) == "active"
    moto_capacity.advance_clock(20)
    assert state(rid) == "expired"

    # And by default each reservation ends at its own moment within the hour, never later
    moto_capacity.set_lifecycle(end_date_lag_seconds=0)
    assert moto_capacity.state()["lifecycle"]["endDateLagSeconds"] == 0
    moto_capacity.reset()
    assert moto_capacity.state()["lifecycle"]["endDateLagSeconds"] is None
    ids = [reservation()["CapacityReservationId"] for _ in range(3)]
    end = datetime.now(UTC) + timedelta(seconds=60)
    for rid in ids:
        ec2.modify_capacity_reservation(
            CapacityReservationId=rid, EndDateType="limited", EndDate=end
        )
    moto_capacity.advance_clock(60 + 3600)
    assert [state(rid) for rid in ids] == ["expired"] * 3
    with pytest.raises(ValueError, match="within the hour"):
        moto_capacity.set_lifecycle(end_date_lag_seconds=3600)


def test_cancelled_reservation_is_cancelled_and_cannot_be_modified(
    ec2: Any, reservation: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]

    # When
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)

    # Then
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    assert found[0]["State"] == "cancelled"
    with pytest.raises(ClientError) as error:
        ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=3)
    assert error.value.response["Error"]["Code"] == "IncorrectState"


def test_create_tags_tags_a_reservation_and_rejects_unknown_ones(
    ec2: Any, reservation: Any
) -> None:
    # Given
    rid = reservation()["CapacityReservationId"]

    # When
    ec2.create_tags(Resources=[rid], Tags=[{"Key": "owner", "Value": "platform"}])

    # Then
    found = ec2.describe_capacity_reservations(
        Filters=[{"Name": "tag:owner", "Values": ["platform"]}]
    )
    assert [r["CapacityReservationId"] for r in found["CapacityReservations"]] == [rid]
    with pytest.raises(ClientError) as error:
        ec2.create_tags(Resources=["cr-0123456789abcdef0"], Tags=[{"Key": "a", "Value": "b"}])
    assert error.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"
