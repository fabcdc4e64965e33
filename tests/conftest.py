"""Marks every test by the folder it lives in, so `-m unit|integration|e2e` selects by layer."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infrastructure.iam_audit import CallRecorder, Policies, audit
from tests.infrastructure.policy_checks import transform
from tests.support.process_caches import shared_botocore_loader, use_the_images_tests_use
from tests.support.template import load_template

_LAYERS = ("unit", "integration", "e2e")

# Before any test module imports moto: the images the suites use, not moto's 1,301 per backend.
use_the_images_tests_use()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(scope="session", autouse=True)
def _one_botocore_loader() -> Iterator[None]:
    """Each test's cloud starts new sessions; they share one loader (support/process_caches)."""
    with shared_botocore_loader():
        yield


# ---------------------------------------------------------------- IAM, proven on the real calls
# Every AWS call a template function makes in these suites is evaluated against its role policy
# in the transformed template at the end of the session (tests/infrastructure/iam_audit.py).
_AUDITED_LAYERS = ("integration", "e2e", "simulation")
_CALLS = CallRecorder()


@pytest.fixture(scope="session", autouse=True)
def _record_aws_calls() -> Iterator[None]:
    with _CALLS.recording():
        yield


@pytest.fixture(autouse=True)
def _attribute_calls_to_the_test(request: pytest.FixtureRequest) -> None:
    _CALLS.enabled = any(layer in Path(str(request.node.fspath)).parts for layer in _AUDITED_LAYERS)
    _CALLS.test = request.node.nodeid


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _CALLS.calls:
        return
    sam = load_template()
    denials = audit(_CALLS.calls, Policies(transform(sam), sam))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"IAM call audit: {len(_CALLS.calls)} calls by the functions, {len(denials)} denied"
        )
        for denial in denials[:50]:
            reporter.write_line(f"  DENIED {denial}", red=True)
    if denials:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
