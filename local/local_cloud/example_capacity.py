"""The reservations examples/ names, on the local cloud: the targeted ODCR tagged for `training`
and the `batch-reservations` group the `batch` NodeClass targets, so the example pools launch as
written (`local up` and the demo create them; on AWS they are your own)."""

from __future__ import annotations

from typing import Any

from capacity_launcher_client.deployment import Deployment

DEMO_ZONE, OTHER_ZONE = "us-east-1a", "us-east-1b"
TRAINING_TAG = {"reservation": "training"}
BATCH_TAG = {"team": "batch"}
GROUP_NAME = "batch-reservations"


def _reserve(ec2: Any, instance_type: str, zone: str, count: int, tags: dict[str, str]) -> str:
    reservation = ec2.create_capacity_reservation(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ],
    )
    return str(reservation["CapacityReservation"]["CapacityReservationArn"])


def create_reservations(deployment: Deployment) -> str:
    """One targeted reservation for training (2 m5.xlarge), and a group of two for batch (2
    c5.large in each of two zones); the group's ARN."""
    ec2 = deployment.client("ec2")
    groups = deployment.client("resource-groups")
    _reserve(ec2, "m5.xlarge", DEMO_ZONE, 2, TRAINING_TAG)
    members = [_reserve(ec2, "c5.large", zone, 2, BATCH_TAG) for zone in (DEMO_ZONE, OTHER_ZONE)]
    group = groups.create_group(
        Name=GROUP_NAME,
        Configuration=[
            {"Type": "AWS::EC2::CapacityReservationPool"},
            {
                "Type": "AWS::ResourceGroups::Generic",
                "Parameters": [
                    {"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}
                ],
            },
        ],
    )
    arn = str(group["Group"]["GroupArn"])
    groups.group_resources(Group=arn, ResourceArns=members)
    return arn
