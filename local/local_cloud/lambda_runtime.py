"""Run a template's function in this process, as `sam local invoke` would run it in a container.

The handler, code folder, layers, timeout and memory come from template.yaml; the environment is
the function's, resolved against a deployment. Loading a function is a cold start: the layer's
caches are emptied and the handler module executed afresh, so it reads the environment it is given
and builds its container on the host it is given (the clock it tells the time by and how it waits;
the system's unless the caller runs it on an emulator's).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from capacity_launcher.startup import Host, hosted_on
from local_cloud import function_output
from local_cloud.template import function_spec, load_template

# moto has no X-Ray; the handlers must not try to send traces (the local cloud's functions and
# `invoke`'s, which reads it here, without loading moto).
LOCAL_FUNCTION_ENVIRONMENT = {"POWERTOOLS_TRACE_DISABLED": "true"}
# Loading sets process-wide state (os.environ, sys.path, module caches): one load at a time.
_LOAD_LOCK = threading.Lock()
LAYER_PACKAGE_PREFIX = "capacity_launcher"


@dataclass(frozen=True)
class RunningFunction:
    """Which template function is running, with the environment it was given: the IAM call
    audit (tests/infrastructure/iam_audit.py) attributes each AWS call to it by this."""

    logical_id: str
    environment: Mapping[str, str]
    account_id: str


RUNNING_FUNCTION: ContextVar[RunningFunction | None] = ContextVar("running_function", default=None)


@contextmanager
def outside_functions() -> Iterator[None]:
    """Calls made here are someone else's (a test's competitor inside a hook), not a function's."""
    token = RUNNING_FUNCTION.set(None)
    try:
        yield
    finally:
        RUNNING_FUNCTION.reset(token)


@contextmanager
def running(logical_id: str, environment: Mapping[str, str], account_id: str) -> Iterator[None]:
    """Attribute the AWS calls made in this context to `logical_id` (and its role)."""
    token = RUNNING_FUNCTION.set(RunningFunction(logical_id, dict(environment), account_id))
    try:
        yield
    finally:
        RUNNING_FUNCTION.reset(token)


@dataclass
class LocalContext:
    """What Lambda hands a handler as `context`, with the deadline counted from the invocation."""

    function_name: str
    memory_limit_in_mb: int
    timeout_seconds: int
    region: str
    account_id: str
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/[{self.function_version}]{self.aws_request_id}"

    @property
    def identity(self) -> None:
        return None

    @property
    def client_context(self) -> None:
        return None

    def get_remaining_time_in_millis(self) -> int:
        elapsed = time.monotonic() - self.started
        return max(int((self.timeout_seconds - elapsed) * 1000), 0)


@dataclass(frozen=True)
class Invocation:
    """One run: what the handler returned (or the error it raised) and what it wrote."""

    function: str
    request_id: str
    result: Any
    error: dict[str, Any] | None
    logs: str
    duration_ms: float

    @property
    def failed(self) -> bool:
        return self.error is not None


class LocalFunction:
    """One function of the template, loaded with its environment and ready to invoke."""

    def __init__(
        self,
        name: str,
        environment: Mapping[str, str],
        *,
        template_path: str | os.PathLike[str] | None = None,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        host: Host | None = None,
    ) -> None:
        template = load_template(template_path)
        self.spec = function_spec(name, template)
        self.logical_id: str = self.spec["LogicalId"]
        self.environment = dict(environment)
        self.region = region
        self.account_id = account_id
        self._root = Path(template_path or _template_file()).resolve().parent
        self._layer_paths = [self._root / p for p in _layer_content_uris(template, self.spec)]
        self._lock = threading.Lock()  # one invocation at a time, as one container does
        self.host = host or Host()
        # The template's; the local cloud lowers it to a queue's shorter visibility timeout.
        self.timeout_seconds = int(self.spec["Timeout"])
        self._handler = self._load()

    @property
    def code_path(self) -> Path:
        return self._root / str(self.spec["CodeUri"])

    @property
    def function_name(self) -> str:
        return self.environment.get("AWS_LAMBDA_FUNCTION_NAME") or self.logical_id

    def _load(self) -> Any:
        module_name, _, attribute = str(self.spec["Handler"]).rpartition(".")
        source = self.code_path / (module_name.replace(".", "/") + ".py")
        if not source.is_file():
            raise FileNotFoundError(f"{self.logical_id}: handler file {source} does not exist")
        with _LOAD_LOCK:
            os.environ.update(self.environment)
            for path in (self.code_path, *self._layer_paths):
                if str(path) not in sys.path:
                    sys.path.insert(0, str(path))
            _empty_layer_caches()
            with hosted_on(self.host):
                module = _execute_fresh(f"_local_function_{self.logical_id}", source)
            function_output.adopt_new_handlers()
        return getattr(module, attribute)

    def invoke(self, event: Any) -> Invocation:
        context = LocalContext(
            function_name=self.function_name,
            memory_limit_in_mb=int(self.spec["MemorySize"]),
            timeout_seconds=self.timeout_seconds,
            region=self.region,
            account_id=self.account_id,
        )
        sink = io.StringIO()
        error = None
        result = None
        started = time.perf_counter()
        with (
            self._lock,
            function_output.captured_output(sink),
            running(self.logical_id, self.environment, self.account_id),
        ):
            try:
                # A copy, as the handler gets freshly deserialised JSON in Lambda.
                result = self._handler(json.loads(json.dumps(event)), context)
            except Exception as raised:
                error = {
                    "errorType": type(raised).__name__,
                    "errorMessage": str(raised),
                    "stackTrace": traceback.format_exception(raised),
                }
        return Invocation(
            function=self.logical_id,
            request_id=context.aws_request_id,
            result=result,
            error=error,
            logs=sink.getvalue(),
            duration_ms=(time.perf_counter() - started) * 1000,
        )


def _template_file() -> Path:
    from local_cloud.template import default_template_path

    return default_template_path()


def _layer_content_uris(template: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """Layers named by Ref to a LayerVersion in the template; published layer ARNs are skipped."""
    uris = []
    for layer in spec["Layers"]:
        if isinstance(layer, dict) and "Ref" in layer:
            resource = template["Resources"].get(layer["Ref"], {})
            content = resource.get("Properties", {}).get("ContentUri")
            if isinstance(content, str):
                uris.append(content)
    return uris


def _empty_layer_caches() -> None:
    """A new container: every functools cache in the layer's modules starts empty."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(LAYER_PACKAGE_PREFIX + ".") or module is None:
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()


def _execute_fresh(module_name: str, source: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
