"""A NodeClass's `role` (Karpenter's EC2NodeClass spec.role) becomes an instance profile the
service makes, tags, reuses and deletes with the class; its instances launch with it. A role
that does not exist Rejects the class's requests naming spec.role: nothing launches without the
identity the class names. Instance tags stay out of the metadata service unless the class says
otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import moto_capacity
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.capacity.instance_profiles import PATH_ROOT
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_pool,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "karpenter" / "v1" / "general-purpose.yaml"
ROLE = "KarpenterNodeRole-capacity-launcher"


def _iam(cloud: Cloud) -> Any:
    from capacity_launcher.adapters import aws

    return aws.client("iam")


def _example_node_class(cloud: Cloud, image: str, subnets: dict[str, str]) -> Any:
    """Karpenter's general-purpose EC2NodeClass as written (role included), on our network."""
    (document,) = [
        d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "EC2NodeClass"
    ]
    assert document["spec"]["role"] == ROLE
    document["spec"]["subnetSelectorTerms"] = [{"id": s} for s in sorted(subnets.values())]
    document["spec"]["amiSelectorTerms"] = [{"id": image}]
    document["spec"]["securityGroupSelectorTerms"] = [{"id": default_security_group(cloud.ec2)}]
    return REGISTRY.read(document).conversion.hubs[0]


def _instance_profiles(cloud: Cloud) -> list[dict[str, Any]]:
    listed = _iam(cloud).list_instance_profiles(PathPrefix=PATH_ROOT)["InstanceProfiles"]
    return [p for p in listed if p["Path"].startswith(PATH_ROOT)]


def _launch(cloud: Cloud, request_id: str) -> Any:
    assert cloud.send(launch_request(request_id, nodePool="general")) == []
    return cloud.record(request_id)


def test_the_karpenter_example_role_launches_instances_with_its_instance_profile(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the role the example names, and the example's EC2NodeClass with a pool over it
    _iam(cloud).create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    node_class = _example_node_class(cloud, image, subnets)
    cloud.apply(node_class.model_dump(mode="json", by_alias=True, exclude_none=True))
    requirements = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("general", "default", requirements=requirements))
    # When two requests launch
    first, second = _launch(cloud, "role-1"), _launch(cloud, "role-2")
    # Then both are fulfilled, every instance with the one profile the service made for the class
    assert first.status is RequestStatus.FULFILLED, first
    assert second.status is RequestStatus.FULFILLED, second
    (profile,) = _instance_profiles(cloud)
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
    assert profile["Path"].startswith(PATH_ROOT)
    name = profile["InstanceProfileName"]
    tags = _iam(cloud).get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Tags"]
    assert {"Key": "capacity-launcher:node-class", "Value": "default"} in tags
    running = cloud.managed_instances()
    assert len(running) == 2
    assert {i["IamInstanceProfile"]["Arn"] for i in running} == {profile["Arn"]}
    # And the launch template keeps instance tags out of the metadata service
    template = _template_data(cloud)
    assert template["IamInstanceProfile"]["Name"] == profile["InstanceProfileName"]
    assert template["MetadataOptions"]["InstanceMetadataTags"] == "disabled"
    # When the class is deleted (its pool first) and its instances are gone, the sync deletes
    # its profile
    cloud.delete("NodePool", "general")
    cloud.delete("NodeClass", "default")
    cloud.ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in running])
    report = cloud.adapters().reservation_sync().run()
    assert report.profiles is not None
    assert report.profiles.deleted == [profile["InstanceProfileName"]]
    assert _instance_profiles(cloud) == []
    assert _iam(cloud).get_role(RoleName=ROLE)["Role"]["RoleName"] == ROLE  # never the role


def _template_data(cloud: Cloud) -> dict[str, Any]:
    ec2 = cloud.ec2
    (template,) = ec2.describe_launch_templates(
        Filters=[{"Name": "tag:capacity-launcher:managed", "Values": ["true"]}]
    )["LaunchTemplates"]
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])
    return dict(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])


