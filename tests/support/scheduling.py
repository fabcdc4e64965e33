"""How `make test` hands its tests to the pytest-xdist workers (`--dist loadgroup`).

pytest-xdist's own loadgroup reads each test's `xdist_group` mark on the worker and appends the
group to the test's node id, which the controller's scheduler splits again; pytest 9.2 derives
node ids from their structured form, so that suffix is dropped and every mark is silently
ignored (https://github.com/pytest-dev/pytest-xdist/issues/1386). The controller never sees the
tests, only their ids: the modules whose tests must run on one worker are named here, by path,
and every other test is its own unit of work, handed out in the order the workers collected
them (the slow ones first: tests/conftest.py)."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# Modules whose tests share a module fixture that costs seconds to make: on one worker it is
# made once, where spread over two it would be made twice.
ONE_WORKER = frozenset(
    {
        "tests/infrastructure/test_layer_build.py",  # the layer's `make` build
        "tests/infrastructure/test_lint.py",  # cfn-lint on a template broken on purpose
        "tests/infrastructure/test_typed_client.py",  # the wheel's build and a venv
    }
)


def unit_of_work(nodeid: str) -> str:
    """The scope a test is handed out in: its module's path for a module of `ONE_WORKER`, else
    the test itself."""
    module = nodeid.split("::", 1)[0]
    return module if module in ONE_WORKER else nodeid


class ModulesKeptTogether(LoadScopeScheduling):
    """xdist's scope scheduling with `unit_of_work` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of_work(nodeid)
