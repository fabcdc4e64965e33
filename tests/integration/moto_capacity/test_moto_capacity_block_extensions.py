"""Capacity Block extensions through EC2's own API: offerings, purchase, payment on the
emulator's clock, and the end date they move.

https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html ("Extend Capacity
Blocks") and the API reference pages
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityBlockExtensionOfferings.html,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_PurchaseCapacityBlockExtension.html,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlockExtension.html.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

pytestmark = pytest.mark.usefixtures("aws")


def _extension_offerings(ec2: Any, reservation_id: str, hours: int = 24) -> list[dict[str, Any]]:
    answer = ec2.describe_capacity_block_extension_offerings(
        CapacityReservationId=reservation_id, CapacityBlockExtensionDurationHours=hours
    )
    return answer["CapacityBlockExtensionOfferings"]  # type: ignore[no-any-return]


def _extend(ec2: Any, reservation_id: str, hours: int = 24) -> dict[str, Any]:
    offering = _extension_offerings(ec2, reservation_id, hours)[0]
    answer = ec2.purchase_capacity_block_extension(
        CapacityBlockExtensionOfferingId=offering["CapacityBlockExtensionOfferingId"],
        CapacityReservationId=reservation_id,
    )
    return answer["CapacityBlockExtensions"][0]  # type: ignore[no-any-return]


def _reservation(ec2: Any, reservation_id: str) -> dict[str, Any]:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return found["CapacityReservations"][0]  # type: ignore[no-any-return]


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_an_offering_starts_at_the_blocks_end_and_names_the_block(
    ec2: Any, active_block: dict[str, Any]
) -> None:
    """API_CapacityBlockExtensionOffering: the extension starts at the block's end date, for the
    block's type, count and zone; its start date is the block's."""
    reservation_id = active_block["CapacityReservationId"]

    [offering] = _extension_offerings(ec2, reservation_id, 48)

    assert offering["CapacityBlockExtensionStartDate"] == active_block["EndDate"]
    assert offering["CapacityBlockExtensionEndDate"] == active_block["EndDate"] + timedelta(
        hours=48
    )
    assert offering["CapacityBlockExtensionDurationHours"] == 48
    assert offering["StartDate"] == active_block["StartDate"]
    assert offering["InstanceType"] == active_block["InstanceType"]
    assert offering["InstanceCount"] == active_block["TotalInstanceCount"]
    assert offering["AvailabilityZone"] == active_block["AvailabilityZone"]
    assert offering["CurrencyCode"] == "USD"
    assert float(offering["UpfrontFee"]) > 0


def test_a_purchase_is_payment_pending_then_moves_the_end_date_keeping_the_id(
    ec2: Any, active_block: dict[str, Any]
) -> None:
    """ "Extend Capacity Blocks", Billing: payment-pending until paid, then payment-succeeded and
    the end date is the extension's; "Your Capacity Reservation ID will remain the same". The
    block's own listing (DescribeCapacityBlocks) shows the new end too."""
    reservation_id = active_block["CapacityReservationId"]
    old_end = active_block["EndDate"]

    extension = _extend(ec2, reservation_id, 24)

    assert extension["CapacityBlockExtensionStatus"] == "payment-pending"
    assert extension["CapacityReservationId"] == reservation_id
    assert _reservation(ec2, reservation_id)["EndDate"] == old_end

    moto_capacity.advance_clock(60)

    new_end = old_end + timedelta(hours=24)
    reservation = _reservation(ec2, reservation_id)
    assert reservation["EndDate"] == new_end
    assert reservation["State"] == "active"
    blocks = ec2.describe_capacity_blocks(CapacityBlockIds=[active_block["CapacityBlockId"]])
    assert blocks["CapacityBlocks"][0]["EndDate"] == new_end
    assert blocks["CapacityBlocks"][0]["CapacityReservationIds"] == [reservation_id]
    history = ec2.describe_capacity_block_extension_history(
        CapacityReservationIds=[reservation_id]
    )["CapacityBlockExtensions"]
    assert [h["CapacityBlockExtensionStatus"] for h in history] == ["payment-succeeded"]


def test_an_extended_block_keeps_its_instances_past_the_old_end(
    ec2: Any,
    active_block: dict[str, Any],
    linux_ami: str,
    advance_to: Callable[..., None],
) -> None:
    """ "When you extend your Capacity Block, its end date will be updated so that your
    instances can continue to run without disruption": nothing is terminated 30 minutes before
    the old end, the block expires at the new one."""
    reservation_id = active_block["CapacityReservationId"]
    launched = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType=active_block["InstanceType"],
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": active_block["AvailabilityZone"]},
        InstanceMarketOptions={"MarketType": "capacity-block"},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        },
    )
    instance_id = launched["Instances"][0]["InstanceId"]
    _extend(ec2, reservation_id, 24)

    advance_to(active_block["EndDate"], 60)

    state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert state["State"]["Name"] == "running"
    assert _reservation(ec2, reservation_id)["State"] == "active"
    advance_to(active_block["EndDate"] + timedelta(hours=24), 1)
    assert _reservation(ec2, reservation_id)["State"] == "expired"


