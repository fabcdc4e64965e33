"""Cold start: each handler's init and its first invocation, in a fresh interpreter over the
built layer (layers/core/Makefile, sam build's recipe, built for this machine: the layer's
dependencies and bytecode on PYTHONPATH, as Lambda mounts /opt/python), beside a floor handler in
the same run; and the layer's size.

What the Lambda runtime gives a function besides the layer is boto3 and what boto3 needs, nothing
else: the interpreter runs without its site-packages (`-S`), and boto3's closure is copied from
this environment into a folder of its own, after the layer on the path (the layer ships its own
pinned boto3 and botocore, which are the ones imported, as on Lambda). Each of our handlers is
also measured as a container restored from its SnapStart snapshot: its before-snapshot and
after-restore hooks run after init, then it is invoked. (This environment also holds awscrt and
pyOpenSSL, which botocore imports when it finds them: about 110 ms that Lambda never spends.)

A cold start is the init and the first invocation: a botocore client's first call loads its
operation model and resolves its endpoint rules, the first request builds what init left for
later, and Lambda bills both. So each child initialises the handler, then invokes it once with a
real event (a new launch request, the minute's schedule, an instance of ours terminated) against
the AWS of `cold_start_stage` (a moto server in the parent, over HTTP: the emulator's CPU is the
parent's, not the child's). It reports its CPU time and the clock when ready and again after the
invocation, then invokes the handler once more with another event of the same kind (what a warm
container spends: the first invocation's one-off work is the difference), and leaves without
tearing down (Lambda never tears a process down inside a cold
start; teardown of boto3's service models alone costs more than 100 ms).

The floor is what any handler on this stack pays: it imports the same packages (boto3,
Powertools, pydantic), builds the same three clients, pauses the collector during init as ours do
(`capacity_launcher.startup`), and on its first invocation makes one call with each client."""

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
from typing import Any

from benchmarks.cold_start_stage import Stage, served_cloud

