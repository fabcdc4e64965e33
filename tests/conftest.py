"""Marks every test by the folder it lives in, so `-m unit|integration|e2e` selects by layer, and
the long ones `slow` (`-m "not slow"` leaves them out; `make test` runs them all)."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.iam_audit import CallRecorder, Policies, audit
from tests.infrastructure.policy_checks import transform
from tests.support.process_caches import shared_botocore_loader, use_the_images_tests_use
from tests.support.template import load_template

_LAYERS = ("unit", "integration", "e2e")
# The local cloud end to end, and the whole-system simulation: a minute or more each.
_SLOW = ("e2e", "simulation")
# The e2e tests share one local cloud (tests/e2e/conftest.py): one worker runs them all.
_SHARED_CLOUD = "e2e_cloud"

# Before any test module imports moto: the images the suites use, not moto's 1,301 per backend.
use_the_images_tests_use()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallel = config.pluginmanager.hasplugin("xdist")
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))
        if any(folder in parts for folder in _SLOW):
            item.add_marker(pytest.mark.slow)
        if parallel and _SHARED_CLOUD in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(_SHARED_CLOUD))
    if hasattr(config, "workerinput"):
        # A pytest-xdist worker (`make test`): the slow tests are handed out first, so that no
        # worker is left running one of them alone at the end. Each worker sorts alike.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session", autouse=True)
def _one_botocore_loader() -> Iterator[None]:
    """Each test's cloud starts new sessions; they share one loader (support/process_caches)."""
    with shared_botocore_loader():
        yield


# ---------------------------------------------------------------- IAM, proven on the real calls
# Every AWS call a template function makes in these suites is evaluated against its role policy
# in the transformed template at the end of the session (tests/infrastructure/iam_audit.py).
_AUDITED_LAYERS = ("integration", "e2e", "simulation")
_CALLS = CallRecorder(check_limits=True)


@pytest.fixture(scope="session", autouse=True)
def _record_aws_calls() -> Iterator[None]:
    with _CALLS.recording():
        yield


@pytest.fixture(autouse=True)
def _attribute_calls_to_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Also fails a test any of whose calls (its own, its functions', its CLI's) goes over a
    maximum of AWS's API (tests/infrastructure/parameter_limits.py): AWS would refuse it."""
    _CALLS.enabled = any(layer in Path(str(request.node.fspath)).parts for layer in _AUDITED_LAYERS)
    _CALLS.test = request.node.nodeid
    before = len(_CALLS.over_limits)
    yield
    over = [found for test, found in _CALLS.over_limits[before:] if test == request.node.nodeid]
    if over and request.node.get_closest_marker("beyond_aws_limits") is None:
        listed = "\n  ".join(over[:20])
        pytest.fail(f"calls AWS would refuse (over its API's maximums):\n  {listed}")


# Under pytest-xdist each worker records and audits its own tests' calls (a test runs wholly in one
# worker, and each call is judged by what was known when it was made); the controller adds up
# what its workers found, reports it and fails the session on any denial.
_WORKER_AUDIT = "iam_call_audit"
_WORKERS_AUDITS: list[dict[str, Any]] = []


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
