"""Issue 39: the service reads Capacity Block extension offerings and buys one, on the local cloud
(adapters/capacity_reservations.py); EC2 keeps the block's id and moves its end once paid
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html), and the sync's
snapshot shows the new end."""

from __future__ import annotations

from datetime import timedelta

import pytest

import moto_capacity
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.domain.errors import LaunchFailed
from tests.integration.test_launch_into_gpu_reservations import (
    advance_to,
    buy_block,
    reserved_only_pool,
)
from tests.integration.test_reservation_sync import snapshot, sync


def test_the_adapter_reads_an_offering_buys_it_and_the_snapshot_follows_the_new_end(
    cloud, subnets, image
):
    block = buy_block(cloud)
    reservation_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, reservation_id)
    advance_to(block["StartDate"], 1)
    reservations = CapacityReservations(cloud.ec2)

    [offering] = reservations.extension_offerings(reservation_id, 48)
    assert offering.reservation_id == reservation_id
    assert offering.starts_at == block["EndDate"]
    assert offering.ends_at == block["EndDate"] + timedelta(hours=48)
    assert offering.instance_count == 2
    assert offering.upfront_fee is not None and offering.upfront_fee > 0

    bought = reservations.purchase_extension(offering.offering_id, reservation_id)
    assert bought.status == "payment-pending" and not bought.paid
    assert bought.ends_at == offering.ends_at

    moto_capacity.advance_clock(60)
    [described] = reservations.describe([reservation_id])
    assert described.end_date == offering.ends_at
    sync()
    assert snapshot(reservation_id).snapshot.end_date == offering.ends_at


def test_a_refusal_names_ec2s_code(cloud):
    reservations = CapacityReservations(cloud.ec2)
    odcr = cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=1,
    )["CapacityReservation"]

    with pytest.raises(LaunchFailed) as error:
        reservations.extension_offerings(odcr["CapacityReservationId"], 24)
    assert error.value.code == "InvalidParameterValue"
    assert "only Capacity Blocks can be extended" in error.value.message
