"""A function's cold start imports its own use case, not the others' (docs/BENCHMARKS.md, "Cold
start"): each handler module is initialised in a fresh interpreter, as Lambda does, and the
service modules it imported are compared with those only other functions, or the apply path, use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "STATE_TABLE_NAME": "state",
    "UNAVAILABLE_OFFERINGS_TABLE_NAME": "unavailable-offerings",
    "IDEMPOTENCY_TABLE_NAME": "idempotency",
    "EVENT_BUS_NAME": "launch-bus",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("capacity_launcher."))))
"""
# Read and written by `apply` (the CLI) and the sync, never by a launch.
APPLY_PATH = (
    "capacity_launcher.domain.apis.api_versions",
    "capacity_launcher.domain.apis.served_versions",
    "capacity_launcher.domain.apis.priority_classes",
    "capacity_launcher.adapters.priority_class_store",
    "capacity_launcher.domain.apis.karpenter",
    "capacity_launcher.domain.apis.ome.reservations",
    "capacity_launcher.domain.apis.provisioners",
)
LIFECYCLE = (
    "capacity_launcher.service.reservation_sync",
    "capacity_launcher.service.reconciliation",
    "capacity_launcher.service.wait_backstop",
    "capacity_launcher.service.template_sweep",
)
LAUNCH = ("capacity_launcher.service.launch",)


def _imported_by(handler: str) -> list[str]:
    environment = {**os.environ, **ENVIRONMENT}
    environment.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / handler / "app.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("handler", "not_its_own"),
    [
        ("launcher", APPLY_PATH + LIFECYCLE),
        ("reservation_sync", APPLY_PATH + LAUNCH),
        ("instance_events", APPLY_PATH + LAUNCH + LIFECYCLE),
    ],
)
def test_a_handler_s_init_imports_its_own_use_case_only(handler, not_its_own) -> None:
    imported = _imported_by(handler)
    assert any(m.startswith("capacity_launcher.service") for m in imported)  # it did load
    assert [m for m in imported if m.startswith(not_its_own)] == []
