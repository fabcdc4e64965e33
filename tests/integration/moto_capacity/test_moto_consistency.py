"""Eventual consistency and the emulator's clock.

Each behaviour follows an AWS documentation page, named in its test:
- EC2 API Reference, "Eventual consistency in the Amazon EC2 API"
  (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html)
- EC2 User Guide, "Capacity Reservation states" (DescribeCapacityReservations `State`:
  `pending` while capacity is provisioned, then `active`)
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-using.html)
"""

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity


def _launch(ec2: Any, ami: str, count: int = 1) -> list[str]:
    reservation = ec2.run_instances(
        ImageId=ami, InstanceType="m5.large", MinCount=count, MaxCount=count
    )
    return [i["InstanceId"] for i in reservation["Instances"]]


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_fresh_instance_ids_are_unknown_to_describe_tag_and_terminate_until_the_window_ends(
    ec2: Any, linux_ami: str
) -> None:
    """ "Eventual consistency in the Amazon EC2 API": a just-launched id can be NotFound."""
    moto_capacity.set_consistency(instance_visibility_seconds=5)
    ids = _launch(ec2, linux_ami, 2)

    with pytest.raises(ClientError) as described:
        ec2.describe_instances(InstanceIds=ids)
    with pytest.raises(ClientError) as tagged:
        ec2.create_tags(Resources=ids[:1], Tags=[{"Key": "k", "Value": "v"}])
    with pytest.raises(ClientError) as terminated:
        ec2.terminate_instances(InstanceIds=ids[:1])

    assert _code(described) == "InvalidInstanceID.NotFound"
    assert described.value.response["Error"]["Message"] == (
        f"The instance IDs '{ids[0]}, {ids[1]}' do not exist"
    )
    assert described.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert _code(tagged) == "InvalidInstanceID.NotFound"
    assert tagged.value.response["Error"]["Message"] == f"The instance ID '{ids[0]}' does not exist"
    assert _code(terminated) == "InvalidInstanceID.NotFound"

    moto_capacity.advance_clock(5)

    found = ec2.describe_instances(InstanceIds=ids)["Reservations"][0]["Instances"]
    assert sorted(i["InstanceId"] for i in found) == sorted(ids)
    ec2.create_tags(Resources=ids[:1], Tags=[{"Key": "k", "Value": "v"}])
    assert ec2.terminate_instances(InstanceIds=ids[:1])["TerminatingInstances"]


def test_filtered_describe_instances_omits_fresh_instances_instead_of_failing(
    ec2: Any, linux_ami: str
) -> None:
    """ "Eventual consistency in the Amazon EC2 API": a filtered read just does not list it yet."""
    older = _launch(ec2, linux_ami)
    moto_capacity.set_consistency(instance_visibility_seconds=3)
    fresh = _launch(ec2, linux_ami)
    by_filter = [{"Name": "instance-id", "Values": older + fresh}]

    listed = ec2.describe_instances(Filters=by_filter)["Reservations"]
    moto_capacity.advance_clock(3)
    later = ec2.describe_instances(Filters=by_filter)["Reservations"]

    assert [i["InstanceId"] for r in listed for i in r["Instances"]] == older
    assert sorted(i["InstanceId"] for r in later for i in r["Instances"]) == sorted(older + fresh)


def test_window_zero_turns_visibility_delays_off(ec2: Any, linux_ami: str) -> None:
    moto_capacity.set_consistency(instance_visibility_seconds=60)
    moto_capacity.set_consistency(instance_visibility_seconds=0)

    ids = _launch(ec2, linux_ami)

    assert ec2.describe_instances(InstanceIds=ids)["Reservations"]


def test_fleet_instances_are_unknown_during_the_window(
    ec2: Any, launch_template: Callable[..., str]
) -> None:
    """ "Eventual consistency in the Amazon EC2 API" applies to ids CreateFleet returns too."""
    moto_capacity.set_consistency(instance_visibility_seconds=2)
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": launch_template()},
                "Overrides": [{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a"}],
            }
        ],
    )
    ids = fleet["Instances"][0]["InstanceIds"]

    with pytest.raises(ClientError) as described:
        ec2.describe_instances(InstanceIds=ids)
    moto_capacity.advance_clock(2)

    assert _code(described) == "InvalidInstanceID.NotFound"
    assert ec2.describe_instances(InstanceIds=ids)["Reservations"]


