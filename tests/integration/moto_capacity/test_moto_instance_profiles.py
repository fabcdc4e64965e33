"""CreateFleet gives each instance its launch template's IAM instance profile, as EC2 does.

https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateIamInstanceProfileSpecificationRequest.html
(a launch template's IamInstanceProfile, by Name or Arn, is the profile of the instances launched
from it) and
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_IamInstanceProfile.html
(DescribeInstances shows it as the instance's IamInstanceProfile: Arn and Id).
"""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError


def _fleet(ec2: Any, template: str, subnet: str) -> Any:
    return ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 2,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": "$Latest",
                },
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": subnet}],
            }
        ],
    )


def _profile(aws_client: Callable[[str], Any], name: str) -> dict[str, Any]:
    iam = aws_client("iam")
    iam.create_role(RoleName="node", AssumeRolePolicyDocument="{}")
    made = iam.create_instance_profile(InstanceProfileName=name, Path="/nodes/")
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="node")
    return dict(made["InstanceProfile"])


@pytest.mark.parametrize("by", ["Name", "Arn"])
def test_fleet_instances_get_the_launch_templates_instance_profile(
    by: str,
    ec2: Any,
    aws_client: Callable[[str], Any],
    launch_template: Callable[..., str],
    default_subnets: dict[str, str],
) -> None:
    profile = _profile(aws_client, "node-profile")
    named = {by: profile["InstanceProfileName"] if by == "Name" else profile["Arn"]}
    template = launch_template(IamInstanceProfile=named)

    answer = _fleet(ec2, template, default_subnets["us-east-1a"])

    ids = [i for group in answer["Instances"] for i in group["InstanceIds"]]
    assert len(ids) == 2
    described = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    instances = [i for r in described for i in r["Instances"]]
    assert [i["IamInstanceProfile"]["Arn"] for i in instances] == [profile["Arn"]] * 2
    associations = ec2.describe_iam_instance_profile_associations()[
        "IamInstanceProfileAssociations"
    ]
    assert sorted(a["InstanceId"] for a in associations) == sorted(ids)


def test_a_template_without_a_profile_launches_instances_without_one(
    ec2: Any, launch_template: Callable[..., str], default_subnets: dict[str, str]
) -> None:
    answer = _fleet(ec2, launch_template(), default_subnets["us-east-1a"])

    ids = [i for group in answer["Instances"] for i in group["InstanceIds"]]
    described = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    assert all("IamInstanceProfile" not in i for r in described for i in r["Instances"])


def test_a_profile_iam_does_not_have_refuses_the_fleet_and_launches_nothing(
    ec2: Any, launch_template: Callable[..., str], default_subnets: dict[str, str]
) -> None:
    template = launch_template(IamInstanceProfile={"Name": "missing"})

    with pytest.raises(ClientError) as refused:
        _fleet(ec2, template, default_subnets["us-east-1a"])

    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "missing" in refused.value.response["Error"]["Message"]
    assert ec2.describe_instances()["Reservations"] == []
