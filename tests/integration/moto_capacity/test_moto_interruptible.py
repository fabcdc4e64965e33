"""Interruptible Capacity Reservations through EC2's own API: the owner's allocation, the
consumer's market type, reclaiming with the 2-minute warning, and the control that reclaims."""

import json
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

INTERRUPTIBLE_MARKET = {"MarketType": "interruptible-capacity-reservation"}


@pytest.fixture
def lent(ec2: Any, reservation: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """A 4-instance source ODCR lending 3 instances; returns the interruptible reservation."""
    source = reservation(InstanceCount=4)
    answer = ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source["CapacityReservationId"], InstanceCount=3
    )
    assert answer["SourceCapacityReservationId"] == source["CapacityReservationId"]
    found = ec2.describe_capacity_reservations()["CapacityReservations"]
    return next(r for r in found if r.get("Interruptible"))  # type: ignore[no-any-return]


def _reservation(ec2: Any, reservation_id: str) -> dict[str, Any]:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return found["CapacityReservations"][0]  # type: ignore[no-any-return]


def _launch(ec2: Any, linux_ami: str, reservation_id: str, count: int = 1, **extra: Any) -> Any:
    return ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=count,
        MaxCount=count,
        Placement={"AvailabilityZone": "us-east-1a"},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        },
        **extra,
    )


def _source_id(reservation: dict[str, Any]) -> str:
    return str(reservation["InterruptionInfo"]["SourceCapacityReservationId"])


def _instance_state(ec2: Any, instance_id: str) -> str:
    described = ec2.describe_instances(InstanceIds=[instance_id])
    return str(described["Reservations"][0]["Instances"][0]["State"]["Name"])


def test_an_allocation_moves_unused_capacity_into_a_targeted_interruptible_reservation(
    ec2: Any, lent: dict[str, Any]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-owner-procedures.html and
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-consumer-procedures.html
    (Interruptible true; targeted: launches must name it)."""
    source = _reservation(ec2, _source_id(lent))

    assert lent["Interruptible"] is True
    assert lent["InterruptionInfo"]["InterruptionType"] == "adhoc"
    assert lent["InstanceMatchCriteria"] == "targeted"
    assert lent["TotalInstanceCount"] == 3
    assert source["Interruptible"] is False
    assert source["TotalInstanceCount"] == 1
    assert source["InterruptibleCapacityAllocation"] == {
        "InstanceCount": 3,
        "TargetInstanceCount": 3,
        "Status": "active",
        "InterruptibleCapacityReservationId": lent["CapacityReservationId"],
        "InterruptionType": "adhoc",
        "ZeroSizePreference": "default",
    }


def test_an_allocation_needs_an_active_source_without_end_date_with_unused_capacity_once(
    ec2: Any, reservation: Callable[..., dict[str, Any]], lent: dict[str, Any]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-owner-procedures.html
    (prerequisites: active, no end date, available capacity, one allocation per source)."""
    limited = reservation(EndDateType="limited", EndDate=datetime.now() + timedelta(days=3))
    with pytest.raises(ClientError) as error:
        ec2.create_interruptible_capacity_reservation_allocation(
            CapacityReservationId=limited["CapacityReservationId"], InstanceCount=1
        )
    assert error.value.response["Error"]["Code"] == "IncorrectState"

    small = reservation(InstanceCount=2)
    with pytest.raises(ClientError) as error:
        ec2.create_interruptible_capacity_reservation_allocation(
            CapacityReservationId=small["CapacityReservationId"], InstanceCount=3
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    with pytest.raises(ClientError) as error:
        ec2.create_interruptible_capacity_reservation_allocation(
            CapacityReservationId=_source_id(lent), InstanceCount=1
        )
    assert error.value.response["Error"]["Code"] == "IncorrectState"


def test_launching_into_it_needs_the_interruptible_market_type_and_never_falls_back(
    ec2: Any, lent: dict[str, Any], linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-consumer-procedures.html
    (launch with market type interruptible-capacity-reservation and the reservation id)."""
    reservation_id = lent["CapacityReservationId"]
    with pytest.raises(ClientError) as error:
        _launch(ec2, linux_ami, reservation_id)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    launched = _launch(
        ec2, linux_ami, reservation_id, 3, InstanceMarketOptions=INTERRUPTIBLE_MARKET
    )
    assert {i["InstanceLifecycle"] for i in launched["Instances"]} == {
        "interruptible-capacity-reservation"
    }
    assert {i["CapacityReservationId"] for i in launched["Instances"]} == {reservation_id}

    with pytest.raises(ClientError) as error:
        _launch(ec2, linux_ami, reservation_id, InstanceMarketOptions=INTERRUPTIBLE_MARKET)
    assert error.value.response["Error"]["Code"] == "ReservationCapacityExceeded"


def test_create_fleet_fills_it_with_reserved_capacity_and_no_fallback(
    ec2: Any, lent: dict[str, Any], launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-interruptible-cr-walkthrough.html:
    instant fleets, DefaultTargetCapacityType reserved-capacity with ReservedCapacityOptions
    ReservationTypes interruptible-capacity-reservation, as many as fit, no On-Demand or Spot
    for the rest; both answers say Lifecycle interruptible-capacity-reservation (botocore's
    InstanceLifecycle)."""
    template = launch_template(
        InstanceType="m5.large",
        Placement={"AvailabilityZone": "us-east-1a"},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": lent["CapacityReservationId"]}
        },
    )

    fleet = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": template}}],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 5,
            "DefaultTargetCapacityType": "reserved-capacity",
        },
        ReservedCapacityOptions={"ReservationTypes": ["interruptible-capacity-reservation"]},
    )

    assert len(fleet["Instances"][0]["InstanceIds"]) == 3
    assert fleet["Instances"][0]["Lifecycle"] == "interruptible-capacity-reservation"
    assert [e["ErrorCode"] for e in fleet["Errors"]] == ["ReservationCapacityExceeded"]
    assert fleet["Errors"][0]["Lifecycle"] == "interruptible-capacity-reservation"


