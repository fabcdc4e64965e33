"""`get KIND NAME -o yaml | apply -f -` gives the object back unchanged, in every kind and served
version `get` prints (docs/api-versions.md): the status `get` adds is ignored, not refused."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import E2eCloud, apply_text, run_cli

SUFFIX = uuid.uuid4().hex[:8]
POOL = f"rt-{SUFFIX}"
PROVISIONER = f"rt-prov-{SUFFIX}"
RESERVATION = f"rt-cr-{SUFFIX}"
CLUSTER_RESERVATION = f"rt-ccr-{SUFFIX}"
QUOTA = f"rt-cq-{SUFFIX}"

DOCUMENTS = f"""\
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {{name: {POOL}}}
spec:
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
  subnetSelectorTerms: [{{tags: {{Name: private-us-east-1a}}}}]
  imageSsmParameter: /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64
---
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {POOL}}}
spec: {{nodeClassRef: {POOL}, weight: 3, limits: {{cpu: "8"}}}}
---
apiVersion: karpenter.sh/v1alpha4
kind: Provisioner
metadata: {{name: {PROVISIONER}}}
spec:
  provider:
    apiVersion: extensions.karpenter.sh/v1alpha1
    kind: AWS
    securityGroups: ["sg-0a1b2c3d4e5f67890"]
    subnets: ["private-us-east-1a"]
  instanceTypes: ["m5.large"]
  limits: {{resources: {{cpu: 16}}}}
---
apiVersion: ome.io/v1beta1
kind: CapacityReservation
metadata: {{name: {RESERVATION}, namespace: serving}}
spec:
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: {POOL}
      resources: [{{name: cpu, nominalQuota: 4}}]
---
apiVersion: ome.io/v1beta1
kind: ClusterCapacityReservation
metadata: {{name: {CLUSTER_RESERVATION}}}
spec:
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: {POOL}
      resources: [{{name: cpu, nominalQuota: 2}}]
---
apiVersion: capacity-launcher/v1
kind: CapacityQuota
metadata: {{name: {QUOTA}}}
spec:
  requesters: [{QUOTA}]
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - name: {POOL}
          resources: [{{name: cpu, nominalQuota: "2"}}]
"""

# (TYPE, NAME, extra `get` arguments): one per kind and version `get -o yaml` prints.
PRINTED = [
    ("nodepool", POOL, ()),
    ("nodeclass", POOL, ()),
    ("ec2nodeclass", POOL, ()),
    ("nodepool", POOL, ("--output-version", "karpenter.sh/v1")),
    ("nodepool", PROVISIONER, ("--output-version", "karpenter.sh/v1alpha4")),
    ("capacityreservation", RESERVATION, ()),
    ("clustercapacityreservation", CLUSTER_RESERVATION, ()),
    ("capacityquota", QUOTA, ()),
]


@pytest.fixture(scope="module")
def applied(e2e_cloud: E2eCloud, tmp_path_factory: pytest.TempPathFactory) -> None:
    result = apply_text(tmp_path_factory.mktemp("round-trip"), "round-trip.yaml", DOCUMENTS)
    assert result.code == 0, result.err


def _without_status(text: str) -> dict[str, Any]:
    document = yaml.safe_load(text)
    assert isinstance(document, dict)
    return {k: v for k, v in document.items() if k != "status"}


# Ids without the random suffix: every xdist worker must collect the same test names.
PRINTED_IDS = [
    "nodepool",
    "nodeclass",
    "ec2nodeclass",
    "nodepool-as-karpenter-v1",
    "provisioner-as-v1alpha4",
    "capacityreservation",
    "clustercapacityreservation",
    "capacityquota",
]


@pytest.mark.parametrize(("resource", "name", "extra"), PRINTED, ids=PRINTED_IDS)
def test_get_yaml_applied_back_from_stdin_is_unchanged(
    applied: None, resource: str, name: str, extra: tuple[str, ...]
) -> None:
    printed = run_cli("get", resource, name, "-o", "yaml", *extra)
    assert printed.code == 0, printed.err
    assert "status" in yaml.safe_load(printed.out) or resource == "capacityquota"

    result = run_cli("apply", "-f", "-", stdin=printed.out)

    assert result.code == 0, result.err
    assert "error" not in result.err and "status" not in result.err
    again = run_cli("get", resource, name, "-o", "yaml", *extra)
    assert _without_status(again.out) == _without_status(printed.out)


def test_server_set_metadata_is_ignored_too(applied: None, tmp_path: Path) -> None:
    printed = yaml.safe_load(run_cli("get", "nodepool", POOL, "-o", "yaml").out)
    printed["metadata"].update(
        creationTimestamp="2026-01-01T00:00:00Z",
        generation=3,
        resourceVersion="42",
        uid="0b0e1c5e-0000-4000-8000-000000000000",
        managedFields=[{"manager": "kubectl"}],
    )

    result = run_cli("apply", "-f", "-", stdin=yaml.safe_dump(printed))

    assert result.code == 0, result.err
    metadata = yaml.safe_load(run_cli("get", "nodepool", POOL, "-o", "yaml").out)["metadata"]
    assert metadata == {"name": POOL}


def test_unknown_fields_beside_status_are_still_refused(applied: None) -> None:
    printed = yaml.safe_load(run_cli("get", "nodepool", POOL, "-o", "yaml").out)
    printed["spec"]["colour"] = "blue"
    printed["metadata"]["owner"] = "me"

    result = run_cli("apply", "-f", "-", stdin=yaml.safe_dump(printed))

    assert result.code == 1
    assert "<stdin>: document 1 (NodePool " in result.err
    assert "spec.colour: is not an allowed field" in result.err
    assert "metadata.owner: is not an allowed field" in result.err
