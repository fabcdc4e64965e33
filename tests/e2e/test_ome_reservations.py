"""OME's CapacityReservation examples applied as written; launches held to them (docs/ome.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION, HUB_FIELDS_PATH
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
# examples/ome/0-priority-classes.yaml: the classes the seed reservations name, and their values.
PRIORITY_CLASSES = {
    "production-workloads": 1000,
    "high-priority": 900,
    "training-high-priority": 800,
    "team-a-workloads": 500,
    "research-workloads": 100,
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
            assert f"capacityquota/{name} created (as ome.io/v1beta1" in applied.out, applied.out
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
        for name in PRIORITY_CLASSES:
            assert f"priorityclass/{name} created" in applied.out
        # Each reservation's priority in the hub is its class's value (the cluster-wide one: 0)
        priorities = {
            d["metadata"]["name"]: d["spec"]["priority"]
            for d in yaml.safe_load(run_cli("get", "capacityquotas", "-o", "yaml").out)["items"]
        }
        assert priorities["inference-serving-reservation"] == 1000
        assert priorities["production-gpu-reservation"] == 900
        assert priorities["research-flexible-reservation"] == 100
        assert priorities["cluster-wide-gpu-reservation"] == 0

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
        assert set(conditions) == {
            "Ready",
            "ResourcesSufficient",
            "DACAssociationsHealthy",
            "PriorityClassReady",
        }
        assert conditions["PriorityClassReady"]["status"] == "True"
        assert conditions["ResourcesSufficient"]["status"] == "False"
        assert "spec.compartmentID" in status["notActedOn"]
    finally:
        for name in RESERVATIONS:
            run_cli("delete", "capacityquota", name)
        for name in PRIORITY_CLASSES:
            run_cli("delete", "priorityclass", name)


def test_a_seed_reservation_takes_the_value_of_the_priority_class_it_names(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    # Applied before its class, it waits for it (tests/e2e/test_order_free_apply.py)
    team_a = EXAMPLES / "7-team-a-reservation.yaml"
    missing = run_cli("apply", "-f", str(team_a))
    assert missing.code == 0, missing.err
    assert "spec.priorityClassName: PriorityClass 'team-a-workloads' is not applied yet" in (
        missing.err
    )
    hub = yaml.safe_load(run_cli("get", "capacityquota", "team-a-reservation", "-o", "yaml").out)
    assert hub["spec"]["priority"] == 0

    classes = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: team-a-workloads}
value: 1000000000
description: team A's inference
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: everyday}
value: 7
globalDefault: true
"""
    applied = apply_text(tmp_path, "classes.yaml", classes)
    try:
        assert applied.code == 0, applied.err
        assert "priorityclass/team-a-workloads created" in applied.out
        assert "  preemptionPolicy: kept, not acted on" in applied.out
        listed = run_cli("get", "priorityclasses")
        assert "team-a-workloads" in listed.out and "1000000000" in listed.out, listed.out
        shown = yaml.safe_load(run_cli("get", "priorityclass", "everyday", "-o", "yaml").out)
        assert shown == list(yaml.safe_load_all(classes))[1]

        reservation = run_cli("apply", "-f", str(team_a))
        assert reservation.code == 0, reservation.err
        assert "spec.priorityClassName: kept, not acted on" not in reservation.out
        # Read as written: the document, with no priority riding in an annotation
        written = yaml.safe_load(team_a.read_text())
        got = yaml.safe_load(
            run_cli("get", "capacityreservation", "team-a-reservation", "-o", "yaml").out
        )
        assert {k: v for k, v in got.items() if k != "status"} == written
        assert "spec.priorityClassName" not in got["status"].get("notActedOn", [])
        # The hub's priority is the class's value: what reclaim and borrowing compare
        hub = yaml.safe_load(
            run_cli("get", "capacityquota", "team-a-reservation", "-o", "yaml").out
        )
        assert hub["spec"]["priority"] == 1_000_000_000

        # A reservation naming no class gets the global default's value
        unnamed = {**written, "metadata": {"name": "unnamed"}}
        unnamed["spec"] = {k: v for k, v in written["spec"].items() if k != "priorityClassName"}
        assert apply_text(tmp_path, "unnamed.yaml", yaml.safe_dump(unnamed)).code == 0
        hub = yaml.safe_load(run_cli("get", "capacityquota", "unnamed", "-o", "yaml").out)
        assert hub["spec"]["priority"] == 7

        # The hub-fields annotation may carry the one field such a reservation has no place
        # for, its priority, and apply says so; a reservation naming its class says its own
        # priority, and the annotation may not override it (issue 34)
        unnamed["metadata"]["annotations"] = {HUB_FIELDS_ANNOTATION: '{"spec.priority": 250}'}
        carried = apply_text(tmp_path, "carried.yaml", yaml.safe_dump(unnamed))
        assert carried.code == 0, carried.err
        assert f"  spec.priority: set by {HUB_FIELDS_PATH}" in carried.out
        hub = yaml.safe_load(run_cli("get", "capacityquota", "unnamed", "-o", "yaml").out)
        assert hub["spec"]["priority"] == 250
        smuggled = {**written, "metadata": {**written["metadata"], **unnamed["metadata"]}}
        smuggled["metadata"]["name"] = "team-a-reservation"
        refused = apply_text(tmp_path, "smuggled.yaml", yaml.safe_dump(smuggled))
        assert refused.code == 1
        assert f"{HUB_FIELDS_PATH}: may not set spec.priority" in refused.err, refused.err

        changed = apply_text(tmp_path, "changed.yaml", classes.replace("1000000000", "5"))
        assert changed.code == 1
        assert "(PriorityClass team-a-workloads): value: may not change" in changed.err
        second = classes.replace("name: team-a-workloads}", "name: other}").replace(
            "preemptionPolicy: Never", "globalDefault: true"
        )
        refused = apply_text(tmp_path, "second.yaml", second)
        assert refused.code == 1 and "globalDefault: at most one" in refused.err, refused.err
        in_use = run_cli("delete", "priorityclass", "team-a-workloads")
        assert in_use.code == 1
        assert "named by reservation(s) team-a-reservation" in in_use.err
    finally:
        for name in ("team-a-reservation", "unnamed"):
            run_cli("delete", "capacityquota", name)
        for name in ("team-a-workloads", "everyday", "other"):
            run_cli("delete", "priorityclass", name)
    assert run_cli("get", "priorityclass", "team-a-workloads").code == 1
