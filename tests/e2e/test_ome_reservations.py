"""OME's CapacityReservation examples applied as written; launches held to them (docs/ome.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import E2eCloud, apply_text, run_cli, submit_through_queue

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "ome"
RESERVATIONS = {
    "production-gpu-reservation",
    "training-gpu-reservation",
    "inference-serving-reservation",
    "research-flexible-reservation",
    "multi-dac-reservation",
    "cluster-wide-gpu-reservation",
    "team-a-reservation",
}
# The pool production-gpu-reservation's flavor names: p4d.24xlarge has 8 GPUs, 96 vCPUs, 1152 GiB.
H100_POOL = """\
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {name: h100}
spec:
  imageSsmParameter: /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64
  subnetSelectorTerms: [{tags: {tier: private}}]
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
---
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {name: h100-flavor}
spec:
  nodeClassRef: h100
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}
"""


def _submit(tmp_path: Path, **fields: object) -> dict[str, Any]:
    return submit_through_queue(tmp_path, {"nodePool": "h100-flavor", **fields})


def test_the_seed_examples_apply_as_written_and_launches_stay_within_them(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    assert apply_text(tmp_path, "h100.yaml", H100_POOL).code == 0
    applied = run_cli("apply", "-f", str(EXAMPLES))
    try:
        assert applied.code == 0, applied.err
        for name in RESERVATIONS:
            kind = "clustercapacityreservation" if "cluster-wide" in name else "capacityreservation"
            assert f"capacityquota/{name} applied (as ome.io/v1beta1" in applied.out, applied.out
            shown = run_cli("get", kind, name, "-o", "yaml")
            assert shown.code == 0, shown.err
            document = yaml.safe_load(shown.out)
            written = [
                d
                for path in EXAMPLES.glob("*.yaml")
                for d in yaml.safe_load_all(path.read_text())
                if d["metadata"]["name"] == name
            ]
            assert {k: v for k, v in document.items() if k != "status"} == written[0]
        assert "  spec.compartmentID: kept, not acted on" in applied.out

        # 4 x 8 GPUs fill production-gpu-reservation's 32 in h100-flavor, for its association
        first = _submit(
            tmp_path,
            count=4,
            requester="training-cluster",
            capacityReservation="production-gpu-reservation",
        )
        assert (first["status"], first["launched"]) == ("Fulfilled", 4), first
        assert (
            first["requester"] == "capacityreservation/production-gpu-reservation/training-cluster"
        )
        over = _submit(
            tmp_path,
            count=1,
            requester="another-dac",
            capacityReservation="production-gpu-reservation",
        )
        assert over["status"] == "Failed", over
        assert "QuotaExceeded" in json.dumps(over["errors"])
        unassociated = _submit(tmp_path, count=1, requester="training-cluster")
        assert unassociated["status"] == "Failed", unassociated
        # The other reservation naming the pool still admits its own associations
        other = _submit(tmp_path, count=1, capacityReservation="multi-dac-reservation")
        assert other["status"] == "Fulfilled", other

        status = yaml.safe_load(
            run_cli("get", "capacityreservation", "production-gpu-reservation", "-o", "yaml").out
        )["status"]
        assert status["capacityReservationLifecycleState"] == "Active"
        assert status["associationUsages"][0]["name"] == "training-cluster"
        gpus = status["associationUsages"][0]["usage"][0]["resources"][0]
        assert gpus == {"name": "nvidia.com/gpu", "total": "32"}
        allocatable = {r["name"]: r["total"] for r in status["allocatable"][0]["resources"]}
        assert allocatable["nvidia.com/gpu"] == "0"
        conditions = {c["type"]: c for c in status["conditions"]}
        assert set(conditions) == {"Ready", "ResourcesSufficient", "DACAssociationsHealthy"}
        assert conditions["ResourcesSufficient"]["status"] == "False"
        assert "spec.compartmentID" in status["notActedOn"]
    finally:
        for name in RESERVATIONS:
            run_cli("delete", "capacityquota", name)