def test_new_reservation_is_pending_then_active_and_serves_no_launch_while_pending(
    ec2: Any, reservation: Callable[..., dict[str, Any]], linux_ami: str
) -> None:
    """ "Capacity Reservation states": `pending` until provisioned; only `active` ones are used."""
    moto_capacity.set_consistency(reservation_pending_seconds=30)
    created = reservation(InstanceMatchCriteria="targeted")
    rid = created["CapacityReservationId"]
    target = {"CapacityReservationTarget": {"CapacityReservationId": rid}}

    with pytest.raises(ClientError) as refused:
        ec2.run_instances(
            ImageId=linux_ami,
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            Placement={"AvailabilityZone": "us-east-1a"},
            CapacityReservationSpecification=target,
        )
    moto_capacity.advance_clock(30)
    state_after = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
    launched = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        CapacityReservationSpecification=target,
    )

    assert created["State"] == "pending"
    assert _code(refused) == "InvalidParameterValue"
    assert state_after["CapacityReservations"][0]["State"] == "active"
    assert launched["Instances"][0]["CapacityReservationId"] == rid


def test_pending_reservations_are_filtered_by_state(
    ec2: Any, reservation: Callable[..., dict[str, Any]]
) -> None:
    moto_capacity.set_consistency(reservation_pending_seconds=10)
    rid = reservation()["CapacityReservationId"]

    pending = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["pending"]}])
    active = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["active"]}])

    assert [r["CapacityReservationId"] for r in pending["CapacityReservations"]] == [rid]
    assert active["CapacityReservations"] == []


def test_advancing_the_clock_expires_a_reservation_at_its_end_date(
    ec2: Any, reservation: Callable[..., dict[str, Any]]
) -> None:
    """EC2 User Guide, "Capacity Reservation states": `expired` once the end date passes
    (CreateCapacityReservation, EndDate: within an hour from it)."""
    end = datetime.now(UTC) + timedelta(hours=1)
    rid = reservation(EndDateType="limited", EndDate=end)["CapacityReservationId"]

    before = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
    moto_capacity.advance_clock(2 * 3600 + 1)
    after = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])

    assert before["CapacityReservations"][0]["State"] == "active"
    assert after["CapacityReservations"][0]["State"] == "expired"


def test_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="advanceSeconds must be >= 0"):
        moto_capacity.advance_clock(-1)


def test_reset_turns_windows_off_and_rewinds_the_clock() -> None:
    moto_capacity.set_consistency(instance_visibility_seconds=4, reservation_pending_seconds=9)
    moto_capacity.advance_clock(100)

    moto_capacity.reset()
    state = moto_capacity.state()

    assert state["consistency"] == {
        "instanceVisibilitySeconds": 0.0,
        "reservationPendingSeconds": 0.0,
        "instancesNotYetVisible": 0,
    }
    assert state["clock"]["offsetSeconds"] == 0.0  # type: ignore[index]


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_consistency_and_clock_over_http(
    server_url: str, server_client: Callable[[str], Any], linux_ami: str
) -> None:
    ec2 = server_client("ec2")
    status, state = _post(
        server_url,
        "/moto-capacity/consistency",
        {"instanceVisibilitySeconds": 20, "reservationPendingSeconds": 0},
    )
    ids = _launch(ec2, linux_ami)
    with pytest.raises(ClientError) as hidden:
        ec2.describe_instances(InstanceIds=ids)
    clock_status, clock_state = _post(server_url, "/moto-capacity/clock", {"advanceSeconds": 20})
    bad_status, bad = _post(server_url, "/moto-capacity/consistency", {"instanceVisibility": 1})

    assert status == 200
    assert state["consistency"]["instanceVisibilitySeconds"] == 20
    assert _code(hidden) == "InvalidInstanceID.NotFound"
    assert clock_status == 200
    assert clock_state["clock"]["offsetSeconds"] == 20
    assert ec2.describe_instances(InstanceIds=ids)["Reservations"]
    assert bad_status == 400
    assert "instanceVisibilitySeconds" in bad["error"]


def test_tags_on_an_instance_that_does_not_exist_fail_the_whole_call(
    ec2: Any, linux_ami: str
) -> None:
    """EC2 API Reference, "Error codes for the Amazon EC2 API"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html):
    `InvalidInstanceID.NotFound`, the specified instance does not exist. moto alone tags any id."""
    (known,) = _launch(ec2, linux_ami)
    unknown = "i-0123456789abcdef0"

    with pytest.raises(ClientError) as tagged:
        ec2.create_tags(Resources=[known, unknown], Tags=[{"Key": "k", "Value": "v"}])

    assert _code(tagged) == "InvalidInstanceID.NotFound"
    assert unknown in tagged.value.response["Error"]["Message"]
    described = ec2.describe_instances(InstanceIds=[known])["Reservations"][0]["Instances"][0]
    assert "Tags" not in described or {"Key": "k", "Value": "v"} not in described["Tags"]