ROOT = Path(__file__).resolve().parents[1]
RUNS = 11
HANDLERS = {
    "launcher": "functions/launcher/app.py",
    "reservation_sync": "functions/reservation_sync/app.py",
    "instance_events": "functions/instance_events/app.py",
}
MINIMAL = "minimal"
FLOOR = "floor"
MINIMAL_HANDLER = """
from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event, context):
    return {}
"""
# The card's packages imported, the same clients built, the collector paused during init as
# capacity_launcher.startup pauses it (what init made frozen after, as inside Lambda), the same
# Powertools decorators as the launcher's; the first invocation makes one call with each client.
FLOOR_HANDLER = """
import gc

gc.disable()

import os

import boto3
import pydantic
from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()
ec2 = boto3.client("ec2")
dynamodb = boto3.client("dynamodb")
events = boto3.client("events")
BaseModel = pydantic.BaseModel  # pydantic's import (its package import alone defers it)

gc.freeze()
gc.enable()


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event, context):
    dynamodb.get_item(
        TableName=os.environ["STATE_TABLE_NAME"],
        Key={"pk": {"S": "floor"}, "sk": {"S": "floor"}},
    )
    ec2.describe_availability_zones()
    events.put_events(
        Entries=[
            {
                "EventBusName": os.environ["EVENT_BUS_NAME"],
                "Source": "floor",
                "DetailType": "Floor",
                "Detail": "{}",
            }
        ]
    )
    return {}
"""
PROBE = """
import importlib.util, json, os, resource, sys, time

calls = []
inside = [0.0]  # CPU seconds spent inside AWS calls (botocore's, and the SDK's hooks)


def count_calls():
    # Count the AWS calls made from now on, and their CPU, if the handler imported botocore.
    clients = sys.modules.get("botocore.client")
    if clients is None:
        return
    make_api_call = clients.BaseClient._make_api_call

    def counted(client, operation, params):
        calls.append(operation)
        started = cpu()
        try:
            return make_api_call(client, operation, params)
        finally:
            inside[0] += cpu() - started

    clients.BaseClient._make_api_call = counted


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Context:
    function_name = "cold-start"
    function_version = "$LATEST"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cold-start"
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/cold-start"
    log_stream_name = "cold-start"
    identity = None
    client_context = None

    def get_remaining_time_in_millis(self):
        return 60_000


started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
if sys.argv[4] == "snapstart":
    # Published with SnapStart: init and priming ran before the snapshot; a restored container
    # runs its after-restore hooks, then its first invocation.
    module.BEFORE_SNAPSHOT()
    module.AFTER_RESTORE()
imports = time.perf_counter() - started
ready, ready_cpu = time.monotonic(), cpu()
count_calls()
result = module.handler(json.loads(sys.argv[2]), Context())
done, done_cpu, first_calls, first_inside = time.monotonic(), cpu(), list(calls), inside[0]
again = module.handler(json.loads(sys.argv[3]), Context())  # warm: what is not one-off
warm_cpu, warm_calls = cpu() - done_cpu, len(calls) - len(first_calls)
print(json.dumps({"imports": imports, "ready": ready, "ready_cpu": ready_cpu, "done": done,
                  "done_cpu": done_cpu, "warm_cpu": warm_cpu, "result": result,
                  "again": again, "first_calls": len(first_calls),
                  "first_operations": len(set(first_calls)), "warm_calls": warm_calls,
                  "first_calls_cpu": first_inside},
                 default=str), flush=True)
os._exit(0)
"""
# For the import steps, which call no AWS.
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
}
# Every child, whatever its function's variables.
RUNTIME_ENVIRONMENT = {
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
RECIPE = ROOT / "layers" / "core" / "Makefile"
HOST_PLATFORM = "manylinux2014_x86_64"
LAYER_LIMIT_BYTES = 30 * 1024 * 1024


@dataclass(frozen=True)
class ColdStart:
    """Medians over `runs` fresh processes of one handler."""

    handler: str
    runs: int
    # The handler module's import and initialisation, timed inside the process.
    imports_seconds: float
    # The whole process until the handler is ready, by the parent's clock, and its CPU time.
    ready_seconds: float
    ready_cpu_seconds: float
    # The same until its first invocation has returned: what the goal is judged on (CPU).
    first_seconds: float
    first_cpu_seconds: float
    # The first invocation's own CPU (the median of each process's share).
    invocation_cpu_seconds: float
    # A second invocation's CPU in the same process (another event of the same kind): what the
    # first one costs that is not one-off.
    warm_cpu_seconds: float
    # AWS calls (botocore API calls, its retries inside one not counted) of the first invocation,
    # the distinct operations among them, and the calls of the warm one.
    first_calls: int = 0
    first_operations: int = 0
    warm_calls: int = 0
    # Of the first invocation's CPU, what its AWS calls spent inside botocore (serializing,
    # signing, sending, parsing; an operation's first call also loads its model).
    first_calls_cpu_seconds: float = 0.0
    # Measured as a container restored from a SnapStart snapshot: init and priming (the
    # function's before-snapshot hook) done, its after-restore hook run, then invoked.
    snapstart: bool = False


@dataclass(frozen=True)
class _Handler:
    name: str
    path: Path
    snapstart: bool = False


@dataclass(frozen=True)
class _Sample:
    imports: float
    ready: float
    ready_cpu: float
    first: float
    first_cpu: float
    warm_cpu: float
    first_calls: int
    first_operations: int
    warm_calls: int
    first_calls_cpu: float

    @property
    def invocation_cpu(self) -> float:
        return self.first_cpu - self.ready_cpu


def _once(handler: _Handler, stage: Stage, paths: str) -> _Sample:
    """One fresh interpreter: init, then the first invocation. `time.monotonic` is one clock
    for parent and child (CLOCK_MONOTONIC)."""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        **stage.environment(handler.name),
        **RUNTIME_ENVIRONMENT,
        "PYTHONPATH": paths,
    }
    events = [json.dumps(stage.event(handler.name)) for _ in range(2)]
    started = time.monotonic()
    done = subprocess.run(
        [*INTERPRETER, "-c", PROBE, str(handler.path), *events, _mode(handler)],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    stage.check(handler.name, found["result"])
    stage.check(handler.name, found["again"])
    return _Sample(
        imports=float(found["imports"]),
        ready=float(found["ready"]) - started,
        ready_cpu=float(found["ready_cpu"]),
        first=float(found["done"]) - started,
        first_cpu=float(found["done_cpu"]),
        warm_cpu=float(found["warm_cpu"]),
        first_calls=int(found["first_calls"]),
        first_operations=int(found["first_operations"]),
        warm_calls=int(found["warm_calls"]),
        first_calls_cpu=float(found["first_calls_cpu"]),
    )


def _mode(handler: _Handler) -> str:
    return "snapstart" if handler.snapstart else "cold"


def _median(samples: list[_Sample], name: str) -> float:
    return statistics.median(float(getattr(s, name)) for s in samples)


def _measure(handlers: list[_Handler], stage: Stage, paths: str) -> list[ColdStart]:
    """Round-robin: every round starts each handler once, so a shared machine's load, which
    changes by the minute, weighs on the floor and ours alike."""
    for handler in handlers:  # first run: the files are in the page cache, as on a warm host
        _once(handler, stage, paths)
    samples: dict[_Handler, list[_Sample]] = {h: [] for h in handlers}
    for _ in range(RUNS):
        for handler in handlers:
            samples[handler].append(_once(handler, stage, paths))
    return [
        ColdStart(
            h.name,
            RUNS,
            imports_seconds=_median(samples[h], "imports"),
            ready_seconds=_median(samples[h], "ready"),
            ready_cpu_seconds=_median(samples[h], "ready_cpu"),
            first_seconds=_median(samples[h], "first"),
            first_cpu_seconds=_median(samples[h], "first_cpu"),
            invocation_cpu_seconds=_median(samples[h], "invocation_cpu"),
            warm_cpu_seconds=_median(samples[h], "warm_cpu"),
            first_calls=round(_median(samples[h], "first_calls")),
            first_operations=round(_median(samples[h], "first_operations")),
            warm_calls=round(_median(samples[h], "warm_calls")),
            first_calls_cpu_seconds=_median(samples[h], "first_calls_cpu"),
            snapstart=h.snapstart,
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
        "import capacity_launcher.domain.apis.config, capacity_launcher.domain.launch_request, "
        "capacity_launcher.domain.records.status"
    ),
    "the rest of the service (launch path)": (
        "import capacity_launcher.service.wiring, capacity_launcher.service.launch"
    ),
}
# What the floor does not import.
OURS_ONLY_STEPS = (
    "Powertools idempotency",
    "pydantic's first model",
    "settings",
    "the domain's pydantic models",
    "the rest of the service (launch path)",
)
# Each step's CPU; and, once their modules are imported, the CPU of making the service's own
# classes: a dataclass compiles its methods, a pydantic model builds its validator.
STEP_PROBE = """
import gc, json, resource, sys
gc.disable()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
OURS = "capacity_launcher"
made = {"dataclasses": [0, 0.0], "pydantic models": [0, 0.0]}
def tallied(kind, make, module_of):
    def run(*args, **kwargs):
        if not module_of(args).startswith(OURS):
            return make(*args, **kwargs)
        before = cpu()
        try:
            return make(*args, **kwargs)
        finally:
            made[kind][0] += 1
            made[kind][1] += cpu() - before
    return run
def hook():
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses and not hasattr(dataclasses, "_tallied"):
        dataclasses._tallied = True
        dataclasses._process_class = tallied(
            "dataclasses", dataclasses._process_class, lambda a: a[0].__module__)
    models = sys.modules.get("pydantic._internal._model_construction")
    if models and not hasattr(models, "_tallied"):
        models._tallied = True
        meta = models.ModelMetaclass
        meta.__new__ = tallied(
            "pydantic models", meta.__new__, lambda a: a[3].get("__module__", ""))
spent = {}
for step, code in json.loads(sys.argv[1]).items():
    before = cpu()
    exec(code, {})
    spent[step] = cpu() - before
    hook()
print(json.dumps({"steps": spent, "made": made}))
"""
STEP_RUNS = 5


@dataclass(frozen=True)
class ImportSteps:
    """Median CPU seconds of each import step, and of making the service's own classes."""

    steps: dict[str, float]
    # kind ("dataclasses", "pydantic models") -> (how many, median CPU seconds making them)
    classes: dict[str, tuple[int, float]]


def import_steps() -> ImportSteps:
    """The import steps in fresh interpreters over the built layer."""
    with tempfile.TemporaryDirectory() as folder:
        build_layer(Path(folder) / "layer", HOST_PLATFORM)
        build_runtime(Path(folder) / "runtime")
        environment = {
            "PATH": os.environ.get("PATH", ""),
            **ENVIRONMENT,
            **RUNTIME_ENVIRONMENT,
            "PYTHONPATH": _paths(Path(folder)),
        }
        runs: dict[str, list[float]] = {step: [] for step in STEPS}
        made: dict[str, list[tuple[int, float]]] = {}
        for _ in range(STEP_RUNS):
            done = subprocess.run(
                [*INTERPRETER, "-c", STEP_PROBE, json.dumps(STEPS)],
                env=environment,
                check=True,
                capture_output=True,
                text=True,
            )
            found = json.loads(done.stdout.strip().splitlines()[-1])
            for step, seconds in found["steps"].items():
                runs[step].append(float(seconds))
            for kind, (count, seconds) in found["made"].items():
                made.setdefault(kind, []).append((int(count), float(seconds)))
    return ImportSteps(
        {step: statistics.median(values) for step, values in runs.items()},
        {
            kind: (max(n for n, _ in values), statistics.median(s for _, s in values))
            for kind, values in made.items()
        },
    )


def _paths(folder: Path) -> str:
    """The built layer's `python/` and the runtime's boto3, as Lambda's PYTHONPATH has them."""
    return f"{folder / 'layer' / 'python'}{os.pathsep}{folder / 'runtime'}"


def handlers() -> tuple[list[ColdStart], list[ColdStart]]:
    """The baselines' cold starts (minimal, then the floor) and each of ours, all over the built
    layer, against one served cloud."""
    with tempfile.TemporaryDirectory() as folder:
        build_layer(Path(folder) / "layer", HOST_PLATFORM)
        build_runtime(Path(folder) / "runtime")
        baselines = []
        for name, source in ((MINIMAL, MINIMAL_HANDLER), (FLOOR, FLOOR_HANDLER)):
            app = Path(folder) / name / "app.py"
            app.parent.mkdir()
            app.write_text(textwrap.dedent(source))
            baselines.append(_Handler(name, app))
        ours = [
            _Handler(name, ROOT / path) for name, path in HANDLERS.items() if (ROOT / path).exists()
        ]
        # Each of ours again, as a container restored from its SnapStart snapshot.
        ours += [_Handler(h.name, h.path, snapstart=True) for h in ours]
        # Two invocations per process, one process per round and one to warm the page cache,
        # for the launcher cold and restored.
        with served_cloud(spare_instances=4 * (RUNS + 1)) as stage:
            measured = _measure([*baselines, *ours], stage, _paths(Path(folder)))
            unfulfilled = stage.unfulfilled()
        if unfulfilled:
            raise RuntimeError(f"launch requests not fulfilled: {unfulfilled}")
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
