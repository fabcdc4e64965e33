"""A new container finds its content-addressed launch template by name before creating it:
DescribeLaunchTemplates with a `launch-template-name` filter answers an empty list when there is
none (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeLaunchTemplates.html),
where CreateLaunchTemplate on an existing name answers an error
(InvalidLaunchTemplateName.AlreadyExistsException,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.domain.config import NodeClass
from capacity_launcher.domain.errors import LaunchFailed
from tests.support.cloud import node_class

ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"


class _Ec2:
    """EC2's launch templates by name; `raced` makes the next create meet another worker's."""

    def __init__(self, *, refuse: str | None = None) -> None:
        self.names: set[str] = set()
        self.calls: list[str] = []
        self.raced = False
        self.refuse = refuse

    def describe_launch_templates(self, Filters: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append("DescribeLaunchTemplates")
        (wanted,) = [f["Values"] for f in Filters if f["Name"] == "launch-template-name"]
        return {"LaunchTemplates": [{"LaunchTemplateName": n} for n in wanted if n in self.names]}

    def create_launch_template(self, LaunchTemplateName: str, **_: Any) -> dict[str, Any]:
        self.calls.append("CreateLaunchTemplate")
        code = ALREADY_EXISTS if self.raced or LaunchTemplateName in self.names else self.refuse
        self.names.add(LaunchTemplateName)
        if code:
            error = {"Error": {"Code": code, "Message": code}}
            raise ClientError(error, "CreateLaunchTemplate")  # type: ignore[arg-type]
        return {"LaunchTemplate": {"LaunchTemplateName": LaunchTemplateName}}


def _node_class() -> NodeClass:
    return NodeClass.model_validate(node_class("general", ["subnet-1"], "ami-12345678"))


def test_a_new_container_finds_the_template_an_earlier_one_made_without_creating_it() -> None:
    ec2 = _Ec2()
    made = LaunchTemplates(ec2=ec2, ssm=object()).ensure(_node_class(), None)
    ec2.calls.clear()

    found = LaunchTemplates(ec2=ec2, ssm=object()).ensure(_node_class(), None)

    assert found.name == made.name
    assert ec2.calls == ["DescribeLaunchTemplates"]


def test_a_template_nobody_made_yet_is_created_once_and_then_remembered() -> None:
    ec2 = _Ec2()
    templates = LaunchTemplates(ec2=ec2, ssm=object())

    templates.ensure(_node_class(), None)
    templates.ensure(_node_class(), None)

    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]
    assert len(ec2.names) == 1


def test_a_worker_that_created_it_in_between_is_no_error() -> None:
    ec2 = _Ec2()
    ec2.raced = True

    template = LaunchTemplates(ec2=ec2, ssm=object()).ensure(_node_class(), None)

    assert template.name in ec2.names
    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]


def test_other_refusals_to_create_still_fail_the_launch() -> None:
    ec2 = _Ec2(refuse="InvalidParameterValue")

    with pytest.raises(LaunchFailed) as raised:
        LaunchTemplates(ec2=ec2, ssm=object()).ensure(_node_class(), None)

    assert raised.value.code == "InvalidParameterValue"
