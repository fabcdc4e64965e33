"""Documents applied in any order, as Kubernetes applies them (issue 40): a document naming
something not applied yet is applied, its status says what it waits for, and a request that
depends on it is Rejected naming the missing object until it is applied
(docs/ome.md and docs/karpenter.md, "Applied in any order"; docs/cli.md)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import E2E_POOL, E2eCloud, apply_text, request_id, run_cli

REPO = Path(__file__).resolve().parents[2]
OME = REPO / "examples" / "ome"
# The flavors seed 004's reservations name: each a NodePool, all of one NodeClass.
FLAVORS = (
    "h100-flavor",
    "training-h100-flavor",
    "serving-a100-flavor",
    "research-mixed-flavor",
    "mixed-gpu-flavor",
    "team-a-flavor",
)
NODE_CLASS = "order-free-gpu"
# Seed 004's multi-DAC example as written: a reservation and two DedicatedAIClusters, a kind
# that is not served here (a DAC is a launch request: docs/ome.md).
MULTI_DAC = """\
apiVersion: ome.io/v1beta1
kind: CapacityReservation
metadata:
  name: multi-dac-reservation
spec:
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "memory", "cpu"]
    flavors:
    - name: h100-flavor
      resources:
      - name: "nvidia.com/gpu"
        nominalQuota: 128         # Support multiple DACs
      - name: "memory"
        nominalQuota: 32Ti
      - name: "cpu"
        nominalQuota: 2048
---
apiVersion: ome.io/v1beta1
kind: DedicatedAICluster
metadata:
  name: training-dac-1
spec:
  capacityReservationId: "multi-dac-reservation"
  count: 4
---
apiVersion: ome.io/v1beta1
kind: DedicatedAICluster
metadata:
  name: training-dac-2
spec:
  capacityReservationId: "multi-dac-reservation"
  count: 4
"""


def _node_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": name},
        "spec": {
            "imageSsmParameter": (
                "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
            ),
            "subnetSelectorTerms": [{"tags": {"tier": "private"}}],
            "securityGroupIds": ["sg-0a1b2c3d4e5f67890"],
        },
    }


def _node_pool(name: str, node_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "nodeClassRef": node_class,
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                },
            ],
        },
    }


def seed_documents() -> list[dict[str, Any]]:
    """Seed 004's documents as written (examples/ome: its PriorityClasses and its seven
    reservations, the multi-DAC file with its two DedicatedAIClusters), and the NodePools its
    flavors name with their NodeClass."""
    found: list[dict[str, Any]] = []
    for path in sorted(OME.glob("*.yaml")):
        if path.name.startswith("5-multi-dac"):
            found += yaml.safe_load_all(MULTI_DAC)
        else:
            found += yaml.safe_load_all(path.read_text())
    return [*found, _node_class(NODE_CLASS), *(_node_pool(f, NODE_CLASS) for f in FLAVORS)]


def _served(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in documents if d["kind"] != "DedicatedAICluster"]


def _state() -> dict[str, Any]:
    """What is stored and what its status says, read back: documents without their status,
    and every condition's type and status."""
    state: dict[str, Any] = {}
    for resource in ("priorityclasses", "nodeclasses", "nodepools", "capacityquotas"):
        items = run_cli("get", resource, "-o", "json").json()["items"]
        mine = [i for i in items if _mine(i["metadata"]["name"])]
        state[resource] = {
            i["metadata"]["name"]: {k: v for k, v in i.items() if k != "status"} for i in mine
        }
        state[f"{resource} conditions"] = {
            i["metadata"]["name"]: {
                c["type"]: c["status"] for c in (i.get("status") or {}).get("conditions", [])
            }
            for i in mine
        }
    for resource in ("capacityreservations", "clustercapacityreservations"):
        for item in run_cli("get", resource, "-o", "json").json()["items"]:
            status = item["status"]
            state[f"{item['metadata']['name']} as written"] = {
                k: v for k, v in item.items() if k != "status"
            }
            state[f"{item['metadata']['name']} conditions"] = {
                c["type"]: c["status"] for c in status["conditions"]
            }
            state[f"{item['metadata']['name']} lifecycle"] = status[
                "capacityReservationLifecycleState"
            ]
    return state


# What instances use says, not what is applied: the e2e cloud is shared, and an earlier test's
# instances may still fill a seed reservation (test_ome_reservations.py).
USAGE_CONDITIONS = {"ResourcesSufficient", "DACAssociationsHealthy"}


