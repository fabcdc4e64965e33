"""Karpenter's own examples/v1 documents (and a seed-000 v1beta1 EC2NodeClass) applied as written
on the local cloud, and requests to their pools launching within requirements and limits."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import REPO, E2eCloud, request_id, run_cli

EXAMPLES = REPO / "examples" / "karpenter"
# Refused, by path, as Karpenter refuses it itself (nodeClassRef.group must not contain '/').
REFUSED = {"windows-custom-userdata.yaml": "spec.template.spec.nodeClassRef.group"}
KINDS = {"NodePool": "nodepool", "EC2NodeClass": "nodeclass"}


def _names(path: Path) -> list[tuple[str, str]]:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    # Pools first: a class still used by a pool cannot be deleted.
    return sorted(((KINDS[d["kind"]], d["metadata"]["name"]) for d in documents), reverse=True)


@pytest.fixture
def applied(e2e_cloud: E2eCloud) -> Iterator[list[Path]]:
    """Files this test applies; their pools and classes are deleted afterwards (the cloud is
    shared, and a pool that names no type would serve other tests' requests)."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        for kind, name in _names(path):
            run_cli("delete", kind, name)


def apply(applied: list[Path], path: Path) -> Any:
    applied.append(path)
    return run_cli("apply", "-f", str(path))


@pytest.mark.parametrize("path", sorted((EXAMPLES / "v1").glob("*.yaml")), ids=lambda p: p.name)
def test_each_karpenter_example_applies_as_written(applied: list[Path], path: Path) -> None:
    result = apply(applied, path)
    if path.name in REFUSED:
        assert result.code == 1
        assert f"{path}: document" in result.err
        assert REFUSED[path.name] in result.err
        return
    assert result.code == 0, result.err
    for kind, name in _names(path):
        assert re.search(
            rf"{kind}/{name} (created|configured|unchanged) \(as karpenter\.", result.out
        )
    assert "  metadata.annotations: kept, not acted on" in result.out
    # The role is acted on: the service makes the class an instance profile holding it
    assert "spec.role: kept, not acted on" not in result.out


def _vcpus(e2e_cloud: E2eCloud, types: set[str]) -> dict[str, int]:
    found = e2e_cloud.client("ec2").describe_instance_types(InstanceTypes=sorted(types))
    return {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in found["InstanceTypes"]}


def _launched(rid: str) -> list[dict[str, Any]]:
    status = run_cli("status", rid, "--wait", "--timeout", "180")
    assert status.out, status.err
    instances: list[dict[str, Any]] = status.json().get("instances", [])
    return instances


def test_the_cpu_limit_of_100_holds_under_a_burst(e2e_cloud: E2eCloud, applied: list[Path]) -> None:
    # Given Karpenter's 100-cpu-limit example: on-demand amd64 c/m/r types after generation 2
    assert apply(applied, EXAMPLES / "v1" / "100-cpu-limit.yaml").code == 0

    # When a burst asks for far more than 100 cores at once
    rids = [request_id("burst") for _ in range(12)]
    for rid in rids:
        sent = run_cli("submit", "--request-id", rid, "--node-pool", "limitcpu100", "--count", "6",
                       "--via", "queue")  # fmt: skip
        assert sent.code == 0, sent.err
    instances = [i for rid in rids for i in _launched(rid)]

    # Then what was launched stays within the limit and within the pool's requirements
    assert instances
    vcpus = _vcpus(e2e_cloud, {i["instanceType"] for i in instances})
    assert sum(vcpus[i["instanceType"]] for i in instances) <= 100
    for instance in instances:
        family = instance["instanceType"].split(".")[0]
        match = re.match(r"^([a-z]+)(\d+)", family)
        assert match is not None
        assert match.group(1) in ("c", "m", "r"), instance
        assert int(match.group(2)) > 2, instance
        assert instance["capacityType"] == "on-demand"


def test_a_general_purpose_pool_launches_with_the_resolved_network_and_image(
    e2e_cloud: E2eCloud, applied: list[Path]
) -> None:
    # Given Karpenter's multiple-ebs example (al2023@latest, discovery-tagged network, 3 volumes)
    assert apply(applied, EXAMPLES / "v1" / "multiple-ebs.yaml").code == 0
    rid = request_id("karpenter")

    # When a request for its pool is fulfilled
    sent = run_cli(
        "submit",
        "--request-id",
        rid,
        "--node-pool",
        "default",
        "--count",
        "1",
        "--wait",
        "--timeout",
        "300",
    )
    assert sent.code == 0, sent.err
    (instance,) = sent.json()["instances"]

    # Then the instance runs the alias's image, in the tagged security group, with the volumes
    ec2 = e2e_cloud.client("ec2")
    described = ec2.describe_instances(InstanceIds=[instance["instanceId"]])
    (launched,) = [i for r in described["Reservations"] for i in r["Instances"]]
    ssm = e2e_cloud.client("ssm")
    alias = (
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
    )
    assert launched["ImageId"] == ssm.get_parameter(Name=alias)["Parameter"]["Value"]
    assert [g["GroupId"] for g in launched["SecurityGroups"]] == ["sg-0a1b2c3d4e5f67890"]
    templates = ec2.describe_launch_templates()["LaunchTemplates"]
    names = [
        t["LaunchTemplateName"] for t in templates if "-multiple-ebs-" in t["LaunchTemplateName"]
    ]
    assert names
    data = ec2.describe_launch_template_versions(LaunchTemplateName=names[0])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert [(m["DeviceName"], m["Ebs"]["VolumeSize"]) for m in data["BlockDeviceMappings"]] == [
        ("/dev/xvda", 20),
        ("/dev/xvdb", 100),
        ("/dev/xvdc", 2000),
    ]

    # And the EC2NodeClass shows what its selectors resolved to, as Karpenter shows it
    shown = yaml.safe_load(run_cli("get", "ec2nodeclass", "multiple-ebs", "-o", "yaml").out)
    assert shown["apiVersion"] == "karpenter.k8s.aws/v1"
    assert shown["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    status = shown["status"]
    assert instance["zone"] in {s["zone"] for s in status["subnets"]}
    assert status["securityGroups"] == [
        {"id": "sg-0a1b2c3d4e5f67890", "name": "capacity-launcher-nodes"}
    ]

    # Every image of the alias: the standard x86_64 one the instance runs, the standard arm64
    # one, and the NVIDIA (both architectures) and Neuron (x86_64) variants
    def image(arch: str, variant: str) -> str:
        name = alias.replace("/x86_64/standard/", f"/{arch}/{variant}/")
        return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])

    assert [(a["id"], a["requirements"][0]["values"]) for a in status["amis"]] == [
        (launched["ImageId"], ["amd64"]),
        (image("arm64", "standard"), ["arm64"]),
        (image("x86_64", "nvidia"), ["amd64"]),
        (image("arm64", "nvidia"), ["arm64"]),
        (image("x86_64", "neuron"), ["amd64"]),
    ]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "SubnetsReady": "True",
        "SecurityGroupsReady": "True",
        "AMIsReady": "True",
        "InstanceProfileReady": "True",
        "Ready": "True",
    }
    assert "metadata.annotations" in status["notActedOn"]
    assert "spec.role" not in status["notActedOn"]
    # And the instance launched with the profile the service made for the example's role
    assert status["instanceProfile"].startswith("capacity-launcher_")
    assert launched["IamInstanceProfile"]["Arn"].endswith("/" + status["instanceProfile"])

    # And the instance has a read-only NodeClaim
    claims = run_cli("get", "nodeclaims")
    assert instance["instanceId"] in claims.out
    claim = yaml.safe_load(run_cli("get", "nodeclaim", instance["instanceId"], "-o", "yaml").out)
    assert claim["kind"] == "NodeClaim"
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert claim["status"]["providerID"] == f"aws:///{instance['zone']}/{instance['instanceId']}"
    assert claim["status"]["capacity"]["cpu"] == str(
        _vcpus(e2e_cloud, {instance["instanceType"]})[instance["instanceType"]]
    )
    assert {c["type"]: c["status"] for c in claim["status"]["conditions"]} == {
        "Launched": "True",
        "Ready": "True",
    }
    assert {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": [instance["instanceType"]],
    } in claim["spec"]["requirements"]
    assert run_cli("get", "nodeclaim", "i-00000000000000000").code == 1


