"""Issue 12.5: the image's platform decides which reservations a NodeClass can use.

EC2 User Guide, "Understand AMI billing information" (PlatformDetails, UsageOperation) and
"Launch instances into an existing Capacity Reservation" (the platform must match the
reservation's InstancePlatform).
"""

from __future__ import annotations

import moto_capacity
from capacity_launcher.domain.capacity.platforms import PLATFORM_MISMATCH
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import Cloud, launch_request

RHEL = "Red Hat Enterprise Linux"


def reserve(cloud: Cloud, platform: str, **extra: object) -> str:
    response = cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform=platform,
        AvailabilityZone=ZONE,
        InstanceCount=2,
        **extra,
    )
    reservation_id = str(response["CapacityReservation"]["CapacityReservationId"])
    cloud.wait_until_active(reservation_id)
    return reservation_id


def test_a_rhel_image_launches_into_its_rhel_reservation(cloud: Cloud, subnets):
    # Given a NodeClass with a RHEL image targeting a RHEL reservation
    image = moto_capacity.register_image("us-east-1", RHEL)
    reservation = reserve(cloud, RHEL, InstanceMatchCriteria="targeted")
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("reserved",),
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    # When one instance is requested
    cloud.send(launch_request("rhel-1", nodePool="general"))
    # Then it runs in the reservation
    record = cloud.record("rhel-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]


def test_a_targeted_reservation_of_another_platform_fails_with_a_clear_error(cloud: Cloud, subnets):
    # Given a NodeClass with a RHEL image targeting a Linux/UNIX reservation, reserved only
    image = moto_capacity.register_image("us-east-1", RHEL)
    reservation = reserve(cloud, "Linux/UNIX", InstanceMatchCriteria="targeted")
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("reserved",),
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    # When one instance is requested
    handed_back = cloud.send(launch_request("mismatch-1", nodePool="general"))
    # Then nothing is launched, and the record names the image and the reservation's platform
    record = cloud.record("mismatch-1")
    assert handed_back == []
    assert record is not None and record.status is RequestStatus.FAILED
    (error,) = [e for e in record.errors if e.code == PLATFORM_MISMATCH]
    assert f"spec.imageId {image} runs {RHEL}" in error.message
    assert f"{reservation} is for Linux/UNIX instances" in error.message
    assert cloud.managed_instances() == []


def test_selector_terms_skip_reservations_of_another_platform(cloud: Cloud, subnets):
    # Given reservations of two platforms with the same tag, and a Ubuntu Pro image
    image = moto_capacity.register_image("us-east-1", "Ubuntu Pro")
    tags = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    reserve(cloud, "Linux/UNIX", InstanceMatchCriteria="targeted", TagSpecifications=tags)
    pro = reserve(cloud, "Ubuntu Pro", InstanceMatchCriteria="targeted", TagSpecifications=tags)
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("reserved",),
        selector_terms=[{"tags": {"team": "ml"}}],
    )
    # When two instances are requested
    cloud.send(launch_request("pro-1", nodePool="general", count=2))
    # Then both run in the Ubuntu Pro reservation, and no platform error is reported
    record = cloud.record("pro-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_reservation_id for i in record.instances] == [pro, pro]
    assert not [e for e in record.errors if e.code == PLATFORM_MISMATCH]
