"""A new container finds its content-addressed launch template by name before creating it:
DescribeLaunchTemplates with a `launch-template-name` filter answers an empty list when there is
none (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeLaunchTemplates.html),
where CreateLaunchTemplate on an existing name answers an error
(InvalidLaunchTemplateName.AlreadyExistsException,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters.launch_templates import (
    KNOWN_FOR_SECONDS,
    MARK_USED_AFTER_SECONDS,
    LaunchTemplates,
)
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.domain.records.tags import TEMPLATE_USED_AT
from capacity_launcher.startup import system_clock
from tests.support.cloud import node_class

ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"


class _Ec2:
    """EC2's launch templates by name; `raced` makes the next create meet another worker's."""

    def __init__(self, *, refuse: str | None = None) -> None:
        self.names: set[str] = set()
        self.created: dict[str, datetime] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.calls: list[str] = []
        self.raced = False
        self.refuse = refuse

    def describe_launch_templates(self, Filters: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append("DescribeLaunchTemplates")
        (wanted,) = [f["Values"] for f in Filters if f["Name"] == "launch-template-name"]
        return {
            "LaunchTemplates": [
                {
                    "LaunchTemplateName": n,
                    "LaunchTemplateId": f"lt-{n}",
                    "CreateTime": self.created.get(n, datetime.now(UTC)),
                    "Tags": [{"Key": k, "Value": v} for k, v in self.tags.get(n, {}).items()],
                }
                for n in wanted
                if n in self.names
            ]
        }

    def create_tags(self, Resources: list[str], Tags: list[dict[str, str]]) -> dict[str, Any]:
        self.calls.append("CreateTags")
        for resource in Resources:
            name = resource.removeprefix("lt-")
            self.tags.setdefault(name, {}).update({t["Key"]: t["Value"] for t in Tags})
        return {}

    def create_launch_template(self, LaunchTemplateName: str, **_: Any) -> dict[str, Any]:
        self.calls.append("CreateLaunchTemplate")
        code = ALREADY_EXISTS if self.raced or LaunchTemplateName in self.names else self.refuse
        self.names.add(LaunchTemplateName)
        self.created.setdefault(LaunchTemplateName, datetime.now(UTC))
        if code:
            error = {"Error": {"Code": code, "Message": code}}
            raise ClientError(error, "CreateLaunchTemplate")  # type: ignore[arg-type]
        return {"LaunchTemplate": {"LaunchTemplateName": LaunchTemplateName}}


def _node_class() -> NodeClass:
    return NodeClass.model_validate(node_class("general", ["subnet-1"], "ami-12345678"))


def test_a_new_container_finds_the_template_an_earlier_one_made_without_creating_it() -> None:
    ec2 = _Ec2()
    made = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)
    ec2.calls.clear()

    found = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)

    assert found.name == made.name
    assert ec2.calls == ["DescribeLaunchTemplates"]


def test_a_template_nobody_made_yet_is_created_once_and_then_remembered() -> None:
    ec2 = _Ec2()
    templates = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock)

    templates.ensure(_node_class(), None)
    templates.ensure(_node_class(), None)

    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]
    assert len(ec2.names) == 1


def test_a_worker_that_created_it_in_between_is_no_error() -> None:
    ec2 = _Ec2()
    ec2.raced = True

    template = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(
        _node_class(), None
    )

    assert template.name in ec2.names
    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]


def test_other_refusals_to_create_still_fail_the_launch() -> None:
    ec2 = _Ec2(refuse="InvalidParameterValue")

    with pytest.raises(LaunchFailed) as raised:
        LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)

    assert raised.value.code == "InvalidParameterValue"


def test_a_template_found_again_is_marked_used_unless_marked_lately() -> None:
    # Given a template made long ago (a NodeClass reverted to content it had)
    ec2 = _Ec2()
    made = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)
    ec2.created[made.name] = datetime.now(UTC) - timedelta(hours=2)
    ec2.calls.clear()

    # When a new container finds it, it marks it used (the sweep keeps it)
    LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)
    assert ec2.calls == ["DescribeLaunchTemplates", "CreateTags"]
    used = datetime.fromisoformat(ec2.tags[made.name][TEMPLATE_USED_AT])
    assert abs(used.timestamp() - time.time()) < 60

    # and another finding it within MARK_USED_AFTER_SECONDS does not tag it again
    assert MARK_USED_AFTER_SECONDS >= 60
    ec2.calls.clear()
    LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock).ensure(_node_class(), None)
    assert ec2.calls == ["DescribeLaunchTemplates"]


def test_a_forgotten_template_is_asked_for_and_created_again() -> None:
    # Given a warm container that made its template, which was then deleted behind its back
    ec2 = _Ec2()
    templates = LaunchTemplates(ec2=ec2, ssm=object(), clock=system_clock)
    made = templates.ensure(_node_class(), None)
    ec2.names.clear()
    ec2.created.clear()
    ec2.calls.clear()

    # When a launch found it gone, the container forgets it: the next ensure creates it again
    templates.forget([made.name])
    again = templates.ensure(_node_class(), None)

    assert again.name == made.name
    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]
    assert made.name in ec2.names


def test_a_warm_container_remembers_a_template_on_its_own_clock() -> None:
    # Given a warm container on a clock that is not the wall clock (the local cloud's, moved
    # forward), which made its template
    ec2 = _Ec2()
    moments = [datetime(2030, 1, 1, tzinfo=UTC)]
    templates = LaunchTemplates(ec2=ec2, ssm=object(), clock=lambda: moments[-1])
    templates.ensure(_node_class(), None)
    ec2.calls.clear()

    # When its clock passes KNOWN_FOR_SECONDS (the sweep judges templates on the same clock)
    moments.append(moments[-1] + timedelta(seconds=KNOWN_FOR_SECONDS + 1))
    templates.ensure(_node_class(), None)

    # Then it asks EC2 again, as it would after that long on the wall clock
    assert ec2.calls[:1] == ["DescribeLaunchTemplates"]
