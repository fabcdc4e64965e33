"""apply / get / delete against the local cloud, and errors that say where the problem is."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import REPO, E2eCloud, run_cli

BROKEN = """\
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {name: fine}
spec:
  imageId: ami-0123456789abcdef0
  subnetIds: [subnet-0123456789abcdef0]
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
---
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {name: broken}
spec:
  imageId: ami-0123456789abcdef0
  subnetIds: [subnet-0123456789abcdef0]
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
  capacityReservationSpec:
    capacityReservationPreference: open
    capacityReservationTarget: {capacityReservationId: cr-0123456789abcdef0}
"""


def test_apply_names_file_document_and_field_and_applies_nothing(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    path = tmp_path / "classes.yaml"
    path.write_text(BROKEN)

    result = run_cli("apply", "-f", str(path))

    assert result.code == 1
    assert f"{path}: document 2 (NodeClass broken): spec.capacityReservationSpec" in result.err
    assert "cannot be set together with capacityReservationTarget" in result.err
    names = {
        c["metadata"]["name"] for c in run_cli("get", "nodeclasses", "-o", "json").json()["items"]
    }
    assert "fine" not in names


def test_a_pool_naming_a_missing_class_is_applied_and_says_what_it_waits_for(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    """As Kubernetes applies a Karpenter NodePool naming no EC2NodeClass yet
    (tests/e2e/test_order_free_apply.py follows it to its class's apply)."""
    path = tmp_path / "pool.yaml"
    path.write_text(
        "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: orphan}\n"
        "spec: {nodeClassRef: missing-class}\n"
    )

    try:
        result = run_cli("apply", "-f", str(path))

        assert result.code == 0, result.err
        assert result.out == "nodepool/orphan created\n"
        assert "warning: nodepool/orphan: spec.nodeClassRef: NodeClass 'missing-class'" in (
            result.err
        )
    finally:
        run_cli("delete", "nodepool", "orphan", "--ignore-not-found")


def test_apply_get_and_delete_round_trip(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: scratch}\n"
        "spec:\n  nodeClassRef: general\n  limits: {instances: '3'}\n"
    )

    assert run_cli("apply", "-f", str(path)).out.strip() == "nodepool/scratch created"
    pools = {
        p["metadata"]["name"]: p for p in run_cli("get", "nodepools", "-o", "json").json()["items"]
    }
    assert pools["scratch"]["spec"]["limits"] == {"instances": "3"}
    assert "scratch" in run_cli("get", "nodepools").out

    assert run_cli("delete", "nodepool", "scratch").code == 0
    assert "scratch" not in run_cli("get", "nodepools").out
    missing = run_cli("delete", "nodepool", "scratch")
    assert missing.code == 1
    assert "not found" in missing.err
    # --ignore-not-found: a missing document is no error, and nothing is printed
    ignored = run_cli("delete", "nodepool", "scratch", "--ignore-not-found")
    assert (ignored.code, ignored.out, ignored.err) == (0, "", "")


def test_a_class_in_use_cannot_be_deleted(e2e_cloud: E2eCloud) -> None:
    result = run_cli("delete", "nodeclass", "general")

    assert result.code == 1
    assert "general" in result.err


CONFLICTING_QUOTA = """\
apiVersion: capacity-launcher/v1
kind: CapacityQuota
metadata: {name: team-ml-too}
spec:
  requesters: [team-ml]
  resourceGroups:
    - coveredResources: [instances]
      flavors:
        - name: training
          resources: [{name: instances, nominalQuota: "2"}]
"""