def test_extensions_can_follow_each_other_once_the_last_is_paid(
    ec2: Any, active_block: dict[str, Any]
) -> None:
    """ "no extensions that are payment-pending"; "no limit to the number of extensions"."""
    reservation_id = active_block["CapacityReservationId"]
    _extend(ec2, reservation_id, 24)

    with pytest.raises(ClientError) as error:
        _extension_offerings(ec2, reservation_id)
    assert _code(error) == "IncorrectState"

    moto_capacity.advance_clock(60)
    second = _extend(ec2, reservation_id, 48)
    moto_capacity.advance_clock(60)

    assert second["CapacityBlockExtensionStartDate"] == active_block["EndDate"] + timedelta(
        hours=24
    )
    assert _reservation(ec2, reservation_id)["EndDate"] == active_block["EndDate"] + timedelta(
        hours=72
    )


def test_durations_follow_the_block_steps(ec2: Any, active_block: dict[str, Any]) -> None:
    """1-day steps up to 14 days, then 7-day steps."""
    reservation_id = active_block["CapacityReservationId"]

    for hours in (1, 25, 14 * 24 + 24):
        with pytest.raises(ClientError) as error:
            _extension_offerings(ec2, reservation_id, hours)
        assert _code(error) == "InvalidParameterValue"
    assert _extension_offerings(ec2, reservation_id, 21 * 24)


def test_only_a_scheduled_or_active_block_within_its_window_is_extended(
    ec2: Any,
    block: Callable[..., dict[str, Any]],
    active_block: dict[str, Any],
    advance_to: Callable[..., None],
) -> None:
    """ "it must have a status of active or scheduled"; "up to a minimum of 1 hour ... before it
    expires"; only Capacity Blocks are extended."""
    pending = block(InstanceCount=1)
    with pytest.raises(ClientError) as error:
        _extension_offerings(ec2, pending["CapacityReservationId"])
    assert _code(error) == "IncorrectState"

    moto_capacity.advance_clock(60)
    assert _extension_offerings(ec2, pending["CapacityReservationId"])  # scheduled

    odcr = ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=1,
    )["CapacityReservation"]
    with pytest.raises(ClientError) as error:
        _extension_offerings(ec2, odcr["CapacityReservationId"])
    assert _code(error) == "InvalidParameterValue"

    advance_to(active_block["EndDate"], -59 * 60)
    with pytest.raises(ClientError) as error:
        _extension_offerings(ec2, active_block["CapacityReservationId"])
    assert _code(error) == "InvalidParameterValue"


def test_no_offering_without_block_capacity_and_an_offering_is_sold_once(
    ec2: Any, active_block: dict[str, Any]
) -> None:
    """ "Capacity Blocks can only be extended if there is sufficient capacity available"."""
    reservation_id = active_block["CapacityReservationId"]
    offering = _extension_offerings(ec2, reservation_id)[0]
    moto_capacity.set_capacity(
        "us-east-1",
        active_block["InstanceType"],
        active_block["AvailabilityZone"],
        "capacity-block",
        1,
    )

    assert _extension_offerings(ec2, reservation_id) == []
    with pytest.raises(ClientError) as error:
        ec2.purchase_capacity_block_extension(
            CapacityBlockExtensionOfferingId=offering["CapacityBlockExtensionOfferingId"],
            CapacityReservationId=reservation_id,
        )
    assert _code(error) == "InvalidParameterValue"


def test_a_payment_not_made_35_minutes_before_the_end_fails_and_the_block_ends_as_before(
    ec2: Any, active_block: dict[str, Any], advance_to: Callable[..., None]
) -> None:
    """Billing: not paid "up to 35 minutes before the Capacity Block is scheduled to end",
    the extension is payment-failed and the block ends at its original end date."""
    reservation_id = active_block["CapacityReservationId"]
    advance_to(active_block["EndDate"], -90 * 60)
    moto_capacity.set_lifecycle(payment_pending_seconds=3600)

    _extend(ec2, reservation_id, 24)
    advance_to(active_block["EndDate"], -36 * 60)
    assert _reservation(ec2, reservation_id)["EndDate"] == active_block["EndDate"]
    advance_to(active_block["EndDate"], -34 * 60)

    history = ec2.describe_capacity_block_extension_history(
        Filters=[{"Name": "capacity-reservation-id", "Values": [reservation_id]}]
    )["CapacityBlockExtensions"]
    assert [h["CapacityBlockExtensionStatus"] for h in history] == ["payment-failed"]
    advance_to(active_block["EndDate"], 1)
    assert _reservation(ec2, reservation_id)["State"] == "expired"