def _not_true(state: dict[str, Any]) -> list[str]:
    """Every condition in `state` about what documents name (all but those about usage) that
    is not True, by where it is."""
    found = []
    for key, value in state.items():
        if not key.endswith("conditions"):
            continue
        nested = all(isinstance(v, dict) for v in value.values())
        for name, conditions in value.items() if nested else [(key, value)]:
            found += [
                f"{name} {t}"
                for t, status in conditions.items()
                if status != "True" and t not in USAGE_CONDITIONS
            ]
    return found


def _mine(name: str) -> bool:
    names = {d["metadata"]["name"] for d in _served(seed_documents())}
    return name in names


def _delete_all() -> None:
    for document in reversed(_served(seed_documents())):
        kind = {"PriorityClass": "priorityclass", "NodeClass": "nodeclass"}.get(
            document["kind"], "nodepool" if document["kind"] == "NodePool" else "capacityquota"
        )
        run_cli("delete", kind, document["metadata"]["name"], "--ignore-not-found")
    # Pools before their class, reservations before their classes: now the rest goes.
    for document in _served(seed_documents()):
        if document["kind"] in ("NodeClass", "PriorityClass"):
            kind = document["kind"].lower()
            run_cli("delete", kind, document["metadata"]["name"], "--ignore-not-found")


def _apply(tmp_path: Path, documents: list[dict[str, Any]], one_by_one: bool) -> list[Any]:
    """Apply `documents` in their order: each from its own file (a GitOps tool applying a
    folder), or all from one file in that order. Returns each run's result."""
    if not one_by_one:
        return [apply_text(tmp_path, "all.yaml", yaml.safe_dump_all(documents))]
    return [apply_text(tmp_path, f"{i}.yaml", yaml.safe_dump(d)) for i, d in enumerate(documents)]


