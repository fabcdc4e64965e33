"""A Lambda container's init, without the cyclic garbage collector.

Importing boto3, Powertools, pydantic and the service, and building the clients, allocates about a
million objects and frees almost none of them, yet the collector walks them again and again as
they pile up: in the launcher that is about a sixth of init's CPU (docs/BENCHMARKS.md, "Cold
start"). So the collector is paused while the handler module initialises. Inside Lambda, where
that module lives as long as its process, what init made is then frozen (`gc.freeze`): no later
collection walks it again, and the few hundred cycles init dropped stay allocated. Anywhere else
(the local cloud, the tests, which load handlers many times in one process) nothing is frozen and
the collector simply resumes.

The handler module builds its container's adapters in that init, on the `Host` it is given: the
system's clock and `time.sleep` in Lambda; a local runtime that hosts the function (the local
cloud, the simulation) hands its own clock and waits in with `hosted_on`.

With Lambda SnapStart (template.yaml, `SnapStart`), init runs once per published version and new
containers resume from a snapshot of it. `snapshot_hooks` registers, with the managed runtime's
`snapshot_restore_py`, what runs before the snapshot (priming: what a first invocation would
otherwise build, then frozen like the rest of init) and after each restore (what must differ
between containers resumed from one snapshot). Without that library (anywhere but Lambda's
managed runtime) nothing is registered: the hooks are returned for whoever hosts the function.
"""

from __future__ import annotations

import gc
import importlib
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Set by the Lambda runtime (and `sam local invoke`'s emulator, which runs it) in every container.
LAMBDA_RUNTIME = "AWS_LAMBDA_RUNTIME_API"


def system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Host:
    """What a container tells the time by (`clock`) and waits with (`pause`)."""

    clock: Callable[[], datetime] = system_clock
    pause: Callable[[float], None] = time.sleep


# Lambda's: the system's clock and sleep.
SYSTEM = Host()
_HOST: ContextVar[Host | None] = ContextVar("capacity_launcher_host", default=None)


@contextmanager
def hosted_on(host: Host) -> Iterator[None]:
    """Handler modules initialised in this context (this thread) build on `host`."""
    token = _HOST.set(host)
    try:
        yield
    finally:
        _HOST.reset(token)


@contextmanager
def lambda_init() -> Iterator[Host]:
    """Run a handler module's imports and client building with the collector paused; yields the
    host the container builds its adapters on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield _HOST.get() or SYSTEM
        if os.environ.get(LAMBDA_RUNTIME):
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()


# The managed Python runtime's SnapStart hooks library (3.12+); absent anywhere else.
RUNTIME_HOOKS = "snapshot_restore_py"
Hook = Callable[[], None]


def _runtime_hooks() -> Any:
    try:
        return importlib.import_module(RUNTIME_HOOKS)
    except ImportError:
        return None


def snapshot_hooks(prime: Callable[[], object]) -> tuple[Hook, Hook]:
    """Register the container's SnapStart hooks with the runtime, when it has them; returns both
    (before the snapshot, after a restore).

    Before the snapshot: `prime` (what a first invocation would otherwise build: every botocore
    operation model the functions use), then, inside Lambda, freeze what it made as init's own.
    After a restore: reseed `random` from the system's entropy. Every container resumed from one
    snapshot would otherwise draw the same numbers: the same retry jitter (ours and botocore's)
    after the same throttling, in lockstep, which is what jitter is for. Nothing else init keeps
    is unique to a container: the clients hold no connection until a call, credentials are
    botocore's to refresh, caches start empty, the clock is read when asked."""

    def before_snapshot() -> None:
        prime()
        if os.environ.get(LAMBDA_RUNTIME):
            gc.freeze()

    def after_restore() -> None:
        random.seed()

    hooks = _runtime_hooks()
    if hooks is not None:
        hooks.register_before_snapshot(before_snapshot)
        hooks.register_after_restore(after_restore)
    return before_snapshot, after_restore
