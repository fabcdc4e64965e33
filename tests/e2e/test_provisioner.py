"""Karpenter's v1alpha4 Provisioner applied as written; limits.unready holds launches back until
the sync sees the pool's instances running with their status checks ok (docs/provisioner.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import REPO, E2eCloud, apply_text, run_cli, submit_through_queue

EXAMPLE = REPO / "examples" / "provisioner" / "provisioner.yaml"
STRICT = """\
apiVersion: karpenter.sh/v1alpha4
kind: Provisioner
metadata: {name: strict}
spec:
  provider:
    securityGroups: ["sg-0a1b2c3d4e5f67890"]
    subnets: ["private-us-east-1a"]
  instanceTypes: ["m5.large"]
  limits:
    unready: 0
    resources: {cpu: 8}
"""


def _submit(tmp_path: Path, pool: str, count: int) -> dict[str, Any]:
    return submit_through_queue(tmp_path, {"nodePool": pool, "count": count})


def test_the_seed_provisioner_applies_as_written_and_launches_within_it(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    applied = run_cli("apply", "-f", str(EXAMPLE))
    assert applied.code == 0, applied.err
    assert "nodepool/seed-003 created (as karpenter.sh/v1alpha4 Provisioner)" in applied.out
    assert "nodeclass/seed-003 created" in applied.out

    shown = yaml.safe_load(
        run_cli("get", "nodepool", "seed-003", "--output-version", "karpenter.sh/v1alpha4").out
    )
    assert {k: v for k, v in shown.items() if k != "status"} == yaml.safe_load(EXAMPLE.read_text())
    hub = yaml.safe_load(run_cli("get", "nodepool", "seed-003", "-o", "yaml").out)
    assert hub["spec"]["limits"] == {"cpu": "1000", "memory": "1000Gi", "unready": "20%"}
    assert {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["m5.large"],
    } in (hub["spec"]["requirements"])

    record = _submit(tmp_path, "seed-003", 2)
    assert record["status"] == "Fulfilled", json.dumps(record["errors"])
    assert {i["instanceType"] for i in record["instances"]} == {"m5.large"}


def test_limits_unready_holds_launches_until_the_sync_sees_them_ready(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    assert apply_text(tmp_path, "strict.yaml", STRICT).code == 0

    first = _submit(tmp_path, "strict", 1)
    assert first["status"] == "Fulfilled", first
    # Its instance is not yet seen running with status checks ok: nothing more launches
    held = _submit(tmp_path, "strict", 1)
    assert held["status"] == "Failed", held
    assert "limits.unready 0: 1 of its instances" in json.dumps(held["errors"])
    # The pool's status and a dry run say so too, as the lease's gate counts
    assert _sufficient("strict")[:2] == ("False", "UnreadyLimitReached")
    assert "limits.unready 0: 1 of its instances" in _sufficient("strict")[2]
    assert _used("strict")["unready"] == "1"
    described = run_cli("describe", "nodepool", "strict").out.splitlines()
    assert ["unready", "0", "1"] in [line.split() for line in described]
    dry = run_cli("submit", "--node-pool", "strict", "--count", "1", "--dry-run")
    assert dry.code == 1, dry.out
    (pool,) = dry.json()["pools"]
    assert "limits.unready 0: 1 of its instances" in pool["headroom"]["unreadyRefusal"]

    # The sync sees it running with both status checks ok (moto reports them ok at once)
    synced = run_cli(
        "invoke", "ReservationSyncFunction", "-e", str(REPO / "events" / "schedule.json")
    )
    assert synced.code == 0, synced.err
    assert _sufficient("strict")[:2] == ("True", "CapacityAvailable")
    assert "unready" not in _used("strict")
    ready = run_cli("submit", "--node-pool", "strict", "--count", "1", "--dry-run")
    assert ready.code == 0, ready.out
    assert ready.json()["pools"][0]["headroom"]["unreadyRefusal"] is None
    again = _submit(tmp_path, "strict", 1)
    assert again["status"] == "Fulfilled", again


def _status(pool: str) -> dict[str, Any]:
    shown: dict[str, Any] = run_cli("get", "nodepool", pool, "-o", "json").json()["status"]
    return shown


def _used(pool: str) -> dict[str, str]:
    used: dict[str, str] = _status(pool)["used"]
    return used


def _sufficient(pool: str) -> tuple[str, str, str]:
    (found,) = [c for c in _status(pool)["conditions"] if c["type"] == "ResourcesSufficient"]
    return found["status"], found["reason"], found["message"]