def test_seed_004_applies_as_written_in_any_order_to_one_state_with_every_condition_true(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    documents = seed_documents()
    rng = random.Random(4)  # a seeded shuffle: the same orders on every run
    orders = [documents, list(reversed(documents))]
    orders += [rng.sample(documents, len(documents)) for _ in range(4)]
    states = []
    try:
        for n, order in enumerate(orders):
            results = _apply(tmp_path, order, one_by_one=n % 2 == 1)
            for result in results:
                # Only a file with a DedicatedAICluster exits 1 (skipped: kubectl's exit), and
                # every other error is none
                errors = [line for line in result.err.splitlines() if line.startswith("error:")]
                assert all("skipped: no kind 'DedicatedAICluster'" in e for e in errors), errors
                assert result.code == (1 if errors else 0), (n, result.err)
            state = _state()
            states.append(state)
            assert _not_true(state) == [], n
            _delete_all()
        # The same stored state, whatever the order
        assert all(state == states[0] for state in states[1:])
        priorities = {
            name: document["spec"]["priority"]
            for name, document in states[0]["capacityquotas"].items()
        }
        assert priorities["production-gpu-reservation"] == 900
        assert priorities["inference-serving-reservation"] == 1000
        assert priorities["team-a-reservation"] == 500
        assert states[0]["team-a-reservation lifecycle"] == "Active"
        # Every reference's condition was there to be true: each reservation's and pool's
        assert len(states[0]["capacityquotas"]) == 7
        assert set(states[0]["team-a-reservation conditions"]) == {
            "Ready",
            "ResourcesSufficient",
            "PriorityClassReady",
            "DACAssociationsHealthy",
        }
        assert set(states[0]["nodepools conditions"]) == set(FLAVORS)
        assert "NodeClassReady" in states[0]["nodepools conditions"]["team-a-flavor"]
    finally:
        _delete_all()


def test_a_reservation_before_its_priority_class_waits_and_its_requests_are_rejected(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    team_a = OME / "7-team-a-reservation.yaml"
    try:
        # Given seed 004's team-a reservation applied before the PriorityClass it names
        applied = run_cli("apply", "-f", str(team_a))
        assert applied.code == 0, applied.err
        assert "capacityquota/team-a-reservation created" in applied.out
        assert (
            "warning: capacityquota/team-a-reservation: spec.priorityClassName: PriorityClass "
            "'team-a-workloads' is not applied yet" in applied.err
        ), applied.err
        # Then its status names the class, and a request associated with it is Rejected
        # naming the class
        status = _reservation_status("team-a-reservation")
        assert status["capacityReservationLifecycleState"] == "Creating"
        conditions = {c["type"]: c for c in status["conditions"]}
        assert conditions["PriorityClassReady"]["status"] == "False"
        assert conditions["PriorityClassReady"]["reason"] == "PriorityClassNotFound"
        assert "team-a-workloads" in conditions["PriorityClassReady"]["message"]
        assert conditions["Ready"]["reason"] in ("FlavorNotFound", "PriorityClassNotFound")
        rejected = _sent_straight(e2e_cloud, capacityReservation="team-a-reservation")
        assert rejected["status"] == "Rejected", rejected
        assert rejected["errors"][0]["code"] == "UnknownPriorityClass"
        assert "PriorityClass 'team-a-workloads'" in rejected["errors"][0]["message"]

        # When the class is applied
        classes = OME / "0-priority-classes.yaml"
        assert run_cli("apply", "-f", str(classes)).code == 0
        # Then the reservation takes its value, its condition turns true, and the same request
        # is no longer rejected for it
        hub = run_cli("get", "capacityquota", "team-a-reservation", "-o", "json").json()
        assert hub["spec"]["priority"] == 500
        conditions = {c["type"]: c for c in _reservation_status("team-a-reservation")["conditions"]}
        assert conditions["PriorityClassReady"]["status"] == "True"
        again = _sent_straight(e2e_cloud, capacityReservation="team-a-reservation")
        assert all(e["code"] != "UnknownPriorityClass" for e in again["errors"]), again
        # A class a reservation names is still not deleted
        in_use = run_cli("delete", "priorityclass", "team-a-workloads")
        assert in_use.code == 1 and "named by reservation(s) team-a-reservation" in in_use.err
    finally:
        run_cli("delete", "capacityquota", "team-a-reservation", "--ignore-not-found")
        for document in yaml.safe_load_all((OME / "0-priority-classes.yaml").read_text()):
            run_cli("delete", "priorityclass", document["metadata"]["name"], "--ignore-not-found")


def test_a_pool_before_its_node_class_waits_and_its_requests_are_rejected(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    try:
        # Given a NodePool applied before the NodeClass it names
        applied = apply_text(tmp_path, "pool.yaml", yaml.safe_dump(_node_pool("early", "later")))
        assert applied.code == 0, applied.err
        assert applied.out.strip() == "nodepool/early created"
        assert (
            "warning: nodepool/early: spec.nodeClassRef: NodeClass 'later' is not applied yet"
            in applied.err
        )
        # Then its conditions say so, and a request for it is Rejected naming the class
        assert _pool_conditions("early")["NodeClassReady"] == ("False", "NodeClassNotFound")
        assert _pool_conditions("early")["Ready"] == ("False", "NodeClassNotFound")
        rejected = _sent_straight(e2e_cloud, nodePool="early")
        assert rejected["status"] == "Rejected", rejected
        assert rejected["errors"][0]["code"] == "UnknownNodeClass"
        assert "NodeClass 'later'" in rejected["errors"][0]["message"]

        # When the class is applied, the pool is ready and launches
        assert apply_text(tmp_path, "class.yaml", yaml.safe_dump(_node_class("later"))).code == 0
        assert _pool_conditions("early")["NodeClassReady"] == ("True", "NodeClassFound")
        assert _sent_straight(e2e_cloud, nodePool="early")["status"] == "Fulfilled"
        # A class a pool names is still not deleted
        in_use = run_cli("delete", "nodeclass", "later")
        assert in_use.code == 1 and "used by NodePool(s) early" in in_use.err
    finally:
        run_cli("delete", "nodepool", "early", "--ignore-not-found")
        run_cli("delete", "nodeclass", "later", "--ignore-not-found")


def test_a_quota_before_its_pools_waits_and_reads_ready_once_they_are_applied(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    quota = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": "early-quota"},
        "spec": {
            "requesters": ["early-team"],
            "resourceGroups": [
                {
                    "coveredResources": ["instances"],
                    "flavors": [
                        {
                            "name": "later-pool",
                            "resources": [{"name": "instances", "nominalQuota": 2}],
                        }
                    ],
                }
            ],
        },
    }
    try:
        applied = apply_text(tmp_path, "quota.yaml", yaml.safe_dump(quota))
        assert applied.code == 0, applied.err
        assert (
            "warning: capacityquota/early-quota: spec.resourceGroups[0].flavors[0].name: "
            "NodePool 'later-pool' is not applied yet" in applied.err
        )
        assert _quota_conditions("early-quota")["Ready"] == ("False", "FlavorNotFound")
        # A request in a pool not applied is Rejected naming it (the quota acts on nothing)
        rejected = _sent_straight(e2e_cloud, nodePool="later-pool", requester="early-team")
        assert rejected["errors"][0]["code"] == "UnknownNodePool"

        pool = _node_pool("later-pool", E2E_POOL)
        assert apply_text(tmp_path, "pool.yaml", yaml.safe_dump(pool)).code == 0
        # Read now, not when the sync next runs
        assert _quota_conditions("early-quota")["Ready"] == ("True", "QuotaActive")
    finally:
        run_cli("delete", "capacityquota", "early-quota", "--ignore-not-found")
        run_cli("delete", "nodepool", "later-pool", "--ignore-not-found")


def test_a_file_with_a_kind_not_served_applies_the_rest_and_names_what_it_skipped(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    try:
        applied = apply_text(tmp_path, "multi-dac.yaml", MULTI_DAC)
        # kubectl's way: the served documents applied, each skipped one named, exit 1
        assert applied.code == 1
        assert applied.out.startswith(
            "capacityquota/multi-dac-reservation created (as ome.io/v1beta1 CapacityReservation)"
        ), applied.out
        for n, name in ((2, "training-dac-1"), (3, "training-dac-2")):
            assert (
                f"error: {tmp_path / 'multi-dac.yaml'}: document {n} (DedicatedAICluster "
                f"{name}): skipped: no kind 'DedicatedAICluster' is served here"
            ) in applied.err, applied.err
        assert "the other documents are applied" in applied.err
        assert run_cli("get", "capacityreservation", "multi-dac-reservation").code == 0
        # A file of nothing served applies nothing, and says so the same way
        alone = apply_text(tmp_path, "dac.yaml", MULTI_DAC.split("---\n", 1)[1])
        assert (alone.code, alone.out) == (1, "")
        assert alone.err.count("skipped: no kind 'DedicatedAICluster'") == 2
    finally:
        run_cli("delete", "capacityquota", "multi-dac-reservation", "--ignore-not-found")


def _sent_straight(e2e_cloud: E2eCloud, **fields: Any) -> dict[str, Any]:
    """A launch request sent to the queue as another producer would (no CLI check first), and
    its record once it is final."""
    rid = request_id("order-free")
    body = {"requestId": rid, "count": 1, **fields}
    if "nodePool" not in body:
        body["nodePool"] = E2E_POOL
    e2e_cloud.client("sqs").send_message(
        QueueUrl=e2e_cloud.deployment.launch_queue_url, MessageBody=json.dumps(body)
    )
    record: dict[str, Any] = run_cli("status", rid, "--wait", "--timeout", "60").json()
    return record


def _reservation_status(name: str) -> dict[str, Any]:
    status: dict[str, Any] = run_cli("get", "capacityreservation", name, "-o", "json").json()[
        "status"
    ]
    return status


def _pool_conditions(name: str) -> dict[str, tuple[str, str]]:
    pool = run_cli("get", "nodepool", name, "-o", "json").json()
    return {c["type"]: (c["status"], c["reason"]) for c in pool["status"]["conditions"]}


def _quota_conditions(name: str) -> dict[str, tuple[str, str]]:
    quotas = run_cli("get", "quotas", "-o", "json").json()
    items = quotas["items"] if isinstance(quotas, dict) else quotas
    found = next(q for q in items if q["metadata"]["name"] == name)
    return {c["type"]: (c["status"], c["reason"]) for c in found["status"]["conditions"]}


def _cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    spec = {} if parent is None else {"parentName": parent}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def _cohort_ready(name: str) -> tuple[str, str]:
    found = run_cli("get", "cohort", name, "-o", "json").json()
    [ready] = [c for c in found["status"]["conditions"] if c["type"] == "Ready"]
    return ready["status"], ready["reason"]


def test_a_cohort_before_its_parent_waits_and_joins_the_tree_once_it_is_applied(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    try:
        applied = apply_text(
            tmp_path, "child.yaml", yaml.safe_dump(_cohort("e2e-child", "e2e-org"))
        )
        assert applied.code == 0, applied.err
        assert applied.out.strip() == "cohort/e2e-child created"
        assert (
            "warning: cohort/e2e-child: spec.parentName: Cohort e2e-org is not applied yet"
            in applied.err
        )
        assert _cohort_ready("e2e-child") == ("False", "ParentNotFound")
        parent = apply_text(tmp_path, "parent.yaml", yaml.safe_dump(_cohort("e2e-org")))
        assert parent.code == 0, parent.err
        assert _cohort_ready("e2e-child") == ("True", "CohortActive")
        listed = run_cli("get", "cohorts")
        assert "e2e-child" in listed.out and "e2e-org" in listed.out
        # A cycle is refused naming the field, and nothing changes
        cycle = apply_text(tmp_path, "cycle.yaml", yaml.safe_dump(_cohort("e2e-org", "e2e-child")))
        assert cycle.code == 1
        assert "spec.parentName: makes a cycle of parents" in cycle.err
        again = apply_text(tmp_path, "parent.yaml", yaml.safe_dump(_cohort("e2e-org")))
        assert again.out.strip() == "cohort/e2e-org unchanged"
    finally:
        for name in ("e2e-child", "e2e-org"):
            run_cli("delete", "cohort", name, "--ignore-not-found")
    assert run_cli("get", "cohort", "e2e-org").code == 1
