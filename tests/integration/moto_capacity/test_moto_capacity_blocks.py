"""Capacity Blocks for ML through EC2's own API: offerings, purchase, states on the emulator's
clock, the capacity-block market type, the end of a block and the events EC2 sends."""

import json
import urllib.request
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity
from moto_capacity.core.clock import CLOCK

BLOCK_TYPE = "p5.48xlarge"
CAPACITY_BLOCK_MARKET = {"MarketType": "capacity-block"}


def _state(ec2: Any, reservation_id: str) -> str:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return str(found["CapacityReservations"][0]["State"])


def _run_into(ec2: Any, linux_ami: str, reservation: dict[str, Any], **extra: Any) -> Any:
    return ec2.run_instances(
        ImageId=linux_ami,
        InstanceType=reservation["InstanceType"],
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": reservation["AvailabilityZone"]},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {
                "CapacityReservationId": reservation["CapacityReservationId"]
            }
        },
        **extra,
    )


def test_offerings_start_and_end_at_1130_utc_within_eight_weeks_at_most_six(
    offerings: Callable[..., list[dict[str, Any]]],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html:
    up to 6 offerings; every block ends at 11:30 UTC; blocks start up to 8 weeks ahead."""
    found = offerings(CapacityDurationHours=72)

    assert 1 <= len(found) <= 6
    for offering in found:
        start, end = offering["StartDate"].astimezone(UTC), offering["EndDate"].astimezone(UTC)
        assert (start.hour, start.minute) == (11, 30)
        assert end - start == timedelta(hours=72)
        assert offering["CapacityBlockDurationHours"] == 72
        assert offering["InstanceType"] == BLOCK_TYPE
        assert offering["InstanceCount"] == 2
        assert float(offering["UpfrontFee"]) > 0
        assert offering["CurrencyCode"] == "USD"


@pytest.mark.parametrize("hours", [12, 36, 360, 500, 4536])
def test_durations_outside_daily_then_weekly_steps_are_invalid(
    offerings: Callable[..., list[dict[str, Any]]], hours: int
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html:
    durations in 1-day steps up to 14 days, then 7-day steps up to 182 days."""
    with pytest.raises(ClientError) as error:
        offerings(CapacityDurationHours=hours)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


@pytest.mark.parametrize("hours", [24, 336, 504, 4368])
def test_durations_on_the_documented_steps_are_offered(
    offerings: Callable[..., list[dict[str, Any]]], hours: int
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html"""
    assert offerings(CapacityDurationHours=hours)


def test_a_block_holds_at_most_64_instances(
    offerings: Callable[..., list[dict[str, Any]]],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html:
    each Capacity Block can have up to 64 instances."""
    with pytest.raises(ClientError) as error:
        offerings(InstanceCount=65)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_types_without_blocks_and_zones_without_block_capacity_get_no_offering(
    offerings: Callable[..., list[dict[str, Any]]],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html:
    offerings exist only where capacity is available."""
    assert offerings(InstanceType="m5.large") == []

    moto_capacity.set_capacity("us-east-1", BLOCK_TYPE, "us-east-1a", "capacity-block", 1)
    zones = {offering["AvailabilityZone"] for offering in offerings(InstanceCount=2)}

    assert zones and "us-east-1a" not in zones


def test_purchase_is_payment_pending_then_scheduled_then_active_at_its_start(
    ec2: Any, block: Callable[..., dict[str, Any]], advance_to: Callable[..., None]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
    (State: payment-pending, scheduled, active) and
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html."""
    bought = block()
    reservation_id = bought["CapacityReservationId"]

    assert bought["State"] == "payment-pending"
    assert bought["ReservationType"] == "capacity-block"
    assert bought["InstanceMatchCriteria"] == "targeted"
    assert bought["EndDateType"] == "limited"
    assert bought["EndDate"] - bought["StartDate"] == timedelta(hours=48)
    assert bought["CapacityBlockId"].startswith("cb-")

    moto_capacity.advance_clock(60)
    assert _state(ec2, reservation_id) == "scheduled"
    blocks = ec2.describe_capacity_blocks(CapacityBlockIds=[bought["CapacityBlockId"]])
    assert blocks["CapacityBlocks"][0]["State"] == "scheduled"
    assert blocks["CapacityBlocks"][0]["CapacityReservationIds"] == [reservation_id]

    advance_to(bought["StartDate"], -60)
    assert _state(ec2, reservation_id) == "scheduled"
    advance_to(bought["StartDate"], 1)
    assert _state(ec2, reservation_id) == "active"


def test_a_scheduled_block_serves_no_launch(
    ec2: Any, block: Callable[..., dict[str, Any]], linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html and
    "Capacity Reservation states": only an active reservation can be launched into."""
    bought = block()
    moto_capacity.advance_clock(60)

    with pytest.raises(ClientError) as error:
        _run_into(ec2, linux_ami, bought, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_launching_into_a_block_needs_the_capacity_block_market_type(
    ec2: Any, active_block: dict[str, Any], linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html: launch
    with the capacity-block purchasing option; without it EC2 answers InvalidParameterValue
    ("the market type (purchasing) option is not valid", reported in
    https://github.com/terraform-aws-modules/terraform-aws-ec2-instance/pull/404)."""
    with pytest.raises(ClientError) as error:
        _run_into(ec2, linux_ami, active_block)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    launched = _run_into(ec2, linux_ami, active_block, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    instance = launched["Instances"][0]
    assert instance["CapacityReservationId"] == active_block["CapacityReservationId"]
    assert instance["InstanceLifecycle"] == "capacity-block"
    found = ec2.describe_capacity_reservations(
        CapacityReservationIds=[active_block["CapacityReservationId"]]
    )["CapacityReservations"][0]
    assert found["AvailableInstanceCount"] == 1


def test_the_capacity_block_market_type_needs_a_block_target(
    ec2: Any, reservation: Any, linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html: the
    launch must name the Capacity Block reservation; an ordinary ODCR is not one."""
    with pytest.raises(ClientError) as error:
        ec2.run_instances(
            ImageId=linux_ami,
            InstanceType=BLOCK_TYPE,
            MinCount=1,
            MaxCount=1,
            InstanceMarketOptions=CAPACITY_BLOCK_MARKET,
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    odcr = reservation(InstanceMatchCriteria="targeted")
    with pytest.raises(ClientError) as error:
        _run_into(ec2, linux_ami, odcr, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_a_launch_template_can_carry_the_capacity_block_market_type(
    ec2: Any, active_block: dict[str, Any], launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html
    (launch template: InstanceMarketOptions MarketType capacity-block and the target)."""
    name = launch_template(
        InstanceType=BLOCK_TYPE,
        InstanceMarketOptions=CAPACITY_BLOCK_MARKET,
        Placement={"AvailabilityZone": active_block["AvailabilityZone"]},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {
                "CapacityReservationId": active_block["CapacityReservationId"]
            }
        },
    )

    launched = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateName": name}, MinCount=2, MaxCount=2
    )

    assert {i["CapacityReservationId"] for i in launched["Instances"]} == {
        active_block["CapacityReservationId"]
    }


def _block_fleet(ec2: Any, template: str, capacity_type: str, **spec: Any) -> Any:
    return ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": template}}],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 2,
            "DefaultTargetCapacityType": capacity_type,
            **spec,
        },
    )


def test_create_fleet_fills_a_block_only_with_default_target_capacity_type_capacity_block(
    ec2: Any, active_block: dict[str, Any], launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-capacity-blocks-walkthrough.html:
    DefaultTargetCapacityType capacity-block, a template targeting the block; an on-demand
    fleet aimed at the block gets an error and no instance (no fallback)."""
    template = launch_template(
        InstanceType=BLOCK_TYPE,
        Placement={"AvailabilityZone": active_block["AvailabilityZone"]},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {
                "CapacityReservationId": active_block["CapacityReservationId"]
            }
        },
    )

    refused = _block_fleet(ec2, template, "on-demand")
    assert refused["Instances"] == []
    assert [e["ErrorCode"] for e in refused["Errors"]] == ["InvalidParameterValue"]

    filled = _block_fleet(ec2, template, "capacity-block")
    assert filled["Errors"] == []
    assert len(filled["Instances"][0]["InstanceIds"]) == 2
    described = ec2.describe_instances(InstanceIds=filled["Instances"][0]["InstanceIds"])
    for reservation in described["Reservations"]:
        for instance in reservation["Instances"]:
            assert instance["InstanceLifecycle"] == "capacity-block"
            assert instance["CapacityReservationId"] == active_block["CapacityReservationId"]

    with pytest.raises(ClientError) as error:
        _block_fleet(ec2, template, "capacity-block", OnDemandTargetCapacity=1)
    assert error.value.response["Error"]["Code"] == "InvalidParameterCombination"


def test_ec2_warns_40_minutes_before_the_end_terminates_30_minutes_before_then_expires(
    ec2: Any,
    active_block: dict[str, Any],
    linux_ami: str,
    ec2_events: Callable[[], list[dict[str, Any]]],
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html: a
    "Capacity Block Reservation Delivered" event at the start; 40 minutes before the end a
    "Capacity Block Reservation Expiration Warning"; instances start terminating 10 minutes
    later (30 minutes before the end); the block is expired at its end date."""
    reservation_id = active_block["CapacityReservationId"]
    end = active_block["EndDate"]
    launched = _run_into(ec2, linux_ami, active_block, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    instance_id = launched["Instances"][0]["InstanceId"]

    advance_to(end, -41 * 60)
    assert "Capacity Block Reservation Expiration Warning" not in [
        e["detail-type"] for e in ec2_events()
    ]

    advance_to(end, -39 * 60)
    warning = ec2_events()[-1]
    assert warning["detail-type"] == "Capacity Block Reservation Expiration Warning"
    assert warning["source"] == "aws.ec2"
    assert warning["detail"]["capacity-reservation-id"] == reservation_id
    assert warning["resources"] == [active_block["CapacityReservationArn"]]
    assert _instance_state(ec2, instance_id) == "running"

    advance_to(end, -29 * 60)
    assert _instance_state(ec2, instance_id) == "terminated"
    assert _state(ec2, reservation_id) == "active"

    advance_to(end, 1)
    assert _state(ec2, reservation_id) == "expired"
    block = ec2.describe_capacity_blocks(Filters=[{"Name": "state", "Values": ["expired"]}])
    assert [b["CapacityReservationIds"] for b in block["CapacityBlocks"]] == [[reservation_id]]


def test_delivery_sends_the_delivered_event_when_the_block_starts(
    block: Callable[..., dict[str, Any]],
    ec2_events: Callable[[], list[dict[str, Any]]],
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html"""
    bought = block()
    advance_to(bought["StartDate"], 1)

    delivered = [
        e for e in ec2_events() if e["detail-type"] == "Capacity Block Reservation Delivered"
    ]
    assert len(delivered) == 1
    assert delivered[0]["detail"]["capacity-reservation-id"] == bought["CapacityReservationId"]
    assert delivered[0]["time"].startswith(
        bought["StartDate"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
    )


def test_a_block_cannot_be_modified_or_cancelled(ec2: Any, active_block: dict[str, Any]) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-release.html:
    you can't modify or cancel a Capacity Block."""
    reservation_id = active_block["CapacityReservationId"]
    with pytest.raises(ClientError) as error:
        ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
    assert error.value.response["Error"]["Code"] == "UnsupportedOperation"
    with pytest.raises(ClientError) as error:
        ec2.modify_capacity_reservation(CapacityReservationId=reservation_id, InstanceCount=1)
    assert error.value.response["Error"]["Code"] == "UnsupportedOperation"


def test_an_offering_is_sold_once(ec2: Any, offerings: Callable[..., list[dict[str, Any]]]) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html"""
    offering_id = offerings()[0]["CapacityBlockOfferingId"]
    ec2.purchase_capacity_block(CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX")

    with pytest.raises(ClientError) as error:
        ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX"
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_block_status_reports_total_and_available_capacity(
    ec2: Any, active_block: dict[str, Any], linux_ami: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityBlockStatus.html"""
    _run_into(ec2, linux_ami, active_block, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)

    status = ec2.describe_capacity_block_status(CapacityBlockIds=[active_block["CapacityBlockId"]])[
        "CapacityBlockStatuses"
    ][0]

    assert status["TotalCapacity"] == 2
    assert status["TotalAvailableCapacity"] == 1
    assert status["InterconnectStatus"] == "ok"
    assert (
        status["CapacityReservationStatuses"][0]["CapacityReservationId"]
        == (active_block["CapacityReservationId"])
    )


def test_a_block_purchase_can_be_forced_to_payment_failed(
    ec2: Any, block: Callable[..., dict[str, Any]]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html:
    payment-failed when the upfront payment was not processed; the block is released."""
    bought = block()
    moto_capacity.set_reservation_state(bought["CapacityReservationId"], "payment-failed")

    assert _state(ec2, bought["CapacityReservationId"]) == "payment-failed"
    moto_capacity.advance_clock(3 * 24 * 3600)
    assert _state(ec2, bought["CapacityReservationId"]) == "payment-failed"


def _instance_state(ec2: Any, instance_id: str) -> str:
    described = ec2.describe_instances(InstanceIds=[instance_id])
    return str(described["Reservations"][0]["Instances"][0]["State"]["Name"])


def test_only_instant_fleets_launch_into_blocks(
    ec2: Any, active_block: dict[str, Any], launch_template: Callable[..., str]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-capacity-blocks-walkthrough.html:
    Capacity Blocks are supported for EC2 Fleets of type instant only."""
    template = launch_template(InstanceType=BLOCK_TYPE)

    with pytest.raises(ClientError) as error:
        ec2.create_fleet(
            Type="request",
            LaunchTemplateConfigs=[
                {"LaunchTemplateSpecification": {"LaunchTemplateName": template}}
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "capacity-block",
            },
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_a_block_is_launched_into_by_its_own_id_never_through_a_group(
    ec2: Any,
    active_block: dict[str, Any],
    reservation: Callable[..., dict[str, Any]],
    capacity_group: Callable[..., str],
    linux_ami: str,
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html: "To use
    your Capacity Block, you must specify the Capacity Block reservation ID when launching
    instances": the capacity-block market with a group target is refused (InvalidParameterValue),
    even when the group holds the block. https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-lifecycle.html:
    the group's On-Demand Capacity Reservations still serve On-Demand launches targeting it."""
    odcr = reservation(
        InstanceType=BLOCK_TYPE,
        AvailabilityZone=active_block["AvailabilityZone"],
        InstanceMatchCriteria="targeted",
    )
    group = capacity_group(active_block["CapacityReservationArn"], odcr["CapacityReservationArn"])
    spec = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group}}
    placement = {"AvailabilityZone": active_block["AvailabilityZone"]}

    with pytest.raises(ClientError) as error:
        ec2.run_instances(
            ImageId=linux_ami,
            InstanceType=BLOCK_TYPE,
            MinCount=1,
            MaxCount=1,
            Placement=placement,
            CapacityReservationSpecification=spec,
            InstanceMarketOptions=CAPACITY_BLOCK_MARKET,
        )
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "own Capacity Reservation id" in error.value.response["Error"]["Message"]

    on_demand = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType=BLOCK_TYPE,
        MinCount=1,
        MaxCount=1,
        Placement=placement,
        CapacityReservationSpecification=spec,
    )
    assert on_demand["Instances"][0]["CapacityReservationId"] == odcr["CapacityReservationId"]


def test_instances_still_in_a_block_at_its_end_are_terminated_not_kept_on_demand(
    ec2: Any, active_block: dict[str, Any], linux_ami: str, advance_to: Callable[..., None]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlock.html: when a
    Capacity Block expires, all instances in it are terminated (an ODCR's keep running)."""
    advance_to(active_block["EndDate"], -20 * 60)
    late = _run_into(ec2, linux_ami, active_block, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    instance_id = late["Instances"][0]["InstanceId"]

    advance_to(active_block["EndDate"], 1)

    assert _instance_state(ec2, instance_id) == "terminated"


def test_an_instance_launched_into_a_block_in_its_last_30_minutes_is_terminated_then(
    ec2: Any, active_block: dict[str, Any], linux_ami: str, advance_to: Callable[..., None]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks.html: EC2 begins
    terminating any instances running in a Capacity Block 30 minutes before its end time; one
    launched after that moment runs in it too, so it is terminated as well, not kept until the
    end date (the emulator terminated only those there at the 30-minute mark)."""
    advance_to(active_block["EndDate"], -29 * 60)
    late = _run_into(ec2, linux_ami, active_block, InstanceMarketOptions=CAPACITY_BLOCK_MARKET)
    instance_id = late["Instances"][0]["InstanceId"]

    advance_to(active_block["EndDate"], -28 * 60)

    assert _instance_state(ec2, instance_id) == "terminated"
    assert _state(ec2, active_block["CapacityReservationId"]) == "active"


def test_a_block_never_takes_in_running_on_demand_instances_targeting_its_group(
    ec2: Any,
    block: Callable[..., dict[str, Any]],
    capacity_group: Callable[..., str],
    resource_groups: Any,
    linux_ami: str,
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-lifecycle.html: instances
    targeting a group move into its On-Demand Capacity Reservations; a Capacity Block serves only
    instances launched with its market type."""
    bought = block()
    group = capacity_group()
    running = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType=BLOCK_TYPE,
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": bought["AvailabilityZone"]},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group}
        },
    )["Instances"][0]
    resource_groups.group_resources(Group=group, ResourceArns=[bought["CapacityReservationArn"]])

    advance_to(bought["StartDate"], 1)

    described = ec2.describe_instances(InstanceIds=[running["InstanceId"]])
    assert "CapacityReservationId" not in described["Reservations"][0]["Instances"][0]


def test_offerings_fall_within_the_start_and_end_date_ranges(
    offerings: Callable[..., list[dict[str, Any]]],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityBlockOfferings.html
    (StartDateRange: the earliest start; EndDateRange: the latest end)."""
    earliest = CLOCK.now() + timedelta(days=3)
    latest = earliest + timedelta(days=4)

    found = offerings(StartDateRange=earliest, EndDateRange=latest, CapacityDurationHours=24)

    assert found
    assert all(o["StartDate"] >= earliest and o["EndDate"] <= latest for o in found)
    assert offerings(StartDateRange=CLOCK.now() + timedelta(weeks=9)) == []


def test_the_clock_endpoint_drives_a_block_from_purchase_to_expiry_over_http(
    server_client: Callable[[str], Any], server_url: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html, on the
    emulator's clock: POST /moto-capacity/clock moves it; the events are in the state."""
    ec2 = server_client("ec2")
    offering = ec2.describe_capacity_block_offerings(
        InstanceType=BLOCK_TYPE, InstanceCount=1, CapacityDurationHours=24
    )["CapacityBlockOfferings"][0]
    bought = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )["CapacityReservation"]
    reservation_id = bought["CapacityReservationId"]
    to_start = (bought["StartDate"] - CLOCK.now()).total_seconds() + 1

    _post(server_url, "/moto-capacity/clock", {"advanceSeconds": to_start})
    assert _state(ec2, reservation_id) == "active"

    state = _post(server_url, "/moto-capacity/clock", {"advanceSeconds": 24 * 3600})
    assert _state(ec2, reservation_id) == "expired"
    assert [e["detail-type"] for e in state["ec2Events"]] == [
        "Capacity Block Reservation Delivered",
        "Capacity Block Reservation Expiration Warning",
    ]


def _post(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())
