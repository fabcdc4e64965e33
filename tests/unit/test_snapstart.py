"""Issue 35: SnapStart. Init runs once per published version; before the snapshot the container
primes what a first invocation would build (every operation model the layer calls), and after
each restore it reseeds what must differ between containers resumed from one snapshot."""

from __future__ import annotations

import importlib.util
import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.startup import LAMBDA_RUNTIME, RUNTIME_HOOKS, snapshot_hooks
from tests.infrastructure.test_least_privilege import _called_by_the_layer
from tests.unit.test_handler_imports import ENVIRONMENT

# What the least-privilege audit reads as called that no client of ours calls: actions AWS checks
# on our behalf, a transaction item's action, and the word "tag" read as Resource Groups' Tag.
NOT_CALLED = {"dynamodb:ConditionCheckItem", "resource-groups:Tag"}
ON_OUR_BEHALF = ("tag:", "iam:PassRole", "iam:TagInstanceProfile")
# Called through our client by a library, not named in the layer's source.
BY_A_LIBRARY = {"ssm:GetParameter"}  # Powertools' SSMProvider


def test_the_primed_operations_are_every_one_the_layer_calls() -> None:
    primed = {f"{service}:{op}" for service, ops in aws.OPERATIONS.items() for op in ops}
    called = {a for a in _called_by_the_layer() if not a.startswith(ON_OUR_BEHALF)}
    assert called - NOT_CALLED == primed - BY_A_LIBRARY


def test_priming_loads_each_operation_model_of_the_containers_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a container's fresh clients, whose operation models nothing has loaded yet (its
    # region set as Lambda sets it: not left to a test run before this one)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(aws, "_MADE", {})
    aws.client.cache_clear()
    try:
        ec2, dynamodb = aws.client("ec2"), aws.client("dynamodb")
        assert set(aws._MADE) == {"ec2", "dynamodb"}
        # When the snapshot is primed
        shapes = aws.prime_clients()
        # Then each operation the layer calls is loaded, with its shapes, in the client's model
        for made, service in ((ec2, "ec2"), (dynamodb, "dynamodb")):
            cached = made.meta.service_model._instance_cache  # botocore's instance_cache
            loaded = {key[1][0] for key in cached if key[0] == "operation_model"}
            assert loaded >= set(aws.OPERATIONS[service])
        assert shapes > 100
    finally:
        aws.client.cache_clear()


def _runtime_library(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The managed runtime's snapshot_restore_py, as far as registering goes."""
    registered: dict[str, list[Any]] = {"before": [], "after": []}
    library = types.ModuleType(RUNTIME_HOOKS)
    library.register_before_snapshot = registered["before"].append  # type: ignore[attr-defined]
    library.register_after_restore = registered["after"].append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, RUNTIME_HOOKS, library)
    return registered


def test_the_hooks_are_registered_with_the_runtime_when_it_has_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered = _runtime_library(monkeypatch)
    primed: list[bool] = []
    before, after = snapshot_hooks(lambda: primed.append(True))
    assert registered == {"before": [before], "after": [after]}
    # and the registered before-snapshot hook primes
    monkeypatch.delenv(LAMBDA_RUNTIME, raising=False)
    registered["before"][0]()
    assert primed == [True]


def test_without_the_runtimes_library_nothing_is_registered_and_the_hooks_still_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, RUNTIME_HOOKS, None)  # import fails
    primed: list[bool] = []
    before, after = snapshot_hooks(lambda: primed.append(True))
    monkeypatch.delenv(LAMBDA_RUNTIME, raising=False)
    before()
    after()
    assert primed == [True]


def test_containers_restored_from_one_snapshot_draw_different_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the generator's state as the snapshot holds it
    _, after_restore = snapshot_hooks(lambda: None)
    snapshot = random.getstate()
    drawn = []
    for _ in range(2):  # two containers resumed from it
        random.setstate(snapshot)
        after_restore()
        drawn.append([random.random() for _ in range(4)])
    # Then their jitter differs (without the hook both would draw the same)
    assert drawn[0] != drawn[1]


def test_each_function_registers_hooks_that_prime_its_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered = _runtime_library(monkeypatch)
    for variable, value in ENVIRONMENT.items():
        monkeypatch.setenv(variable, value)
    root = Path(__file__).resolve().parents[2]
    for name in ("launcher", "reservation_sync", "instance_events"):
        path = root / "functions" / name / "app.py"
        spec = importlib.util.spec_from_file_location(f"snapstart_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert registered["before"][-1] is module.BEFORE_SNAPSHOT
        assert registered["after"][-1] is module.AFTER_RESTORE
    assert len(registered["before"]) == len(registered["after"]) == 3
