"""EC2NodeClass status and NodeClaims as Karpenter users see them; security groups found by
selector terms; Karpenter's launch options in the launch template."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from capacity_launcher.adapters.image_selection import ImageSelection, describe_request
from capacity_launcher.adapters.instance_profiles import InstanceProfiles
from capacity_launcher.adapters.instance_types import instance_type_info
from capacity_launcher.adapters.security_groups import SecurityGroups
from capacity_launcher.adapters.template_data import template_data
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.karpenter.status import (
    Resolved,
    ResolvedNodeClass,
    ec2nodeclass_status,
    nodeclaim,
)
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.image_architectures import ImageArchitecture
from capacity_launcher.domain.capacity.requirements import (
    INSTANCE_LOCAL_NVME,
    Operator,
    Requirement,
)
from capacity_launcher.domain.errors import InstanceProfileNotReady, NodeClassRefused
from capacity_launcher.domain.records.instance_records import InstanceRecord

AT = "2026-11-26T04:00:00+00:00"


def node_class(**spec: Any) -> NodeClass:
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": "nodes"},
        "spec": {
            k: v
            for k, v in (
                {"imageId": "ami-0123456789abcdef0", "subnetIds": ["subnet-0123456789abcdef0"]}
                | ({} if "securityGroupSelectorTerms" in spec else {"securityGroupIds": ["sg-1"]})
                | spec
            ).items()
            if v is not None
        },
    }
    parsed = parse_document(document)
    assert isinstance(parsed, NodeClass)
    return parsed


def test_a_stopped_instance_is_a_launched_nodeclaim_that_is_not_ready() -> None:
    record = InstanceRecord(
        instance_id="i-0123456789abcdef0",
        instance_type="m5.large",
        capacity_type="on-demand",
        request_id="r-1",
        node_pool="general",
        node_class="nodes",
        zone="us-east-1a",
        cpu=Decimal(2),
        memory_mib=8192,
        state="stopped",
        launched_at=AT,
    )
    claim = nodeclaim(record, None)
    assert claim["status"]["capacity"] == {"cpu": "2", "memory": "8Gi"}
    assert claim["status"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0"
    ready = {c["type"]: c for c in claim["status"]["conditions"]}
    assert ready["Launched"]["status"] == "True"
    assert (ready["Ready"]["status"], ready["Ready"]["reason"]) == ("False", "Stopped")
    assert claim["metadata"]["annotations"] == {"capacity-launcher/request-id": "r-1"}


def test_a_selector_that_resolves_to_nothing_makes_the_class_not_ready() -> None:
    resolved = ResolvedNodeClass(
        subnets=Resolved([("subnet-0123456789abcdef0", "us-east-1a")]),
        security_groups=Resolved(error="spec.securityGroupSelectorTerms: selects nothing"),
        images=Resolved([(ImageArchitecture("ami-0123456789abcdef0", "arm64"), "al2023")]),
        reservations_asked=True,
    )
    status = ec2nodeclass_status(resolved, AT)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["SubnetsReady"]["status"] == "True"
    assert conditions["SecurityGroupsReady"]["message"].endswith("selects nothing")
    assert conditions["CapacityReservationsReady"]["status"] == "False"
    assert conditions["Ready"]["status"] == "False"
    assert status["amis"][0]["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    ]


@mock_aws
def test_a_role_that_does_not_exist_makes_instance_profile_ready_false_naming_spec_role() -> None:
    iam = boto3.client("iam", region_name="us-east-1")
    profiles = InstanceProfiles("state-table", iam, "us-east-1")
    missing = node_class(securityGroupIds=["sg-0a1b2c3d4e5f67890"], role="KarpenterNodeRole-x")
    with pytest.raises(InstanceProfileNotReady) as refused:
        profiles.status(missing)
    status = ec2nodeclass_status(
        ResolvedNodeClass(role_profile=Resolved(error=str(refused.value))), AT
    )
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["InstanceProfileReady"]["status"] == "False"
    assert conditions["InstanceProfileReady"]["reason"] == "InstanceProfileNotReady"
    message = conditions["InstanceProfileReady"]["message"]
    assert message.startswith(
        "spec.role: NodeClass nodes: role 'KarpenterNodeRole-x': RoleNotFound"
    )
    assert conditions["Ready"]["status"] == "False"
    assert "instanceProfile" not in status
    # Once the role exists it is ready, under the name the launcher will make the profile with
    iam.create_role(RoleName="KarpenterNodeRole-x", AssumeRolePolicyDocument="{}")
    name = profiles.status(missing)
    assert name == profiles.name(missing) and name is not None
    ready = ec2nodeclass_status(ResolvedNodeClass(role_profile=Resolved([name])), AT)
    assert ready["instanceProfile"] == name
    assert {c["type"]: c["status"] for c in ready["conditions"]}["InstanceProfileReady"] == "True"


@mock_aws
def test_a_read_only_ensure_checks_the_role_and_makes_no_profile() -> None:
    # A dry run (`submit --dry-run`) resolves the class as the launcher would, making nothing
    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_role(RoleName="KarpenterNodeRole-x", AssumeRolePolicyDocument="{}")
    roled = node_class(securityGroupIds=["sg-0a1b2c3d4e5f67890"], role="KarpenterNodeRole-x")
    looked = InstanceProfiles("state-table", iam, "us-east-1", read_only=True)
    assert looked.ensure(roled) == looked.name(roled)
    assert iam.list_instance_profiles()["InstanceProfiles"] == []
    made = InstanceProfiles("state-table", iam, "us-east-1")
    assert made.ensure(roled) == looked.name(roled)
    (profile,) = iam.list_instance_profiles()["InstanceProfiles"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["KarpenterNodeRole-x"]


@mock_aws
def test_security_groups_are_found_by_name_tags_or_id_and_refused_when_none() -> None:
    """DescribeSecurityGroups filters group-name, group-id and tag:KEY:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSecurityGroups.html"""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    named = ec2.create_security_group(GroupName="nodes", Description="nodes")["GroupId"]
    tagged = ec2.create_security_group(GroupName="other", Description="other")["GroupId"]
    ec2.create_tags(Resources=[tagged], Tags=[{"Key": "karpenter.sh/discovery", "Value": "c"}])
    groups = SecurityGroups(ec2)
    terms = [{"name": "nodes"}, {"tags": {"karpenter.sh/discovery": "c"}}]
    found = groups.ids(node_class(securityGroupSelectorTerms=terms))
    assert found == tuple(sorted([named, tagged]))
    assert groups.ids(node_class(securityGroupSelectorTerms=[{"id": named}])) == (named,)
    with pytest.raises(NodeClassRefused, match=r"spec\.securityGroupSelectorTerms"):
        groups.ids(node_class(securityGroupSelectorTerms=[{"name": "missing"}]))


def test_launch_templates_carry_block_devices_and_metadata_options() -> None:
    nodes = node_class(
        securityGroupSelectorTerms=[{"name": "nodes"}],
        blockDeviceMappings=[
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "2Ti", "encrypted": True}}
        ],
        metadataOptions={"httpTokens": "optional", "httpEndpoint": "enabled"},
    )
    data = template_data(
        nodes, "ami-0123456789abcdef0", {}, security_group_ids=["sg-0a1b2c3d4e5f67890"]
    )
    assert data["SecurityGroupIds"] == ["sg-0a1b2c3d4e5f67890"]
    assert data["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvdb", "Ebs": {"Encrypted": True, "VolumeSize": 2048}}
    ]
    # Instance tags stay out of the metadata service unless the class says otherwise
    assert data["MetadataOptions"] == {
        "HttpTokens": "optional",
        "HttpEndpoint": "enabled",
        "InstanceMetadataTags": "disabled",
    }
    plain = template_data(node_class(securityGroupIds=["sg-0a1b2c3d4e5f67890"]), "ami-1", {})
    assert plain["MetadataOptions"] == {
        "HttpTokens": "required",
        "HttpEndpoint": "enabled",
        "InstanceMetadataTags": "disabled",
    }
    tagged = node_class(
        securityGroupIds=["sg-0a1b2c3d4e5f67890"],
        metadataOptions={"instanceMetadataTags": "enabled"},
    )
    assert (
        template_data(tagged, "ami-1", {})["MetadataOptions"]["InstanceMetadataTags"] == "enabled"
    )
    assert "BlockDeviceMappings" not in plain


@mock_aws
def test_local_nvme_is_labelled_as_karpenter_labels_it() -> None:
    """InstanceStorageInfo TotalSizeInGB, when NvmeSupport is not `unsupported`:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStorageInfo.html"""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    described = ec2.describe_instance_types(InstanceTypes=["c5.large", "c5d.large", "m5d.4xlarge"])
    infos = {t["InstanceType"]: instance_type_info(t) for t in described["InstanceTypes"]}
    assert {name: info.local_nvme_gb for name, info in infos.items()} == {
        "c5.large": None,
        "c5d.large": 50,
        "m5d.4xlarge": 600,
    }
    wants = Requirements.of(
        [Requirement(key=INSTANCE_LOCAL_NVME, operator=Operator.GT, values=("300",))]
    )
    assert [name for name, info in sorted(infos.items()) if info.matches(wants)] == ["m5d.4xlarge"]


@mock_aws
def test_images_are_selected_by_tags_and_name_the_newest_wins_and_none_is_refused() -> None:
    """DescribeImages Owners (self, amazon) and name / tag:KEY filters:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeImages.html"""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    base = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=base, MinCount=1, MaxCount=1)["Instances"][0]
    mine = ec2.create_image(InstanceId=instance["InstanceId"], Name="team-ml-2026")["ImageId"]
    ec2.create_tags(Resources=[mine], Tags=[{"Key": "team", "Value": "ml"}])
    selection = ImageSelection(ec2)
    by_tags = node_class(imageId=None, imageSelectorTerms=[{"tags": {"team": "ml"}}])
    assert selection.image_id(by_tags) == mine
    by_name = node_class(imageId=None, imageSelectorTerms=[{"name": "team-ml-*"}])
    assert selection.image_id(by_name) == mine
    assert describe_request(by_name.spec.image_selector_terms[0])["Owners"] == ["self", "amazon"]
    none = node_class(imageId=None, imageSelectorTerms=[{"name": "nothing-*", "owner": "self"}])
    with pytest.raises(NodeClassRefused, match=r"spec\.imageSelectorTerms"):
        selection.image_id(none)
