"""A handler module initialises with the garbage collector paused; only inside Lambda is what
init made frozen out of later collections (docs/BENCHMARKS.md, "Cold start")."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from capacity_launcher.startup import LAMBDA_RUNTIME, Host, hosted_on, lambda_init, system_clock

ROOT = Path(__file__).resolve().parents[2]


def test_the_collector_is_paused_during_init_and_resumed_after(monkeypatch):
    monkeypatch.delenv(LAMBDA_RUNTIME, raising=False)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with lambda_init():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # outside Lambda, nothing is frozen


def test_an_init_that_fails_resumes_the_collector_and_freezes_nothing(monkeypatch):
    monkeypatch.setenv(LAMBDA_RUNTIME, "127.0.0.1:9001")
    frozen = gc.get_freeze_count()
    with pytest.raises(RuntimeError), lambda_init():
        raise RuntimeError("a client could not be built")
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_a_collector_disabled_before_init_stays_disabled(monkeypatch):
    monkeypatch.delenv(LAMBDA_RUNTIME, raising=False)
    gc.disable()
    try:
        with lambda_init():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# In a process of its own: freezing is for good, and would reach the rest of the tests.
PROBE = textwrap.dedent(
    """
    import gc, json, os, sys
    from capacity_launcher.startup import lambda_init
    before = gc.get_freeze_count()
    with lambda_init():
        made = [[i] for i in range(1000)]
    print(json.dumps({"before": before, "after": gc.get_freeze_count(),
                      "enabled": gc.isenabled()}))
    """
)


@pytest.mark.parametrize(("inside_lambda", "frozen"), [(True, True), (False, False)])
def test_inside_lambda_what_init_made_is_frozen(inside_lambda, frozen):
    environment = {k: v for k, v in os.environ.items() if k not in (LAMBDA_RUNTIME, "PYTHONPATH")}
    environment["PYTHONPATH"] = str(ROOT / "layers" / "core")
    if inside_lambda:
        environment[LAMBDA_RUNTIME] = "127.0.0.1:9001"
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    seen = json.loads(done.stdout)
    assert seen["enabled"]
    assert (seen["after"] > seen["before"] + 1000) is frozen


def test_a_handler_init_builds_on_the_systems_clock_unless_a_local_runtime_hosts_it():
    def emulated() -> datetime:
        return datetime(2030, 1, 1, tzinfo=UTC)

    waits: list[float] = []
    with lambda_init() as host:
        assert host.clock is system_clock and host.pause is time.sleep
    with hosted_on(Host(clock=emulated, pause=waits.append)), lambda_init() as host:
        assert host.clock() == datetime(2030, 1, 1, tzinfo=UTC)
        host.pause(3)
    assert waits == [3]
    with lambda_init() as host:  # the hosting ended with its context
        assert host.clock is system_clock