def test_quotas_apply_list_with_status_and_delete(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    examples = str(Path(__file__).resolve().parents[2] / "examples" / "quotas")

    applied = run_cli("apply", "-f", examples)
    try:
        assert applied.code == 0, applied.err
        assert "capacityquota/team-research created" in applied.out
        listed = {
            q["metadata"]["name"]: q for q in run_cli("get", "quotas", "-o", "json").json()["items"]
        }
        assert set(listed) == {"team-ml", "team-research", "team-batch"}
        research = listed["team-research"]
        assert research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1] == {
            "name": "memory",
            "nominalQuota": "64Gi",
            "borrowingLimit": "64Gi",
        }
        capacity = research["status"]["capacity"][0]["resources"]
        assert {r["name"]: r["total"] for r in capacity}["memory"] == "64Gi"
        ready = research["status"]["conditions"][0]
        assert (ready["type"], ready["status"]) == ("Ready", "True")
        assert "team-research" in run_cli("get", "quotas").out

        # A requester that already has a quota in the pool is refused, naming both quotas
        path = tmp_path / "quota.yaml"
        path.write_text(CONFLICTING_QUOTA)
        refused = run_cli("apply", "-f", str(path))
        assert refused.code == 1
        assert "'team-ml' is already covered in flavor training by CapacityQuota" in refused.err
    finally:
        for name in ("team-ml", "team-research", "team-batch"):
            run_cli("delete", "capacityquota", name)
    assert run_cli("get", "quotas", "-o", "json").json()["items"] == []


def test_get_one_document_as_yaml_in_a_served_version(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: versioned}\n"
        "spec:\n  nodeClassRef: general\n  limits: {instances: '2'}\n"
    )
    assert run_cli("apply", "-f", str(path)).code == 0

    shown = run_cli("get", "nodepool", "versioned", "-o", "yaml")
    assert shown.code == 0
    document = yaml.safe_load(shown.out)
    assert document["apiVersion"] == "capacity-launcher/v1"
    assert document["spec"]["limits"] == {"instances": "2"}
    listed = yaml.safe_load(run_cli("get", "nodepools", "-o", "yaml").out)
    assert "versioned" in {item["metadata"]["name"] for item in listed["items"]}

    refused = run_cli("get", "nodepool", "versioned", "--output-version", "example.com/v9")
    assert refused.code == 1
    assert "not a served version of NodePool: capacity-launcher/v1" in refused.err
    assert run_cli("get", "nodepool", "no-such-pool", "-o", "yaml").code == 1
    as_karpenter = run_cli("get", "nodepool", "versioned", "--output-version", "karpenter.sh/v1")
    pool = yaml.safe_load(as_karpenter.out)
    assert pool["spec"]["limits"] == {"nodes": "2"}
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "general"
    # The shared cloud's later tests delete the example classes: leave no pool naming them.
    assert run_cli("delete", "nodepool", "versioned").code == 0


def test_convert_prints_documents_in_the_version_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: converted}\n"
        "spec: {nodeClassRef: general}\n"
    )
    converted = run_cli("convert", "-f", str(path), "--output-version", "capacity-launcher/v1")
    assert converted.code == 0
    assert yaml.safe_load(converted.out)["spec"]["nodeClassRef"] == "general"
    refused = run_cli("convert", "-f", str(path), "--output-version", "example.com/v9")
    assert refused.code == 1
    assert f"{path}: document 1 (NodePool converted): outputVersion" in refused.err


def test_convert_a_karpenter_document_to_the_hub_and_back_loses_nothing(tmp_path: Path) -> None:
    source = REPO / "examples" / "karpenter" / "v1" / "multiple-ebs.yaml"
    (node_class,) = [
        d for d in yaml.safe_load_all(source.read_text()) if d and d["kind"] == "EC2NodeClass"
    ]
    written = tmp_path / "ec2nodeclass.yaml"
    written.write_text(yaml.safe_dump(node_class))

    to_hub = run_cli("convert", "-f", str(written), "--output-version", "capacity-launcher/v1")
    assert to_hub.code == 0, to_hub.err
    hub = yaml.safe_load(to_hub.out)
    assert hub["kind"] == "NodeClass"
    assert (
        hub["spec"]["securityGroupSelectorTerms"]
        == node_class["spec"]["securityGroupSelectorTerms"]
    )
    assert "capacity-launcher/kept-fields" in hub["metadata"]["annotations"]
    (tmp_path / "hub.yaml").write_text(to_hub.out)

    back = run_cli(
        "convert", "-f", str(tmp_path / "hub.yaml"), "--output-version", "karpenter.k8s.aws/v1"
    )
    assert back.code == 0, back.err
    assert yaml.safe_load(back.out) == node_class
