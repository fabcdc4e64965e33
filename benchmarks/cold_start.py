"""Cold start: importing and initialising each handler in a fresh interpreter over the built layer
(layers/core/Makefile, sam build's recipe, built for this machine: the layer's dependencies and
bytecode on PYTHONPATH, as Lambda mounts /opt/python; boto3 from the environment, as the runtime
provides it), beside a minimal Powertools handler; and the layer's size."""

from __future__ import annotations

import json
import os
import resource
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
    "PYDANTIC_DISABLE_PLUGINS": "__all__",  # as template.yaml's Globals set it
    # /opt is read-only on Lambda: what the layer does not ship compiled is compiled every time.
    "PYTHONDONTWRITEBYTECODE": "1",
}
RECIPE = ROOT / "layers" / "core" / "Makefile"
HOST_PLATFORM = "manylinux2014_x86_64"
LAYER_LIMIT_BYTES = 30 * 1024 * 1024


@dataclass(frozen=True)
class ColdStart:
    handler: str
    median_seconds: float
    runs: int
    # The whole process, as the parent sees it: interpreter start-up, imports, initialisation.
    process_seconds: float = 0.0
    # The whole process's CPU time (user + system): what a shared machine's load disturbs least.
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class _Handler:
    name: str
    path: Path
    initialise: str


@dataclass
class _Runs:
    imports: list[float]
    process: list[float]
    cpu: list[float]


def _once(handler: _Handler, environment: dict[str, str]) -> tuple[float, float, float]:
    """(imports and initialisation, whole process, the process's CPU) of one fresh interpreter."""
    probe = PROBE.format(initialise=handler.initialise)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", probe, str(handler.path)],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    process = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(done.stdout.strip().splitlines()[-1]), process, cpu


def _measure(handlers: list[_Handler], layer: Path) -> list[ColdStart]:
    """Round-robin: every round starts each handler once, so a shared machine's load, which
    changes by the minute, weighs on the baselines and ours alike."""
    environment = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT, "PYTHONPATH": str(layer)}
    for handler in handlers:  # first run: the files are in the page cache, as on a warm host
        _once(handler, environment)
    runs = {h.name: _Runs([], [], []) for h in handlers}
    for _ in range(RUNS):
        for handler in handlers:
            imports, process, cpu = _once(handler, environment)
            runs[handler.name].imports.append(imports)
            runs[handler.name].process.append(process)
            runs[handler.name].cpu.append(cpu)
    return [
        ColdStart(
            h.name,
            statistics.median(runs[h.name].imports),
            RUNS,
            statistics.median(runs[h.name].process),
            statistics.median(runs[h.name].cpu),
        )
        for h in handlers
    ]


def build_layer(artifacts: Path, platform: str) -> None:
    """sam build's recipe for CoreLayer into `artifacts` (its `python/` is the layer)."""
    subprocess.run(
        [
            "make",
            "-s",
            "-f",
            str(RECIPE),
            "build-CoreLayer",
            f"ARTIFACTS_DIR={artifacts}",
            f"PYTHON={sys.executable}",
            f"PLATFORM={platform}",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


# Where the launcher's import CPU goes, step by step (each step only what earlier ones left).
STEPS = {
    "boto3": ["boto3"],
    "Powertools Logger and Metrics": ["aws_lambda_powertools", "aws_lambda_powertools.metrics"],
    "pydantic's core": ["pydantic.main"],
    "settings": ["capacity_launcher.settings"],
    "the domain's pydantic models": [
        "capacity_launcher.domain.config",
        "capacity_launcher.domain.launch_request",
        "capacity_launcher.domain.status",
    ],
    "the rest of the service (launch path)": [
        "capacity_launcher.service.wiring",
        "capacity_launcher.service.launch_batch",
        "capacity_launcher.service.launcher",
    ],
}
STEP_PROBE = """
import importlib, json, resource, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
spent = {}
for step, modules in json.loads(sys.argv[1]).items():
    before = cpu()
    for module in modules:
        importlib.import_module(module)
    spent[step] = cpu() - before
print(json.dumps(spent))
"""
STEP_RUNS = 5


def import_steps() -> dict[str, float]:
    """Median CPU seconds of each import step in a fresh interpreter over the built layer."""
    with tempfile.TemporaryDirectory() as folder:
        build_layer(Path(folder), HOST_PLATFORM)
        environment = {
            "PATH": os.environ.get("PATH", ""),
            **ENVIRONMENT,
            "PYTHONPATH": str(Path(folder) / "python"),
        }
        runs: dict[str, list[float]] = {step: [] for step in STEPS}
        for _ in range(STEP_RUNS):
            done = subprocess.run(
                [sys.executable, "-c", STEP_PROBE, json.dumps(STEPS)],
                env=environment,
                check=True,
                capture_output=True,
                text=True,
            )
            for step, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
                runs[step].append(float(seconds))
    return {step: statistics.median(values) for step, values in runs.items()}


def handlers() -> tuple[list[ColdStart], list[ColdStart]]:
    """The baselines' cold starts (minimal first), and each of ours, all over the built layer."""
    with tempfile.TemporaryDirectory() as folder:
        build_layer(Path(folder) / "layer", HOST_PLATFORM)
        baselines = []
        for name, source in (("minimal", MINIMAL_HANDLER), ("minimal+boto3", BOTO3_HANDLER)):
            app = Path(folder) / name / "app.py"
            app.parent.mkdir()
            app.write_text(textwrap.dedent(source))
            baselines.append(_Handler(name, app, ""))
        ours = [
            _Handler(Path(path).parent.name, ROOT / path, initialise)
            for path, initialise in HANDLERS.values()
            if (ROOT / path).exists()
        ]
        measured = _measure([*baselines, *ours], Path(folder) / "layer" / "python")
    return measured[: len(baselines)], measured[len(baselines) :]


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
        try:
            build_layer(Path(folder), "manylinux2014_aarch64")
        except subprocess.CalledProcessError as error:
            return LayerSize(None, f"the layer recipe failed: {error.stderr[-200:]!r}")
        return LayerSize(
            _tree_bytes(Path(folder) / "python"),
            "layers/core/Makefile (sam build's recipe) for manylinux2014_aarch64 / CPython 3.11, "
            "bytecode included",
        )
