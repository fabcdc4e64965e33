"""Issue 35: two stacks of the service in one account and Region (dev beside prod) keep apart.
Everything each makes carries its stack's name (capacity-launcher:stack); the sync adopts,
counts and sweeps only its own, so neither takes the other's instances into its pools' usage
nor deletes the other's launch templates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.usage_recount import recount_pool
from capacity_launcher.service.wiring import Adapters
from local_cloud.lambda_runtime import running
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request
from tests.support.template import DeployedNames

STACK = "capacity-launcher:stack"
OTHER = "capacity-launcher-prod"
HOUR = 3600


@dataclass
class _Other:
    """The second deployment as setup_pool sees a cloud: its own configuration, the same EC2."""

    adapters: Adapters
    names: DeployedNames

    @property
    def ec2(self) -> Any:
        return aws.client("ec2")

    def apply(self, *documents: Mapping[str, Any]) -> None:
        configuration = self.adapters.configuration()
        for document in documents:
            configuration.apply(parse_document(document))


def _tags(resource: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def _instances_by_stack(cloud: Cloud) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for instance in cloud.managed_instances():
        found.setdefault(_tags(instance).get(STACK, ""), set()).add(instance["InstanceId"])
    return found


def _templates_by_stack(cloud: Cloud) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for template in cloud.ec2.describe_launch_templates()["LaunchTemplates"]:
        found.setdefault(_tags(template).get(STACK, ""), set()).add(template["LaunchTemplateName"])
    return found


def test_two_deployments_leave_each_others_instances_templates_and_usage_alone(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given this cloud's deployment and another stack's beside it, each with a pool `general`
    # of at most 2 instances (their NodeClasses named apart)
    mine = cloud.names.stack_name
    names = cloud.local.add_deployment(OTHER)
    other = _Other(cloud.local.deployment_adapters(names), names)
    other_env = names.environment("LauncherFunction")
    limits = {"instances": "2"}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits)
    setup_pool(
        other,  # type: ignore[arg-type]
        subnets,
        image,
        capacity_types=("on-demand",),
        limits=limits,
        klass="prod-class",
    )

    # When this one launches one instance and the other two
    cloud.send(launch_request("mine-1", nodePool="general"))
    assert cloud.record("mine-1").status is RequestStatus.FULFILLED  # type: ignore[union-attr]
    other_batch = other.adapters.launch_batch(other.adapters.idempotency_config())
    other_launcher = Cloud(cloud.local, names, other_env, "")  # sends as its launcher
    for request_id in ("prod-1", "prod-2"):
        other_launcher.send(launch_request(request_id, nodePool="general"), batch=other_batch)
        record = other.adapters.launch_records().get_record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED

    # Then every instance and template carries the stack that made it
    instances = _instances_by_stack(cloud)
    assert set(instances) == {mine, OTHER}
    assert (len(instances[mine]), len(instances[OTHER])) == (1, 2)
    templates = _templates_by_stack(cloud)
    assert set(templates) == {mine, OTHER}

    # When both syncs run, an hour later (long past every template's grace)
    moto_capacity.advance_clock(HOUR + 60)
    my_sync = cloud.adapters().reservation_sync().run()
    sync_env = names.environment("ReservationSyncFunction")
    with running("ReservationSyncFunction", sync_env, names.account_id):
        other_sync = other.adapters.reservation_sync().run()

    # Then neither adopted nor counted the other's instances, nor deleted its templates
    for report in (my_sync, other_sync):
        assert report.reconciliation is not None and report.reconciliation.adopted == []
        assert report.templates is not None and report.templates.deleted == {}
    assert _templates_by_stack(cloud) == templates
    assert _instances_by_stack(cloud) == instances
    assert recount_pool(cloud.adapters().pool_usage(), "general") is not None
    usage = {
        mine: cloud.adapters().pool_members(cloud.adapters().config_store()).members("general"),
        OTHER: other.adapters.pool_members(other.adapters.config_store()).members("general"),
    }
    assert {s: {m.instance_id for m in members} for s, members in usage.items()} == instances

    # and this deployment's pool has room for its second instance (1 of 2 used, not 3 of 2)
    cloud.send(launch_request("mine-2", nodePool="general"))
    assert cloud.record("mine-2").status is RequestStatus.FULFILLED  # type: ignore[union-attr]


def test_two_deployments_keep_and_delete_only_their_own_instance_profiles(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given two stacks, each with a NodeClass `standard` naming one role and an instance under it
    role = "KarpenterNodeRole-shared"
    aws.client("iam").create_role(RoleName=role, AssumeRolePolicyDocument="{}")
    names = cloud.local.add_deployment(OTHER)
    other = _Other(cloud.local.deployment_adapters(names), names)
    for deployment, adapters in ((cloud, cloud.adapters()), (other, other.adapters)):
        setup_pool(deployment, subnets, image, capacity_types=("on-demand",))  # type: ignore[arg-type]
        stored = adapters.config_store().node_class("standard")
        document = stored.model_dump(mode="json", by_alias=True, exclude_none=True)
        document["spec"]["role"] = role
        deployment.apply(document)
    cloud.send(launch_request("mine-1", nodePool="general"))
    assert cloud.record("mine-1").status is RequestStatus.FULFILLED  # type: ignore[union-attr]
    other_batch = other.adapters.launch_batch(other.adapters.idempotency_config())
    other_launcher = Cloud(cloud.local, names, names.environment("LauncherFunction"), "")
    other_launcher.send(launch_request("prod-1", nodePool="general"), batch=other_batch)
    prod = other.adapters.launch_records().get_record("prod-1")
    assert prod is not None and prod.status is RequestStatus.FULFILLED
    listed = aws.client("iam").list_instance_profiles()["InstanceProfiles"]
    profiles = {p["InstanceProfileName"] for p in listed}
    assert len(profiles) == 2  # the same class name, a profile for each deployment
    mine = cloud.adapters().instance_profiles().name_of("standard")
    # When this deployment's class is deleted and its instance ended, and both syncs run
    cloud.delete("NodePool", "general")
    cloud.delete("NodeClass", "standard")
    ended = sorted(_instances_by_stack(cloud)[cloud.names.stack_name])
    cloud.ec2.terminate_instances(InstanceIds=ended)
    my_sync = cloud.adapters().reservation_sync().run()
    sync_env = names.environment("ReservationSyncFunction")
    with running("ReservationSyncFunction", sync_env, names.account_id):
        other_sync = other.adapters.reservation_sync().run()
    # Then this deployment deleted its own profile (the other's instance of a class of the same
    # name keeps nothing of ours), and the other deleted nothing
    assert my_sync.profiles is not None and my_sync.profiles.deleted == [mine]
    assert other_sync.profiles is not None and other_sync.profiles.deleted == []
    left = {
        p["InstanceProfileName"]
        for p in aws.client("iam").list_instance_profiles()["InstanceProfiles"]
    }
    assert left == profiles - {mine}
