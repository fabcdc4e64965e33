"""The IAM call audit as a pytest plugin: every AWS call a template function makes in the
integration, e2e and simulation suites is evaluated against its role policy in the transformed
template at the end of the session (tests/infrastructure/iam_audit.py), and a test any of whose
calls goes over a maximum of AWS's API fails (tests/infrastructure/parameter_limits.py).

tests/conftest.py registers it only when the run may collect one of those suites: the audit
imports the SAM translator and botocore's models (about a second), which no unit test needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.iam_audit import CallRecorder, Policies, audit
from tests.infrastructure.policy_checks import transform
from tests.support.template import load_template

AUDITED_LAYERS = ("integration", "e2e", "simulation")
_CALLS = CallRecorder(check_limits=True)

# Under pytest-xdist each worker records and audits its own tests' calls (a test runs wholly in one
# worker, and each call is judged by what was known when it was made); the controller adds up
# what its workers found, reports it and fails the session on any denial.
_WORKER_AUDIT = "iam_call_audit"
_WORKERS_AUDITS: list[dict[str, Any]] = []


@pytest.fixture(scope="session", autouse=True)
def _record_aws_calls() -> Iterator[None]:
    with _CALLS.recording():
        yield


@pytest.fixture(autouse=True)
def _attribute_calls_to_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Also fails a test any of whose calls (its own, its functions', its CLI's) goes over a
    maximum of AWS's API (tests/infrastructure/parameter_limits.py): AWS would refuse it."""
    _CALLS.enabled = any(layer in Path(str(request.node.fspath)).parts for layer in AUDITED_LAYERS)
    _CALLS.test = request.node.nodeid
    before = len(_CALLS.over_limits)
    yield
    over = [found for test, found in _CALLS.over_limits[before:] if test == request.node.nodeid]
    if over and request.node.get_closest_marker("beyond_aws_limits") is None:
        listed = "\n  ".join(over[:20])
        pytest.fail(f"calls AWS would refuse (over its API's maximums):\n  {listed}")


def _audit_calls_made_here() -> dict[str, Any]:
    if not _CALLS.calls:
        return {"calls": 0, "denied": []}
    sam = load_template()
    denials = audit(_CALLS.calls, Policies(transform(sam), sam))
    return {"calls": len(_CALLS.calls), "denied": [str(denial) for denial in denials]}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: a worker finished; keep what its audit found."""
    found = getattr(node, "workeroutput", {}).get(_WORKER_AUDIT)
    if found is not None:
        _WORKERS_AUDITS.append(found)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    here = _audit_calls_made_here()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports for all
        workeroutput[_WORKER_AUDIT] = here
        return
    calls = here["calls"] + sum(found["calls"] for found in _WORKERS_AUDITS)
    denied = [*here["denied"], *(d for found in _WORKERS_AUDITS for d in found["denied"])]
    if not calls:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"IAM call audit: {calls} calls by the functions, {len(denied)} denied")
        for denial in denied[:50]:
            reporter.write_line(f"  DENIED {denial}", red=True)
    if denied:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
