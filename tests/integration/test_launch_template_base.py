"""A NodeClass's launchTemplateName: the named template's data is the base of the templates the
launcher generates, and what the class sets wins (docs/provisioner.md)."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import default_security_group, launch_request, node_class


def _based_on(cloud: Any, subnets: dict[str, str], image: str, template: str) -> None:
    """The pool `general` of class `standard`, the class based on the named template."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    groups = [default_security_group(cloud.ec2)]
    cloud.apply(
        node_class(
            "standard",
            [subnets[ZONE]],
            image,
            securityGroupIds=groups,
            launchTemplateName=template,
        )
    )


def _generated(cloud: Any) -> list[dict[str, Any]]:
    names = [
        t["LaunchTemplateName"]
        for t in cloud.ec2.describe_launch_templates()["LaunchTemplates"]
        if t["LaunchTemplateName"].startswith("capacity-launcher-")
    ]
    return [
        cloud.ec2.describe_launch_template_versions(LaunchTemplateName=n)["LaunchTemplateVersions"][
            0
        ]["LaunchTemplateData"]
        for n in names
    ]


def test_the_named_templates_data_is_the_base_and_the_class_wins(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    cloud.ec2.create_launch_template(
        LaunchTemplateName="team-base",
        LaunchTemplateData={
            "KeyName": "team-key",
            "Monitoring": {"Enabled": True},
            "ImageId": "ami-00000000000000000",
            "InstanceMarketOptions": {"MarketType": "spot"},
        },
    )
    _based_on(cloud, subnets, image, "team-base")

    cloud.send(launch_request("based-1", nodePool="general", count=1))

    record = cloud.record("based-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    (data,) = _generated(cloud)
    assert data["KeyName"] == "team-key"
    assert data["Monitoring"] == {"Enabled": True}
    assert data["ImageId"] == image  # the class's image wins
    assert "InstanceMarketOptions" not in data  # the pool's capacity type decides the market
    assert record.instances[0].capacity_type == "on-demand"


def test_a_missing_named_template_fails_the_request_naming_the_field(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    _based_on(cloud, subnets, image, "no-such")

    cloud.send(launch_request("based-2", nodePool="general", count=1))

    record = cloud.record("based-2")
    assert record is not None and record.status is RequestStatus.FAILED, record
    assert any("spec.launchTemplateName" in e.message for e in record.errors), record.errors