def test_a_role_that_does_not_exist_rejects_requests_naming_spec_role(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a class naming a role IAM does not have
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    _with(cloud, "standard", role="KarpenterNodeRole-missing")
    # When a request arrives
    record = _launch(cloud, "no-role")
    # Then it is Rejected naming spec.role and the role; nothing launched, no profile made
    assert record.status is RequestStatus.REJECTED, record
    (error,) = record.errors
    assert error.code == "InstanceProfileNotReady"
    assert error.message.startswith(
        "spec.role: NodeClass standard: role 'KarpenterNodeRole-missing'"
    )
    assert "RoleNotFound" in error.message
    assert cloud.managed_instances() == []
    assert _instance_profiles(cloud) == []


def test_an_instance_profile_is_used_as_given(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a profile the operator made, named by the class's instanceProfile, whose role the
    # launcher may pass (under NodeRolePrefix: EC2 checks iam:PassRole on a profile's role)
    iam = _iam(cloud)
    iam.create_role(RoleName="KarpenterNodeRole-ops", AssumeRolePolicyDocument="{}")
    made = iam.create_instance_profile(InstanceProfileName="ops-profile")["InstanceProfile"]
    iam.add_role_to_instance_profile(
        InstanceProfileName="ops-profile", RoleName="KarpenterNodeRole-ops"
    )
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    _with(cloud, "standard", instanceProfile="ops-profile")
    # When a request launches
    record = _launch(cloud, "given-profile")
    # Then its instance has that profile, and the service made none of its own
    assert record.status is RequestStatus.FULFILLED, record
    (instance,) = cloud.managed_instances()
    assert instance["IamInstanceProfile"]["Arn"] == made["Arn"]
    assert _instance_profiles(cloud) == []


def _with(cloud: Cloud, name: str, **spec: Any) -> None:
    """The stored NodeClass `name` applied again with `spec` added."""
    stored = cloud.adapters().config_store().node_class(name)
    document = stored.model_dump(mode="json", by_alias=True, exclude_none=True)
    document["spec"].update(spec)
    cloud.apply(parse_document(document).model_dump(mode="json", by_alias=True, exclude_none=True))


def test_a_deleted_class_s_profile_is_kept_while_its_instances_run(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a class naming a role, with an instance running under the profile made for it
    _running_with_role(cloud, subnets, image)
    (profile,) = _instance_profiles(cloud)
    # When the class is deleted (a rename is a delete) while that instance runs, and the sync runs
    cloud.delete("NodePool", "general")
    cloud.delete("NodeClass", "standard")
    report = cloud.adapters().reservation_sync().run()
    # Then the profile stays, its role in it: the running instance keeps its credentials
    assert report.profiles is not None and report.profiles.deleted == [], report.profiles
    (kept,) = _instance_profiles(cloud)
    assert [r["RoleName"] for r in kept["Roles"]] == [ROLE]
    # And once the instance is gone, the next sync deletes it
    ids = [i["InstanceId"] for i in cloud.managed_instances()]
    cloud.ec2.terminate_instances(InstanceIds=ids)
    report = cloud.adapters().reservation_sync().run()
    assert report.profiles is not None
    assert report.profiles.deleted == [profile["InstanceProfileName"]]
    assert _instance_profiles(cloud) == []


def test_a_class_changed_to_a_missing_role_leaves_its_profile_holding_the_old_one(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a class naming a role, an instance running under the profile made for it
    _running_with_role(cloud, subnets, image)
    # When the class is changed to name a role IAM does not have, and a new container launches
    _with(cloud, "standard", role="KarpenterNodeRole-typo")
    assert cloud.send(launch_request("swap-2", nodePool="general"), batch=cloud.fresh_batch()) == []
    # Then that request is Rejected naming spec.role
    record = cloud.record("swap-2")
    assert record.status is RequestStatus.REJECTED, record
    assert record.errors[0].message.startswith("spec.role: NodeClass standard")
    # And the profile still holds the old role: the running instance keeps its credentials, and
    # a warm container trusting the profile launches with an identity, never an empty profile
    (profile,) = _instance_profiles(cloud)
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]


def _running_with_role(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """Class `standard` naming ROLE, pool `general` over it, one instance launched."""
    _iam(cloud).create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    _with(cloud, "standard", role=ROLE)
    assert _launch(cloud, "with-role").status is RequestStatus.FULFILLED


def test_a_role_arn_naming_another_account_or_path_is_rejected_not_swapped(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the role at path /nodes/ in this account
    _iam(cloud).create_role(RoleName=ROLE, Path="/nodes/", AssumeRolePolicyDocument="{}")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    account = cloud.names.account_id
    # When a class names it by its ARN with its path, a request launches with it
    _with(cloud, "standard", role=f"arn:aws:iam::{account}:role/nodes/{ROLE}")
    assert _launch(cloud, "arn-ok").status is RequestStatus.FULFILLED
    # When a class names a role of that name in another account, or at another path
    for n, other in enumerate(
        [f"arn:aws:iam::999999999999:role/nodes/{ROLE}", f"other/{ROLE}"], start=1
    ):
        cloud.apply(_renamed(cloud, "standard", f"other-{n}", role=other))
        cloud.apply(node_pool(f"pool-{n}", f"other-{n}", requirements=[capacity_type("on-demand")]))
        assert cloud.send(launch_request(f"arn-{n}", nodePool=f"pool-{n}")) == []
        # Then it is Rejected naming spec.role: this account's role of that name is not another's
        record = cloud.record(f"arn-{n}")
        assert record.status is RequestStatus.REJECTED, (other, record)
        assert record.errors[0].message.startswith(f"spec.role: NodeClass other-{n}"), record
    assert len(cloud.managed_instances()) == 1


def _renamed(cloud: Cloud, name: str, new: str, **spec: Any) -> dict[str, Any]:
    stored = cloud.adapters().config_store().node_class(name)
    document = stored.model_dump(mode="json", by_alias=True, exclude_none=True)
    document["metadata"]["name"] = new
    document["spec"].update(spec)
    return dict(parse_document(document).model_dump(mode="json", by_alias=True, exclude_none=True))


@pytest.mark.xfail(
    strict=True,
    reason="a warm launcher trusts a profile it made for KNOWN_FOR_SECONDS (5 minutes) without "
    "looking at it: a role the operator took out of the profile and deleted meanwhile is not "
    "seen, and the class's instances launch with an empty profile (no identity) until then",
)
def test_a_role_removed_from_its_profile_is_not_launched_without_by_a_warm_launcher(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a class naming a role, launched by this (now warm) launcher
    _running_with_role(cloud, subnets, image)
    (profile,) = _instance_profiles(cloud)
    # When the operator takes the role out of the profile and deletes it (IAM deletes a role only
    # once no profile holds it), and a request comes a minute later to the same launcher
    iam = _iam(cloud)
    iam.remove_role_from_instance_profile(
        InstanceProfileName=profile["InstanceProfileName"], RoleName=ROLE
    )
    iam.delete_role(RoleName=ROLE)
    moto_capacity.advance_clock(60)
    record = _launch(cloud, "role-gone")
    # Then it is Rejected naming spec.role, nothing launched with an empty profile
    assert record.status is RequestStatus.REJECTED, record
    assert len(cloud.managed_instances()) == 1


class _LaunchingDuringTheSync:
    """The sync's waits part, standing in for the seconds between the sync reading the
    NodeClasses and sweeping the profiles: a class is applied and its first launch begins."""

    def __init__(self, act: Any, waits: Any) -> None:
        self._act = act
        self.waits = waits  # the backstop's store, which the sync's minute reads the waits from

    def run(self, now_seen: Any, waits: Any = None) -> list[str]:
        self._act()
        return []


def test_a_class_applied_while_the_sync_runs_keeps_its_new_profile(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the role, and a class not yet stored when the sync reads the classes
    _iam(cloud).create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    document = _renamed(cloud, "standard", "late", role=ROLE)
    sync = cloud.adapters().reservation_sync()

    def apply_and_begin_launching() -> None:
        cloud.apply(document)
        # the launcher makes the profile, its CreateFleet not yet answered
        late = cloud.adapters().config_store().node_class("late")
        cloud.adapters().instance_profiles().ensure(late)

    backstop = sync._waits
    assert backstop is not None
    sync._waits = _LaunchingDuringTheSync(apply_and_begin_launching, backstop.waits)  # type: ignore[assignment]
    # When the class is applied and begins launching between the sync's read and its sweep
    report = sync.run()
    # Then the profile the launcher just made is not deleted under the launch
    assert report.profiles is not None and report.profiles.deleted == [], report.profiles
    (profile,) = _instance_profiles(cloud)
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
