"""Image platforms and reservation platform matching.

- EC2 User Guide, "Understand AMI billing information"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ami-billing-info.html): every AMI has
  PlatformDetails and UsageOperation (RunInstances:0010 for Red Hat Enterprise Linux, ...).
- EC2 User Guide, "Launch instances into an existing Capacity Reservation"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html): an
  instance uses a reservation only if its platform matches the reservation's InstancePlatform.
"""

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

ZONE = "us-east-1a"


def _run(ec2: Any, image: str, **extra: Any) -> dict[str, Any]:
    return ec2.run_instances(  # type: ignore[no-any-return]
        ImageId=image,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE},
        **extra,
    )["Instances"][0]


def _targeting(reservation_id: str) -> dict[str, Any]:
    return {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        }
    }


@pytest.mark.parametrize(
    ("platform", "usage_operation"),
    [
        ("Red Hat Enterprise Linux", "RunInstances:0010"),
        ("SUSE Linux", "RunInstances:000g"),
        ("Ubuntu Pro", "RunInstances:0g00"),
        ("Windows with SQL Server Standard", "RunInstances:0006"),
    ],
)
def test_registered_images_carry_their_billing_fields(
    ec2: Any, platform: str, usage_operation: str
) -> None:
    """ "Understand AMI billing information": PlatformDetails and UsageOperation."""
    image_id = moto_capacity.register_image("us-east-1", platform)

    (image,) = ec2.describe_images(ImageIds=[image_id])["Images"]

    assert (image["PlatformDetails"], image["UsageOperation"]) == (platform, usage_operation)


def test_moto_catalogue_images_are_windows_or_linux(ec2: Any, windows_ami: str) -> None:
    (windows,) = ec2.describe_images(ImageIds=[windows_ami])["Images"]
    linux = next(i for i in ec2.describe_images(Owners=["amazon"])["Images"] if "Platform" not in i)

    assert (windows["PlatformDetails"], windows["UsageOperation"]) == (
        "Windows",
        "RunInstances:0002",
    )
    assert (linux["PlatformDetails"], linux["UsageOperation"]) == ("Linux/UNIX", "RunInstances")


def test_a_targeted_launch_needs_the_reservations_platform(
    ec2: Any, reservation: Callable[..., dict[str, Any]]
) -> None:
    """ "Launch instances into an existing Capacity Reservation": platforms must match."""
    rhel = moto_capacity.register_image("us-east-1", "Red Hat Enterprise Linux")
    linux_only = reservation(InstanceMatchCriteria="targeted")["CapacityReservationId"]
    for_rhel = reservation(
        InstancePlatform="Red Hat Enterprise Linux", InstanceMatchCriteria="targeted"
    )["CapacityReservationId"]

    with pytest.raises(ClientError) as refused:
        _run(ec2, rhel, **_targeting(linux_only))
    launched = _run(ec2, rhel, **_targeting(for_rhel))

    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Red Hat Enterprise Linux" in refused.value.response["Error"]["Message"]
    assert launched["CapacityReservationId"] == for_rhel


def test_open_launches_use_only_open_reservations_of_their_platform(
    ec2: Any, reservation: Callable[..., dict[str, Any]], linux_ami: str
) -> None:
    ubuntu_pro = moto_capacity.register_image("us-east-1", "Ubuntu Pro")
    linux = reservation()["CapacityReservationId"]
    pro = reservation(InstancePlatform="Ubuntu Pro")["CapacityReservationId"]

    first = _run(ec2, ubuntu_pro)
    second = _run(ec2, linux_ami)

    assert first["CapacityReservationId"] == pro
    assert second["CapacityReservationId"] == linux


def test_fleet_reports_windows_for_windows_with_sql_server(
    ec2: Any, reservation: Callable[..., dict[str, Any]]
) -> None:
    image = moto_capacity.register_image("us-east-1", "Windows with SQL Server Web")
    ec2.create_launch_template(LaunchTemplateName="sql", LaunchTemplateData={"ImageId": image})

    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "sql"},
                "Overrides": [{"InstanceType": "m5.large", "AvailabilityZone": ZONE}],
            }
        ],
    )

    assert fleet["Instances"][0]["Platform"] == "Windows"


def test_unknown_platform_is_refused() -> None:
    with pytest.raises(ValueError, match="platformDetails must be one of"):
        moto_capacity.register_image("us-east-1", "Plan 9")


def test_register_image_over_http(server_url: str, server_client: Callable[[str], Any]) -> None:
    request = urllib.request.Request(
        server_url + "/moto-capacity/images",
        data=json.dumps({"region": "us-east-1", "platformDetails": "SUSE Linux"}).encode(),
        method="POST",
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request) as answer:
        (registered,) = json.loads(answer.read())["images"]

    (image,) = server_client("ec2").describe_images(ImageIds=[registered["imageId"]])["Images"]

    assert registered["platformDetails"] == image["PlatformDetails"] == "SUSE Linux"
    assert registered["usageOperation"] == image["UsageOperation"] == "RunInstances:000g"
