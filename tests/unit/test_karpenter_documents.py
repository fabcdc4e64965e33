"""Karpenter's NodePool and EC2NodeClass (v1, v1beta1) as written: parsing, conversion to the
capacity-launcher/v1 hubs and back, and what is kept but not acted on (docs/karpenter.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from capacity_launcher.domain.apis.api_versions import Applied
from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.karpenter.images import KUBERNETES_VERSION_ANNOTATION
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

EXAMPLES = Path(__file__).parents[2] / "examples" / "karpenter"
# Karpenter refuses this one itself: its nodeClassRef.group must match ^[^/]*$.
REFUSED_BY_KARPENTER = "windows-custom-userdata.yaml"

TERMS = {"tags": {"karpenter.sh/discovery": "capacity-launcher"}}


def nodepool(api_version: str = "karpenter.sh/v1", **spec: Any) -> dict[str, Any]:
    ref = (
        {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        if api_version.endswith("/v1")
        else {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"}
    )
    template = {"spec": {"requirements": spec.pop("requirements", []), "nodeClassRef": ref}}
    return {
        "apiVersion": api_version,
        "kind": "NodePool",
        "metadata": {"name": "pool"},
        "spec": {"template": template, **spec},
    }


def ec2nodeclass(api_version: str = "karpenter.k8s.aws/v1", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "role": "KarpenterNodeRole-capacity-launcher",
        "subnetSelectorTerms": [TERMS],
        "securityGroupSelectorTerms": [TERMS],
    }
    if api_version.endswith("/v1"):
        base["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    else:
        base["amiFamily"] = "AL2023"
    return {
        "apiVersion": api_version,
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {**base, **spec},
    }


def errors_of(document: dict[str, Any]) -> list[FieldError]:
    with pytest.raises(ConfigValidationError) as caught:
        REGISTRY.read(document)
    return caught.value.errors


def example_documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, data)
        for path in sorted(EXAMPLES.rglob("*.yaml"))
        for data in yaml.safe_load_all(path.read_text())
        if data
    ]


def assert_round_trip(applied: Applied, data: dict[str, Any]) -> None:
    """To the hub and back gives the document as written, directly and through the hub's own
    version (where the kept fields ride in the annotation)."""
    version = applied.version
    written = version.document(version.parse(data))
    hub, kept = applied.conversion.hub, applied.conversion.kept
    assert REGISTRY.convert(hub, kept, version.api_version, version.kind) == written
    as_hub = REGISTRY.convert(hub, kept, "capacity-launcher/v1", hub.kind)
    again = REGISTRY.read(as_hub)
    assert again.conversion.hub == hub
    back = REGISTRY.convert(
        again.conversion.hub, again.conversion.kept, version.api_version, version.kind
    )
    assert back == written


def test_karpenters_examples_apply_as_written_and_round_trip() -> None:
    read = 0
    for name, data in example_documents():
        if name == REFUSED_BY_KARPENTER and data["kind"] == "NodePool":
            continue
        applied = REGISTRY.read(data)
        assert_round_trip(applied, data)
        read += 1
    assert read >= 45


def test_the_example_karpenter_refuses_is_refused_naming_the_field() -> None:
    pools = [
        d for n, d in example_documents() if n == REFUSED_BY_KARPENTER and d["kind"] == "NodePool"
    ]
    (error,) = errors_of(pools[0])
    assert error.field == "spec.template.spec.nodeClassRef.group"


def test_a_v1_nodepool_becomes_the_hub_pool() -> None:
    document = nodepool(
        requirements=[
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 2},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["3"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["8"]},
        ],
        limits={"cpu": 100, "memory": "1000Gi", "nodes": 10},
        weight=30,
    )
    applied = REGISTRY.read(document)
    hub = applied.conversion.hub
    assert isinstance(hub, NodePool)
    assert hub.spec.node_class_ref == "default"
    assert hub.spec.weight == 30
    assert hub.spec.limits is not None
    assert hub.spec.limits.to_document() == {"cpu": "100", "memory": "1000Gi", "instances": "10"}
    spelled = [(r.key, r.operator.value, r.values, r.min_values) for r in hub.spec.requirements]
    assert ("karpenter.k8s.aws/instance-generation", "Gt", ("2",), None) in spelled
    assert ("karpenter.k8s.aws/instance-cpu", "Lt", ("9",), None) in spelled
    assert ("karpenter.k8s.aws/instance-family", "Exists", (), 2) in spelled
    assert applied.warnings == ()
    assert_round_trip(applied, document)


def test_cluster_only_fields_are_kept_and_reported_by_path() -> None:
    document = nodepool(
        requirements=[{"key": "team.example.com/owner", "operator": "In", "values": ["ml"]}],
        limits={"cpu": 4, "ephemeral-storage": "100Gi"},
        disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"},
    )
    document["metadata"]["labels"] = {"a": "b"}
    template = document["spec"]["template"]
    template["metadata"] = {"labels": {"team": "ml"}}
    template["spec"] |= {
        "taints": [{"key": "gpu", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "init", "effect": "NoSchedule"}],
        "expireAfter": "720h",
        "terminationGracePeriod": "1h",
    }
    applied = REGISTRY.read(document)
    assert set(applied.conversion.kept.not_acted_on) == {
        "metadata.labels",
        "spec.template.metadata",
        "spec.template.spec.taints",
        "spec.template.spec.startupTaints",
        "spec.template.spec.expireAfter",
        "spec.template.spec.terminationGracePeriod",
        "spec.disruption",
        "spec.template.spec.requirements[0]",
        "spec.limits.ephemeral-storage",
    }
    hub = applied.conversion.hub
    assert hub.spec.requirements == []
    assert_round_trip(applied, document)


def test_requirements_capacity_launcher_cannot_evaluate_are_refused_by_path() -> None:
    document = nodepool(
        requirements=[
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]},
        ]
    )
    (error,) = errors_of(document)
    assert error.field == "spec.template.spec.requirements[1].key"
    assert "cannot choose instance types by karpenter.k8s.aws/instance-hypervisor" in error.rule


def test_a_requirement_takes_as_many_values_as_karpenter_accepts() -> None:
    # Karpenter's NodePool CRD: at most 100 requirements, each value at most 63 characters, any
    # number of values.
    types = [f"c{i}.xlarge" for i in range(250)]
    requirement = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}
    hub = REGISTRY.read(nodepool(requirements=[requirement])).conversion.hub
    assert isinstance(hub, NodePool)
    assert hub.spec.requirements[0].values == tuple(types)
    (too_long,) = errors_of(nodepool(requirements=[{**requirement, "values": ["x" * 64]}]))
    assert too_long.field == "spec.template.spec.requirements[0].values"
    assert "1 to 63 characters" in too_long.rule


def test_hub_rules_are_reported_at_the_karpenter_paths() -> None:
    document = nodepool(
        requirements=[
            {"key": "team.example.com/owner", "operator": "Exists"},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["sparc"]},
        ],
        limits={"nodes": "many"},
    )
    fields = {e.field for e in errors_of(document)}
    assert "spec.template.spec.requirements[1].values" in fields
    assert any(f.startswith("spec.limits.nodes") for f in fields)


def test_nodeclassref_must_name_an_ec2nodeclass() -> None:
    document = nodepool()
    document["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = "AKSNodeClass"
    (error,) = errors_of(document)
    assert (error.field, error.rule) == (
        "spec.template.spec.nodeClassRef.kind",
        "must be EC2NodeClass",
    )


def test_v1beta1_nodepool_is_served_deprecated() -> None:
    document = nodepool("karpenter.sh/v1beta1", disruption={"expireAfter": "720h"})
    document["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 110}
    applied = REGISTRY.read(document)
    assert applied.warnings == (
        "karpenter.sh/v1beta1 NodePool is deprecated; use karpenter.sh/v1 NodePool",
    )
    assert "spec.template.spec.kubelet" in applied.conversion.kept.not_acted_on
    assert_round_trip(applied, document)
    as_v1 = REGISTRY.convert(
        applied.conversion.hub, applied.conversion.kept, "karpenter.sh/v1", "NodePool"
    )
    assert as_v1["spec"]["template"]["spec"]["nodeClassRef"]["group"] == "karpenter.k8s.aws"
    assert REGISTRY.read(as_v1).conversion.hub == applied.conversion.hub


@pytest.mark.parametrize(
    ("alias", "parameter"),
    [
        (
            "al2023@latest",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
        ),
        (
            "al2023@v20240625",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/"
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20240625/image_id",
        ),
        ("al2@latest", "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id"),
        ("bottlerocket@latest", "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"),
        ("bottlerocket@v1.20.3", "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.20.3/image_id"),
        (
            "windows2022@latest",
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id",
        ),
    ],
)
def test_ami_aliases_resolve_to_karpenters_ssm_parameters(alias: str, parameter: str) -> None:
    applied = REGISTRY.read(ec2nodeclass(amiSelectorTerms=[{"alias": alias}]))
    hub = applied.conversion.hub
    assert isinstance(hub, NodeClass)
    assert hub.spec.image_ssm_parameter == parameter


def test_the_kubernetes_version_of_an_alias_is_an_annotation() -> None:
    document = ec2nodeclass()
    document["metadata"]["annotations"] = {KUBERNETES_VERSION_ANNOTATION: "1.31"}
    hub = REGISTRY.read(document).conversion.hub
    assert "/optimized-ami/1.31/" in hub.spec.image_ssm_parameter
    document["metadata"]["annotations"] = {KUBERNETES_VERSION_ANNOTATION: "latest"}
    (error,) = errors_of(document)
    assert error.field == f"metadata.annotations[{KUBERNETES_VERSION_ANNOTATION}]"


@pytest.mark.parametrize(
    ("terms", "field", "rule"),
    [
        (
            [{"alias": "al2023@latest"}, {"id": "ami-0123456789abcdef0"}],
            "spec",
            "must be the only term",
        ),
        (
            [{"alias": "windows2022@v1"}],
            "spec.amiSelectorTerms[0].alias",
            "only use version 'latest'",
        ),
        ([{"alias": "ubuntu@latest"}], "spec.amiSelectorTerms[0].alias", "family must be one of"),
        (
            [{"id": "ami-0123456789abcdef0", "name": "x"}],
            "spec.amiSelectorTerms[0]",
            "cannot be combined",
        ),
        (
            [{"ssmParameter": "/aws/service/x"}, {"id": "ami-0123456789abcdef0"}],
            "spec.amiSelectorTerms",
            "an ssmParameter must be the only term",
        ),
    ],
)
def test_ami_selector_terms_follow_karpenters_rules(
    terms: list[Any], field: str, rule: str
) -> None:
    errors = errors_of(ec2nodeclass(amiSelectorTerms=terms))
    assert any(e.field == field and rule in e.rule for e in errors), errors


def test_an_ec2nodeclass_becomes_the_hub_class() -> None:
    document = ec2nodeclass(
        securityGroupSelectorTerms=[{"name": "nodes"}, {"id": "sg-0a1b2c3d4e5f67890"}, TERMS],
        role=None,
        instanceProfile="KarpenterNodeInstanceProfile",
        tags={"team": "ml"},
        userData="#!/bin/bash\necho hi\n",
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvda",
                "ebs": {"volumeType": "gp3", "volumeSize": "20Gi", "deleteOnTermination": True},
            }
        ],
        metadataOptions={
            "httpTokens": "required",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 2,
        },
        capacityReservationSelectorTerms=[
            {"tags": {"team": "ml"}, "instanceMatchCriteria": "targeted"}
        ],
        kubelet={"maxPods": 110},
        instanceStorePolicy="RAID0",
    )
    del document["spec"]["role"]
    applied = REGISTRY.read(document)
    hub = applied.conversion.hub
    assert isinstance(hub, NodeClass)
    spec = hub.spec
    assert spec.security_group_ids is None
    assert [t.name for t in spec.security_group_selector_terms or []] == ["nodes", None, None]
    assert spec.instance_profile == "KarpenterNodeInstanceProfile"
    assert spec.tags == {"team": "ml"}
    assert spec.block_device_mappings is not None
    assert spec.block_device_mappings[0].launch_template_mapping() == {
        "DeviceName": "/dev/xvda",
        "Ebs": {"DeleteOnTermination": True, "VolumeType": "gp3", "VolumeSize": 20},
    }
    assert spec.metadata_options is not None
    assert spec.metadata_options.launch_template_options() == {
        "HttpTokens": "required",
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 2,
        "InstanceMetadataTags": "disabled",
    }
    assert spec.capacity_reservation_selector_terms is not None
    assert set(applied.conversion.kept.not_acted_on) == {"spec.kubelet", "spec.instanceStorePolicy"}
    assert_round_trip(applied, document)


def test_role_and_instance_profile_are_exclusive() -> None:
    errors = errors_of(ec2nodeclass(instanceProfile="profile"))
    assert any("role and instanceProfile cannot both be set" in e.rule for e in errors)


@pytest.mark.parametrize("api_version", ["karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"])
def test_a_placement_group_selector_is_refused_naming_the_field(api_version: str) -> None:
    """Karpenter launches the class's instances into the selected placement group; kept and
    ignored, a gang asking for a cluster group would run outside it without a word."""
    spec: dict[str, Any] = {"placementGroupSelector": {"name": "training"}}
    if api_version.endswith("v1beta1"):
        spec["amiSelectorTerms"] = [{"id": "ami-0123456789abcdef0"}]
    (error,) = errors_of(ec2nodeclass(api_version, **spec))
    assert error.field == "spec.placementGroupSelector"
    assert "outside the placement group" in error.rule


@pytest.mark.parametrize("api_version", ["karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"])
def test_the_role_is_acted_on_the_hub_class_names_it(api_version: str) -> None:
    # Karpenter makes the role an instance profile; so does the service (no longer kept aside)
    document = ec2nodeclass(api_version)
    applied = REGISTRY.read(document)
    hub = applied.conversion.hub
    assert isinstance(hub, NodeClass)
    assert hub.spec.role == "KarpenterNodeRole-capacity-launcher"
    assert hub.spec.instance_profile is None
    assert "spec.role" not in applied.conversion.kept.not_acted_on
    assert_round_trip(applied, document)


def test_the_hub_class_takes_a_role_or_an_instance_profile_not_both() -> None:
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": "nodes"},
        "spec": {
            "imageId": "ami-0123456789abcdef0",
            "subnetIds": ["subnet-0123456789abcdef0"],
            "securityGroupIds": ["sg-0123456789abcdef0"],
            "role": "nodes/KarpenterNodeRole-a",
            "instanceProfile": "profile",
        },
    }
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(document)
    assert "role and instanceProfile cannot both be set" in str(refused.value)
    document["spec"]["role"] = "not a role!"
    del document["spec"]["instanceProfile"]
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(document)
    assert any(e.field == "spec.role" for e in refused.value.errors), refused.value.errors


def test_selector_terms_follow_karpenters_rules() -> None:
    errors = errors_of(
        ec2nodeclass(
            securityGroupSelectorTerms=[{"id": "sg-0a1b2c3d4e5f67890", "tags": {"a": "b"}}]
        )
    )
    assert errors[0].field == "spec.securityGroupSelectorTerms[0]"
    assert "cannot be combined" in errors[0].rule
    errors = errors_of(ec2nodeclass(subnetSelectorTerms=[]))
    assert errors[0].field == "spec.subnetSelectorTerms"


def test_block_device_sizes_follow_ec2s_rules() -> None:
    too_big = [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "65Ti"}}]
    errors = errors_of(ec2nodeclass(blockDeviceMappings=too_big))
    assert errors[0].field == "spec.blockDeviceMappings[0].ebs.volumeSize"
    no_size = [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]
    errors = errors_of(ec2nodeclass(blockDeviceMappings=no_size))
    assert "snapshotID or volumeSize must be set" in errors[0].rule


def test_v1beta1_ec2nodeclass_takes_seed_000s_capacity_reservation_spec() -> None:
    target = {"capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    applied = REGISTRY.read(
        ec2nodeclass("karpenter.k8s.aws/v1beta1", capacityReservationSpec=target)
    )
    assert applied.warnings == (
        "karpenter.k8s.aws/v1beta1 EC2NodeClass is deprecated; "
        "use karpenter.k8s.aws/v1 EC2NodeClass",
    )
    hub = applied.conversion.hub
    assert hub.spec.reservation_target is not None
    assert hub.spec.reservation_target.capacity_reservation_id == "cr-0123456789abcdef0"
    assert hub.spec.image_ssm_parameter.endswith(
        "/amazon-linux-2023/x86_64/standard/recommended/image_id"
    )
    assert "spec.amiFamily" in applied.conversion.kept.not_acted_on


@pytest.mark.parametrize(
    "spec",
    [
        {
            "capacityReservationPreference": "open",
            "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"},
        },
        {
            "capacityReservationTarget": {
                "capacityReservationId": "cr-0123456789abcdef0",
                "capacityReservationResourceGroupArn": (
                    "arn:aws:resource-groups:us-east-1:123456789012:group/g"
                ),
            }
        },
        {"capacityReservationTarget": {}},
    ],
)
def test_seed_000s_exclusive_choices_are_enforced(spec: dict[str, Any]) -> None:
    errors = errors_of(ec2nodeclass("karpenter.k8s.aws/v1beta1", capacityReservationSpec=spec))
    assert errors[0].field.startswith("spec.capacityReservationSpec")


def test_each_version_takes_only_its_own_fields() -> None:
    spec = {"capacityReservationPreference": "open"}
    (error,) = errors_of(ec2nodeclass(capacityReservationSpec=spec))
    assert error.field == "spec.capacityReservationSpec"
    v1beta1 = ec2nodeclass(
        "karpenter.k8s.aws/v1beta1", amiSelectorTerms=[{"alias": "al2023@latest"}]
    )
    (error,) = errors_of(v1beta1)
    assert error.field == "spec.amiSelectorTerms[0].alias"
    missing = ec2nodeclass("karpenter.k8s.aws/v1beta1")
    del missing["spec"]["amiFamily"]
    assert errors_of(missing)[0].field == "spec.amiFamily"


def test_a_hub_node_class_reads_as_an_ec2nodeclass() -> None:
    hub_document = next(
        d for d in yaml.safe_load_all((EXAMPLES.parent / "node-classes.yaml").read_text()) if d
    )
    hub = REGISTRY.read(hub_document).conversion.hub
    as_v1 = REGISTRY.convert(hub, None, "karpenter.k8s.aws/v1", "EC2NodeClass")
    assert as_v1["spec"]["amiSelectorTerms"] == [{"ssmParameter": hub.spec.image_ssm_parameter}]
    assert as_v1["spec"]["securityGroupSelectorTerms"] == [{"id": "sg-0a1b2c3d4e5f67890"}]
    assert REGISTRY.read(copy.deepcopy(as_v1)).conversion.hub == hub


def test_images_by_name_owner_tags_or_several_ids_are_the_hubs_image_selector_terms() -> None:
    terms = [{"name": "my-ami-*", "owner": "self"}, {"tags": {"team": "ml"}}, {"id": "ami-0123"}]
    applied = REGISTRY.read(ec2nodeclass(amiSelectorTerms=terms))
    hub = applied.conversion.hub
    assert hub.spec.image_id is None and hub.spec.image_ssm_parameter is None
    selected = hub.spec.image_selector_terms
    assert [t.model_dump(by_alias=True, exclude_none=True) for t in selected] == terms
    assert_round_trip(applied, ec2nodeclass(amiSelectorTerms=terms))


def test_hub_fields_a_version_has_no_place_for_ride_in_an_annotation() -> None:
    """A hub NodeClass's capacityReservationSpec has no place in karpenter.k8s.aws/v1: read in v1
    it travels in the hub-fields annotation, and applying that document restores it."""
    hub_document = ec2nodeclass("karpenter.k8s.aws/v1beta1")
    target = {"capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    hub_document["spec"]["capacityReservationSpec"] = target
    hub = REGISTRY.read(hub_document).conversion.hub
    as_v1 = REGISTRY.convert(hub, None, "karpenter.k8s.aws/v1", "EC2NodeClass")
    assert "capacityReservationSpec" not in as_v1["spec"]
    carried = as_v1["metadata"]["annotations"][HUB_FIELDS_ANNOTATION]
    # So does the arm64 image's parameter of amiFamily's alias: a v1 ssmParameter term names one.
    arm64 = (
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"
    )
    # And the accelerated images' parameters (al2023's NVIDIA and Neuron variants)
    accelerated = [
        {"ssmParameter": arm64.replace("arm64/standard", f"{arch}/{variant}"), "variant": variant}
        for arch, variant in (("x86_64", "nvidia"), ("arm64", "nvidia"), ("x86_64", "neuron"))
    ]
    assert json.loads(carried) == {
        "spec.capacityReservationSpec": target,
        "spec.arm64ImageSsmParameter": arm64,
        "spec.acceleratedImageSsmParameters": accelerated,
    }
    assert REGISTRY.read(as_v1).conversion.hub == hub
    as_v1["metadata"]["annotations"][HUB_FIELDS_ANNOTATION] = "[1]"
    (error,) = errors_of(as_v1)
    assert error.field == f"metadata.annotations[{HUB_FIELDS_ANNOTATION}]"


def test_a_retired_karpenter_kind_is_refused_naming_its_replacements_versions() -> None:
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "default"},
        "spec": {"subnetSelector": {"karpenter.sh/discovery": "c"}},
    }
    (error,) = errors_of(template)
    assert error.field == "apiVersion"
    assert error.rule == (
        "karpenter.k8s.aws/v1alpha1 AWSNodeTemplate is no longer served; use "
        "karpenter.k8s.aws/v1 EC2NodeClass (served: karpenter.k8s.aws/v1 EC2NodeClass, "
        "karpenter.k8s.aws/v1beta1 EC2NodeClass)"
    )


def test_the_karpenter_models_are_built_when_a_document_is_first_read() -> None:
    # Every command (`get`, `describe`...) imports the served versions; few read a Karpenter
    # document: building their validators at import cost each command about 11 ms of CPU.
    from pydantic import BaseModel

    from capacity_launcher.domain.apis.karpenter import common, ec2nodeclass
    from capacity_launcher.domain.apis.karpenter import nodepool as karpenter_nodepool

    models = [
        value
        for module in (common, ec2nodeclass, karpenter_nodepool)
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == module.__name__
    ]

    assert len(models) == 11
    assert [m.__name__ for m in models if not m.model_config.get("defer_build")] == []
