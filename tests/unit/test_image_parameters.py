"""The image id behind a NodeClass's imageSsmParameter: read once per warm container for a while,
and a parameter AWS refuses fails naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters.image_parameters import ImageParameters
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.errors import NodeClassRefused, Throttled
from capacity_launcher.startup import system_clock

PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"


def _node_class(parameter: str = PARAMETER) -> NodeClass:
    return NodeClass.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "imageSsmParameter": parameter,
                "subnetIds": ["subnet-1"],
                "securityGroupIds": ["sg-1"],
            },
        }
    )


class _Ssm:
    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.reads: list[str] = []

    def get_parameter(self, Name: str, **_: Any) -> dict[str, Any]:
        self.reads.append(Name)
        if self.refuse:
            error = {"Error": {"Code": self.refuse, "Message": f"{self.refuse}: {Name}"}}
            raise ClientError(error, "GetParameter")  # type: ignore[arg-type]
        return {"Parameter": {"Name": Name, "Value": "ami-0123456789abcdef0"}}


class _Ec2:
    def __init__(self) -> None:
        self.described: list[str] = []

    def describe_images(self, ImageIds: list[str]) -> dict[str, Any]:
        self.described.extend(ImageIds)
        image = {"ImageId": ImageIds[0], "PlatformDetails": "Linux/UNIX", "Architecture": "arm64"}
        return {"Images": [image]}


def test_launch_attempts_of_a_warm_container_read_the_image_parameter_once() -> None:
    ssm = _Ssm()
    templates = LaunchTemplates(ec2=_Ec2(), ssm=ssm, clock=system_clock)
    for _ in range(3):
        templates.image_platform(_node_class())
    assert ssm.reads == [PARAMETER]


def test_the_image_parameter_is_read_again_once_its_max_age_passes() -> None:
    ssm = _Ssm()
    parameters = ImageParameters(ssm, max_age=0)
    assert parameters.image_id(_node_class()) == "ami-0123456789abcdef0"
    assert parameters.image_id(_node_class()) == "ami-0123456789abcdef0"
    assert ssm.reads == [PARAMETER, PARAMETER]


def test_a_missing_parameter_is_a_permanent_node_class_error_naming_the_field() -> None:
    ssm = _Ssm(refuse="ParameterNotFound")
    with pytest.raises(NodeClassRefused) as raised:
        ImageParameters(ssm).image_id(_node_class("/aws/service/none/here"))
    assert raised.value.field == "spec.imageSsmParameter"
    assert raised.value.code == "ParameterNotFound"
    assert raised.value.message.startswith("spec.imageSsmParameter: NodeClass gpu: ")


def test_a_parameter_the_role_may_not_read_names_the_field() -> None:
    ssm = _Ssm(refuse="AccessDeniedException")
    with pytest.raises(NodeClassRefused) as raised:
        ImageParameters(ssm).image_id(_node_class("/mine/ami"))
    assert raised.value.field == "spec.imageSsmParameter"


def test_a_refusal_is_not_remembered() -> None:
    ssm = _Ssm(refuse="ParameterNotFound")
    parameters = ImageParameters(ssm)
    for _ in range(2):
        with pytest.raises(NodeClassRefused):
            parameters.image_id(_node_class())
    assert len(ssm.reads) == 2


def test_a_throttled_read_hands_back() -> None:
    with pytest.raises(Throttled) as raised:
        ImageParameters(_Ssm(refuse="ThrottlingException")).image_id(_node_class())
    assert raised.value.operation == "GetParameter"


def test_a_warm_container_describes_each_image_once_for_its_platform_and_architecture() -> None:
    ec2 = _Ec2()
    templates = LaunchTemplates(ec2=ec2, ssm=_Ssm(), clock=system_clock)
    for _ in range(2):
        assert templates.image_platform(_node_class()) == "Linux/UNIX"
        architecture = templates.image_architecture(_node_class())
        assert architecture is not None and architecture.label == "arm64"
    assert ec2.described == ["ami-0123456789abcdef0"]
