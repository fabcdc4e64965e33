"""Marks every test by the folder it lives in, so `-m unit|integration|e2e` selects by layer, and
the long ones `slow` (`-m "not slow"` leaves them out; `make test` runs them all).

Kept light: a unit test's session imports nothing of moto, the SAM translator or botocore from
here. The IAM call audit (tests/infrastructure/iam_call_audit.py) is registered only when the
run may collect a suite it audits; botocore's shared loader is imported when a session starts.
Where the environment forbids bytecode, it is cached outside the project first (support/bytecode),
for this process's imports and every process it starts (pytest-xdist's workers among them). The
garbage collector runs less often, and skips what lives for the whole run (support/collector)."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bytecode import cache_bytecode
from tests.support.collector import collect_less_often, no_plugin_heap_walks, settle

cache_bytecode()  # before the imports below, and before pytest-xdist starts its workers
collect_less_often()  # support/collector: the suite's heap is walked far less often
no_plugin_heap_walks()  # and Hypothesis's plugins do not walk it at import

from tests.support.moto_images import use_the_images_tests_use  # noqa: E402

_LAYERS = ("unit", "integration", "e2e")
# The local cloud end to end, and the whole-system simulation: a minute or more each.
_SLOW = ("e2e", "simulation")
# The suites whose AWS calls the IAM call audit evaluates (iam_call_audit.AUDITED_LAYERS).
_AUDITED = ("integration", "e2e", "simulation")
_TESTS = Path(__file__).resolve().parent

# Before any test module imports moto: the images the suites use, not moto's 1,301 per backend.
use_the_images_tests_use()


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Scheduling(), "capacity_launcher_scheduling")
    if audited_suites_may_run(config.args, config.invocation_params.dir):
        from tests.infrastructure import iam_call_audit

        config.pluginmanager.register(iam_call_audit, "iam_call_audit")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per usable core, and one more. The e2e tests spend part of their
    time waiting on the processes they start (the CLI, a served local cloud); another worker
    runs meanwhile (support/scheduling). PYTEST_XDIST_AUTO_NUM_WORKERS still decides if set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return (len(usable) if usable else os.cpu_count() or 1) + 1


def audited_suites_may_run(args: list[str], invoked_in: Path) -> bool:
    """Whether any path the run collects from holds (or lies in) a suite the audit covers."""
    audited = [_TESTS / layer for layer in _AUDITED]
    for arg in args:
        path = (invoked_in / arg.split("::")[0]).resolve()
        if any(path.is_relative_to(suite) or suite.is_relative_to(path) for suite in audited):
            return True
    return False


def pytest_collection_finish(session: pytest.Session) -> None:
    settle()  # what collection imported lives as long as the process


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    if not _SETTLED_AFTER_A_TEST:
        _SETTLED_AFTER_A_TEST.append(nodeid)
        settle()  # and what the first test warmed (moto's backends, botocore's models)


_SETTLED_AFTER_A_TEST: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))
        if any(folder in parts for folder in _SLOW):
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):
        # A pytest-xdist worker (`make test`): the slow tests are handed out first, so that no
        # worker is left running one of them alone at the end. Each worker sorts alike.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


class _Scheduling:
    """`--dist loadgroup` as this suite means it (tests/support/scheduling.py)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup":
            return None
        from tests.support.scheduling import ModulesKeptTogether

        return ModulesKeptTogether(config, log)


@pytest.fixture(scope="session", autouse=True)
def _one_botocore_loader() -> Iterator[None]:
    """Each test's cloud starts new sessions; they share one loader, and large catalogue answers
    are parsed once, what botocore derives again per client is memoized, and calls go through
    botocore's own signer, as in the Lambda runtime (support/process_caches), which writes a
    placeholder for the signature moto never checks (support/signatures); clients of the same TLS
    settings share one TLS context (support/tls_contexts)."""
    from tests.support.process_caches import (
        botocore_memos,
        lambdas_signer,
        remembered_parses,
        shared_botocore_loader,
    )
    from tests.support.signatures import placeholder_signatures
    from tests.support.tls_contexts import shared_tls_contexts

    with (
        shared_botocore_loader(),
        remembered_parses(),
        botocore_memos(),
        lambdas_signer(),
        placeholder_signatures(),
        shared_tls_contexts(),
    ):
        yield