def test_reclaiming_warns_each_instance_two_minutes_before_terminating_it(
    ec2: Any,
    lent: dict[str, Any],
    linux_ami: str,
    ec2_events: Callable[[], list[dict[str, Any]]],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-interruptible-cr.html: an
    "EC2 Capacity Reservation Instance Interruption Warning" per instance 2 minutes before it
    is terminated, then a reclamation-completed event for the source's owner;
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_UpdateInterruptibleCapacityReservationAllocation.html
    (status updating during reclamation, active when complete)."""
    reservation_id = lent["CapacityReservationId"]
    source_id = _source_id(lent)
    launched = _launch(
        ec2, linux_ami, reservation_id, 3, InstanceMarketOptions=INTERRUPTIBLE_MARKET
    )
    instance_ids = sorted(i["InstanceId"] for i in launched["Instances"])

    answer = ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source_id, TargetInstanceCount=1
    )

    assert answer["Status"] == "updating"
    assert answer["TargetInstanceCount"] == 1
    warnings = [e for e in ec2_events() if e["detail"].get("instance-action") == "terminate"]
    assert [w["detail-type"] for w in warnings] == [
        "EC2 Capacity Reservation Instance Interruption Warning"
    ] * 2
    warned = sorted(w["detail"]["instance-id"] for w in warnings)
    assert set(warned) < set(instance_ids)
    assert warnings[0]["detail"]["azId"] == "use1-az6"
    assert {_instance_state(ec2, i) for i in warned} == {"running"}

    moto_capacity.advance_clock(110)
    assert {_instance_state(ec2, i) for i in warned} == {"running"}

    moto_capacity.advance_clock(11)
    assert {_instance_state(ec2, i) for i in warned} == {"terminated"}
    source = _reservation(ec2, source_id)
    assert source["TotalInstanceCount"] == 3
    assert source["InterruptibleCapacityAllocation"]["Status"] == "active"
    assert source["InterruptibleCapacityAllocation"]["InstanceCount"] == 1
    assert _reservation(ec2, reservation_id)["TotalInstanceCount"] == 1
    completed = ec2_events()[-1]
    assert completed["detail-type"] == (
        "EC2 Interruptible Capacity Reservation Allocation Reclamation Completed"
    )
    assert completed["detail"]["ReclaimedInstanceCount"] == 2
    assert completed["resources"] == [source["CapacityReservationArn"]]


def test_reclaiming_everything_cancels_it_unless_zero_size_is_retained(
    ec2: Any, lent: dict[str, Any]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateInterruptibleCapacityReservationAllocation.html
    (ZeroSizePreference: default cancels at zero, retain keeps it active at zero)."""
    source_id = _source_id(lent)
    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source_id, TargetInstanceCount=0, ZeroSizePreference="retain"
    )
    assert _reservation(ec2, lent["CapacityReservationId"])["State"] == "active"

    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source_id, TargetInstanceCount=2, ZeroSizePreference="default"
    )
    assert _reservation(ec2, source_id)["TotalInstanceCount"] == 2
    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source_id, TargetInstanceCount=0
    )
    assert _reservation(ec2, lent["CapacityReservationId"])["State"] == "cancelled"
    assert _reservation(ec2, source_id)["TotalInstanceCount"] == 4


def test_the_interruptions_control_reclaims_like_the_owner(
    server_client: Callable[[str], Any], server_url: str, linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/interruptible-capacity-reservations.html:
    the owner reclaims at any time; POST /moto-capacity/interruptions does it for a test, and
    the notice runs on the emulator's clock (POST /moto-capacity/clock)."""
    ec2 = server_client("ec2")
    source = ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=2,
    )["CapacityReservation"]
    ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source["CapacityReservationId"], InstanceCount=2
    )
    interruptible_id = _reservation(ec2, source["CapacityReservationId"])[
        "InterruptibleCapacityAllocation"
    ]["InterruptibleCapacityReservationId"]
    instance_id = _launch(
        ec2, linux_ami, interruptible_id, InstanceMarketOptions=INTERRUPTIBLE_MARKET
    )["Instances"][0]["InstanceId"]

    state = _post(
        server_url,
        "/moto-capacity/interruptions",
        {"capacityReservationId": interruptible_id, "instanceCount": 2},
    )
    assert [e["detail"].get("instance-id") for e in state["ec2Events"]] == [instance_id]
    assert _instance_state(ec2, instance_id) == "running"

    _post(server_url, "/moto-capacity/clock", {"advanceSeconds": 121})
    assert _instance_state(ec2, instance_id) == "terminated"
    assert _reservation(ec2, interruptible_id)["State"] == "cancelled"


def _post(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())
