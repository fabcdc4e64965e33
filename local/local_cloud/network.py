"""The network examples/ expects in the local cloud: subnets tagged `tier: private` (and named
`private-<zone>`) and a security group with a fixed id, so the example NodeClasses apply and
launch as written (and Karpenter's discovery tag on both, for examples/karpenter/)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from botocore.exceptions import ClientError

from local_cloud.karpenter import tag_for_discovery

SUBNET_TAG = {"tier": "private"}
NODE_SECURITY_GROUP_ID = "sg-0a1b2c3d4e5f67890"
NODE_SECURITY_GROUP_NAME = "capacity-launcher-nodes"
# moto draws EC2 ids at random and honours no custom-id tag for security groups.
_MOTO_ID_FUNCTION = "moto.ec2.models.security_groups.random_security_group_id"


def prepare_network(ec2: Any) -> dict[str, list[str]]:
    """Tag the default VPC's subnets and create the nodes' security group (idempotent); both
    also carry Karpenter's discovery tag (local_cloud/karpenter.py)."""
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    subnet_ids = [s["SubnetId"] for s in subnets["Subnets"]]
    ec2.create_tags(
        Resources=subnet_ids, Tags=[{"Key": k, "Value": v} for k, v in SUBNET_TAG.items()]
    )
    # A Name per zone, for documents that pick subnets by name (a v1alpha4 Provisioner's).
    for subnet in subnets["Subnets"]:
        name = f"private-{subnet['AvailabilityZone']}"
        ec2.create_tags(Resources=[subnet["SubnetId"]], Tags=[{"Key": "Name", "Value": name}])
    try:
        ec2.describe_security_groups(GroupIds=[NODE_SECURITY_GROUP_ID])
    except ClientError:
        with mock.patch(_MOTO_ID_FUNCTION, return_value=NODE_SECURITY_GROUP_ID):
            ec2.create_security_group(
                GroupName=NODE_SECURITY_GROUP_NAME,
                Description="Nodes launched by capacity-launcher (local cloud)",
            )
    tag_for_discovery(ec2, [*subnet_ids, NODE_SECURITY_GROUP_ID])
    return {"subnets": subnet_ids, "securityGroups": [NODE_SECURITY_GROUP_ID]}