def test_seed_000s_v1beta1_documents_apply_with_a_deprecation_warning(
    e2e_cloud: E2eCloud, applied: list[Path]
) -> None:
    path = EXAMPLES / "seed" / "000-capacity-reservation-spec.yaml"
    result = apply(applied, path)
    assert result.code == 0, result.err
    assert (
        "warning: karpenter.k8s.aws/v1beta1 EC2NodeClass is deprecated; "
        "use karpenter.k8s.aws/v1 EC2NodeClass"
    ) in result.err
    assert "warning: karpenter.sh/v1beta1 NodePool is deprecated" in result.err
    shown = yaml.safe_load(run_cli("get", "nodeclass", "example-node-class", "-o", "yaml").out)
    assert shown["spec"]["capacityReservationSpec"] == {"capacityReservationPreference": "open"}
    rid = request_id("seed")
    sent = run_cli(
        "submit",
        "--request-id",
        rid,
        "--node-pool",
        "example-odcr",
        "--count",
        "1",
        "--wait",
        "--timeout",
        "300",
    )
    assert sent.code == 0, sent.err
    (instance,) = sent.json()["instances"]
    assert instance["instanceType"] in ("m5.large", "m5.xlarge")


def test_the_instance_store_pool_launches_only_types_with_enough_local_nvme(
    e2e_cloud: E2eCloud, applied: list[Path]
) -> None:
    # Given Karpenter's instance-store example: instance-local-nvme Gt 300
    assert apply(applied, EXAMPLES / "v1" / "instance-store-ephemeral-storage.yaml").code == 0
    rid = request_id("nvme")

    # When a request for its pool is fulfilled
    sent = run_cli("submit", "--request-id", rid, "--node-pool", "default", "--count", "1",
                   "--wait", "--timeout", "300")  # fmt: skip
    assert sent.code == 0, sent.err
    (instance,) = sent.json()["instances"]

    # Then its type has more than 300 GB of NVMe instance store, as the pool requires
    described = e2e_cloud.client("ec2").describe_instance_types(
        InstanceTypes=[instance["instanceType"]]
    )["InstanceTypes"][0]
    assert described["InstanceStorageInfo"]["TotalSizeInGB"] > 300
    assert described["InstanceStorageInfo"]["NvmeSupport"] != "unsupported"
