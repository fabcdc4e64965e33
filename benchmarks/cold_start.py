"""Cold start: importing and initialising each handler in a fresh interpreter over the built layer
(layers/core/Makefile, sam build's recipe, built for this machine: the layer's dependencies and
bytecode on PYTHONPATH, as Lambda mounts /opt/python), beside baseline handlers; and the layer's
size.

What the Lambda runtime gives a function besides the layer is boto3 and what boto3 needs, nothing
else: the interpreter runs without its site-packages (`-S`), and boto3's closure is copied from
this environment into a folder of its own. (This environment also holds awscrt and pyOpenSSL,
which botocore imports when it finds them: about 110 ms that Lambda never spends, which made
every baseline slower and every ratio kinder.) A cold start ends when the handler is ready: the
child reports its CPU time and the clock then, and leaves without tearing down (Lambda never
tears a process down inside a cold start; teardown of boto3's service models alone costs more
than 100 ms)."""

from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from importlib import metadata
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
# The same, initialising as ours do (capacity_launcher.startup): the collector paused during
# init, what init made frozen after. Not a goal's baseline: it shows what that alone is worth.
BOTO3_PAUSED_HANDLER = (
    """
import gc

gc.disable()
"""
    + BOTO3_HANDLER
    + """
gc.freeze()
gc.enable()
"""
)
PROBE = """
import importlib.util, json, os, resource, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
{initialise}
imports = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"imports": imports, "ready": time.monotonic(),
                  "cpu": usage.ru_utime + usage.ru_stime}}), flush=True)
os._exit(0)
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
    # Set by the Lambda runtime in every container; capacity_launcher.startup reads it.
    "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
}
# Without site-packages: only the layer and the runtime's boto3 are importable.
INTERPRETER = (sys.executable, "-S")
RUNTIME_DISTRIBUTION = "boto3"
BOTO3_PAUSED = "minimal+boto3, collector paused"
RECIPE = ROOT / "layers" / "core" / "Makefile"
HOST_PLATFORM = "manylinux2014_x86_64"
LAYER_LIMIT_BYTES = 30 * 1024 * 1024


@dataclass(frozen=True)
class ColdStart:
    handler: str
    median_seconds: float
    runs: int
    # The whole process until the handler is ready, as the parent's clock sees it: interpreter
    # start-up, imports, initialisation.
    process_seconds: float = 0.0
    # The process's CPU time (user + system) until ready: what a shared machine's load disturbs
    # least.
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
    """(imports and initialisation, the process until ready, its CPU until ready) of one fresh
    interpreter. `time.monotonic` is one clock for parent and child (CLOCK_MONOTONIC)."""
    probe = PROBE.format(initialise=handler.initialise)
    started = time.monotonic()
    done = subprocess.run(
        [*INTERPRETER, "-c", probe, str(handler.path)],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    ready = json.loads(done.stdout.strip().splitlines()[-1])
    return float(ready["imports"]), float(ready["ready"]) - started, float(ready["cpu"])


def _environment(layer: Path, runtime: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        **ENVIRONMENT,
        "PYTHONPATH": f"{layer}{os.pathsep}{runtime}",
    }


def _measure(handlers: list[_Handler], layer: Path, runtime: Path) -> list[ColdStart]:
    """Round-robin: every round starts each handler once, so a shared machine's load, which
    changes by the minute, weighs on the baselines and ours alike."""
    environment = _environment(layer, runtime)
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


def _closure(name: str) -> set[str]:
    """`name` and the distributions it requires (no extras), recursively."""
    wanted, seen = [name], set()
    while wanted:
        current = wanted.pop()
        key = current.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for requirement in metadata.requires(current) or []:
            if "extra ==" in requirement:
                continue
            wanted.append(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0])
    return seen


def build_runtime(folder: Path) -> None:
    """boto3 and its closure from this environment into `folder`, compiled: what the Lambda
    runtime provides besides the layer."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in _closure(RUNTIME_DISTRIBUTION):
        for file in metadata.distribution(name).files or []:
            if file.parts[0].endswith((".dist-info", "..")) or file.suffix == ".pyc":
                continue
            source = Path(str(file.locate()))
            target = folder / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    compileall.compile_dir(folder, quiet=1)


# Where the launcher's import CPU goes, step by step (each step only what earlier ones left), with
# the collector paused as the handlers' init has it.
STEPS = {
    "boto3": "import boto3",
    "Powertools Logger and Metrics": "import aws_lambda_powertools, aws_lambda_powertools.metrics",
    "Powertools idempotency": "import aws_lambda_powertools.utilities.idempotency",
    "pydantic's import": "import pydantic.main",
    "pydantic's first model": (
        "import pydantic\nclass First(pydantic.BaseModel):\n    field: int = 0"
    ),
    "settings": "import capacity_launcher.settings",
    "the domain's pydantic models": (
        "import capacity_launcher.domain.config, capacity_launcher.domain.launch_request, "
        "capacity_launcher.domain.status"
    ),
    "the rest of the service (launch path)": (
        "import capacity_launcher.service.wiring, capacity_launcher.service.launch"
    ),
}
# What pydantic costs before any model of ours.
PYDANTIC_STEPS = ("pydantic's import", "pydantic's first model")
STEP_PROBE = """
import gc, json, resource, sys
gc.disable()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
spent = {}
for step, code in json.loads(sys.argv[1]).items():
    before = cpu()
    exec(code, {})
    spent[step] = cpu() - before
print(json.dumps(spent))
"""
STEP_RUNS = 5


def import_steps() -> dict[str, float]:
    """Median CPU seconds of each import step in a fresh interpreter over the built layer."""
    with tempfile.TemporaryDirectory() as folder:
        build_layer(Path(folder) / "layer", HOST_PLATFORM)
        build_runtime(Path(folder) / "runtime")
        environment = _environment(Path(folder) / "layer" / "python", Path(folder) / "runtime")
        runs: dict[str, list[float]] = {step: [] for step in STEPS}
        for _ in range(STEP_RUNS):
            done = subprocess.run(
                [*INTERPRETER, "-c", STEP_PROBE, json.dumps(STEPS)],
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
        build_runtime(Path(folder) / "runtime")
        baselines = []
        for name, source in (
            ("minimal", MINIMAL_HANDLER),
            ("minimal+boto3", BOTO3_HANDLER),
            (BOTO3_PAUSED, BOTO3_PAUSED_HANDLER),
        ):
            app = Path(folder) / name / "app.py"
            app.parent.mkdir()
            app.write_text(textwrap.dedent(source))
            baselines.append(_Handler(name, app, ""))
        ours = [
            _Handler(Path(path).parent.name, ROOT / path, initialise)
            for path, initialise in HANDLERS.values()
            if (ROOT / path).exists()
        ]
        measured = _measure(
            [*baselines, *ours], Path(folder) / "layer" / "python", Path(folder) / "runtime"
        )
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
            "layers/core/Makefile (sam build's recipe) for manylinux2014_aarch64 / CPython 3.13, "
            "bytecode included",
        )
