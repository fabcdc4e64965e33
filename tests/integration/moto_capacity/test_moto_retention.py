"""What EC2 keeps and for how long: the launch-template quota, terminated instances leaving
DescribeInstances after about an hour, and tag-scoped TerminateInstances of an instance that is
gone (moto_capacity.ec2.models.retention)."""

from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity

MANAGED = "capacity-launcher:managed"


def _launch(ec2: Any, image: str, count: int = 1, tags: dict[str, str] | None = None) -> list[str]:
    extra: dict[str, Any] = {}
    if tags:
        extra["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    answer = ec2.run_instances(
        ImageId=image, MinCount=count, MaxCount=count, InstanceType="m5.large", **extra
    )
    return [i["InstanceId"] for i in answer["Instances"]]


def test_create_launch_template_beyond_the_quota_is_refused_until_one_is_deleted(
    ec2: Any, linux_ami: str
) -> None:
    """EC2 User Guide, "Restrictions for Amazon EC2 launch templates"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/launch-template-restrictions.html):
    5,000 launch templates per Region; EC2 API Reference, "Error codes for the Amazon EC2 API"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html):
    ResourceLimitExceeded."""
    # Given a quota of two, held
    assert moto_capacity.state()["retention"]["launchTemplateQuota"] == 5000
    moto_capacity.set_launch_template_quota(2)
    for name in ("lt-a", "lt-b"):
        ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={})

    # When a third is created, then: refused
    with pytest.raises(ClientError) as refused:
        ec2.create_launch_template(LaunchTemplateName="lt-c", LaunchTemplateData={})
    assert refused.value.response["Error"]["Code"] == "ResourceLimitExceeded"
    # An existing name still answers AlreadyExists, as before the quota
    with pytest.raises(ClientError) as exists:
        ec2.create_launch_template(LaunchTemplateName="lt-a", LaunchTemplateData={})
    assert "AlreadyExists" in exists.value.response["Error"]["Code"]

    # When one is deleted, then the place is free again
    ec2.delete_launch_template(LaunchTemplateName="lt-a")
    ec2.create_launch_template(LaunchTemplateName="lt-c", LaunchTemplateData={})


def test_a_launch_templates_tags_changed_after_creation_show_when_described(ec2: Any) -> None:
    """EC2 API Reference, LaunchTemplate
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplate.html): `Tags`
    are the tags for the launch template; CreateTags and DeleteTags
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html) change a
    launch template's tags as any resource's."""
    # Given a launch template created with one tag
    made = ec2.create_launch_template(
        LaunchTemplateName="tagged",
        LaunchTemplateData={},
        TagSpecifications=[
            {"ResourceType": "launch-template", "Tags": [{"Key": MANAGED, "Value": "true"}]}
        ],
    )["LaunchTemplate"]

    # When a tag is added, and then the first removed
    ec2.create_tags(Resources=[made["LaunchTemplateId"]], Tags=[{"Key": "used", "Value": "now"}])
    (described,) = ec2.describe_launch_templates(LaunchTemplateNames=["tagged"])["LaunchTemplates"]
    # Then DescribeLaunchTemplates shows both
    assert described["Tags"] == [
        {"Key": MANAGED, "Value": "true"},
        {"Key": "used", "Value": "now"},
    ]
    ec2.delete_tags(Resources=[made["LaunchTemplateId"]], Tags=[{"Key": MANAGED}])
    (described,) = ec2.describe_launch_templates(LaunchTemplateNames=["tagged"])["LaunchTemplates"]
    assert described["Tags"] == [{"Key": "used", "Value": "now"}]


def test_launch_template_quota_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="launchTemplateQuota"):
        moto_capacity.set_launch_template_quota(-1)


def test_terminated_instances_leave_describe_instances_about_an_hour_after_termination(
    ec2: Any, linux_ami: str
) -> None:
    """EC2 API Reference, DescribeInstances
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html):
    terminated instances remain visible for approximately one hour after termination."""
    # Given a terminated instance and a running one
    gone, running = _launch(ec2, linux_ami, count=2)
    ec2.terminate_instances(InstanceIds=[gone])

    # When 59 minutes pass, then it is still listed, terminated
    moto_capacity.advance_clock(59 * 60)
    listed = ec2.describe_instances(InstanceIds=[gone])["Reservations"][0]["Instances"]
    assert listed[0]["State"]["Name"] == "terminated"

    # When the hour is over, then EC2 no longer knows it (by id, by filter, to terminate or tag)
    moto_capacity.advance_clock(60)
    with pytest.raises(ClientError) as unknown:
        ec2.describe_instances(InstanceIds=[gone])
    assert unknown.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    filtered = ec2.describe_instances(Filters=[{"Name": "instance-id", "Values": [gone, running]}])
    assert [i["InstanceId"] for r in filtered["Reservations"] for i in r["Instances"]] == [running]
    with pytest.raises(ClientError) as not_terminated:
        ec2.terminate_instances(InstanceIds=[gone, running])
    assert not_terminated.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    # The whole call failed: the running instance still runs
    state = ec2.describe_instances(InstanceIds=[running])["Reservations"][0]["Instances"][0]
    assert state["State"]["Name"] == "running"


def test_tag_scoped_terminate_of_a_gone_instance_is_unauthorized_for_the_whole_call(
    ec2: Any, linux_ami: str
) -> None:
    """A policy allowing ec2:TerminateInstances only with aws:ResourceTag finds no tag on an
    instance that is gone (IAM User Guide, "Controlling access to AWS resources using tags",
    https://docs.aws.amazon.com/IAM/latest/UserGuide/access_tags.html; the EC2 answer is
    UnauthorizedOperation, EC2 API Reference, "Error codes for the Amazon EC2 API")."""
    # Given the scope of the service's policy, a managed instance gone for good, and a live one
    moto_capacity.set_termination_scope(MANAGED, "true")
    gone, live = _launch(ec2, linux_ami, count=2, tags={MANAGED: "true"})
    ec2.terminate_instances(InstanceIds=[gone])
    moto_capacity.advance_clock(3600)

    # When both are terminated in one call, then: unauthorized, and nothing is terminated
    with pytest.raises(ClientError) as refused:
        ec2.terminate_instances(InstanceIds=[live, gone])
    assert refused.value.response["Error"]["Code"] == "UnauthorizedOperation"
    assert gone in refused.value.response["Error"]["Message"]
    state = ec2.describe_instances(InstanceIds=[live])["Reservations"][0]["Instances"][0]
    assert state["State"]["Name"] == "running"

    # An untagged instance is refused too; the live managed one alone is terminated
    (untagged,) = _launch(ec2, linux_ami)
    with pytest.raises(ClientError) as not_ours:
        ec2.terminate_instances(InstanceIds=[untagged])
    assert not_ours.value.response["Error"]["Code"] == "UnauthorizedOperation"
    ec2.terminate_instances(InstanceIds=[live])

    # Without the scope, the gone one answers as EC2 does for an unknown id
    moto_capacity.set_termination_scope(None)
    with pytest.raises(ClientError) as unknown:
        ec2.terminate_instances(InstanceIds=[gone])
    assert unknown.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
