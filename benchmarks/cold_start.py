"""Cold start: importing and initialising each handler in a fresh interpreter (the layer on
PYTHONPATH, as Lambda mounts it), beside a minimal Powertools handler; and the layer's size."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 11
# What each handler builds on its first invocation (the launcher builds it at import).
HANDLERS = {
    "launcher": ("functions/launcher/app.py", ""),
    "reservation_sync": ("functions/reservation_sync/app.py", "module.reservation_sync()"),
    "instance_events": ("functions/instance_events/app.py", "module.instance_events()"),
}
MINIMAL_HANDLER = """
from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event, context):
    return {}
"""
# The same, plus the boto3 clients a handler needs: how much of a cold start is boto3's.
BOTO3_HANDLER = (
    MINIMAL_HANDLER
    + """
import boto3

ec2 = boto3.client("ec2")
dynamodb = boto3.client("dynamodb")
events = boto3.client("events")
"""
)
PROBE = """
import importlib.util, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
{initialise}
print(time.perf_counter() - started)
"""
ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "STATE_TABLE_NAME": "state",
    "UNAVAILABLE_OFFERINGS_TABLE_NAME": "unavailable-offerings",
    "IDEMPOTENCY_TABLE_NAME": "idempotency",
    "EVENT_BUS_NAME": "launch-bus",
    "POWERTOOLS_SERVICE_NAME": "capacity-launcher",
    "POWERTOOLS_METRICS_NAMESPACE": "CapacityLauncher",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "PYTHONPATH": str(ROOT / "layers" / "core"),
    "PYTHONDONTWRITEBYTECODE": "",
}
LAYER_LIMIT_BYTES = 30 * 1024 * 1024


@dataclass(frozen=True)
class ColdStart:
    handler: str
    median_seconds: float
    runs: int
    # The whole process, as the parent sees it: interpreter start-up, imports, initialisation.
    process_seconds: float = 0.0


def _median_start(path: Path, initialise: str) -> ColdStart:
    environment = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT}
    probe = PROBE.format(initialise=initialise)
    subprocess.run(
        [sys.executable, "-c", probe, str(path)], env=environment, check=True, capture_output=True
    )  # first run compiles bytecode, as a deployed layer has it
    times = []
    processes = []
    for _ in range(RUNS):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path)],
            env=environment,
            check=True,
            capture_output=True,
            text=True,
        )
        processes.append(time.perf_counter() - started)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return ColdStart(path.parent.name, statistics.median(times), RUNS, statistics.median(processes))


def handlers() -> tuple[list[ColdStart], list[ColdStart]]:
    """The baselines' cold starts (minimal first), and each of ours."""
    baselines = []
    with tempfile.TemporaryDirectory() as folder:
        for name, source in (("minimal", MINIMAL_HANDLER), ("minimal+boto3", BOTO3_HANDLER)):
            app = Path(folder) / name / "app.py"
            app.parent.mkdir()
            app.write_text(textwrap.dedent(source))
            baselines.append(_median_start(app, ""))
    ours = [
        _median_start(ROOT / path, initialise)
        for path, initialise in HANDLERS.values()
        if (ROOT / path).exists()
    ]
    return baselines, ours


@dataclass(frozen=True)
class LayerSize:
    bytes: int | None
    how: str


def _tree_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def layer_size() -> LayerSize:
    """`sam build`'s CoreLayer when present; else the layer's requirements installed for arm64."""
    built = ROOT / ".aws-sam" / "build" / "CoreLayer" / "python"
    wanted = (ROOT / "layers" / "core" / "requirements.txt").read_text()
    if (built / "requirements.txt").exists() and (built / "requirements.txt").read_text() == wanted:
        return LayerSize(_tree_bytes(built), "`.aws-sam/build/CoreLayer` from `sam build`")
    # A build from older requirements would measure a layer nobody deploys any more.
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "python"
        install = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--target",
            str(target),
            "--platform",
            "manylinux2014_aarch64",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "-r",
            str(ROOT / "layers" / "core" / "requirements.txt"),
        ]
        done = subprocess.run(install, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return LayerSize(None, f"pip could not install the requirements: {done.stderr[-200:]}")
        shutil.copytree(
            ROOT / "layers" / "core" / "capacity_launcher",
            target / "capacity_launcher",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        return LayerSize(
            _tree_bytes(target),
            "layers/core/requirements.txt installed for manylinux2014_aarch64 / CPython 3.11 "
            "(pip --platform) plus the capacity_launcher package",
        )
