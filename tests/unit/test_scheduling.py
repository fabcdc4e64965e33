"""`make test`'s workers: the modules named to run on one worker are handed out whole, every other
test alone (tests/support/scheduling.py, in place of xdist's loadgroup, which pytest 9.2's node
ids defeat)."""

from __future__ import annotations

from pathlib import Path

from tests.support.scheduling import ONE_WORKER, unit_of_work

REPO = Path(__file__).resolve().parents[2]


def test_a_named_modules_tests_share_one_unit_of_work() -> None:
    module = "tests/infrastructure/test_layer_build.py"
    first = unit_of_work(f"{module}::test_the_layer_stays_well_within_lambdas_unzipped_limit")
    second = unit_of_work(
        f"{module}::test_the_layer_pins_its_whole_closure_at_the_dev_locks_versions"
    )
    assert first == second == module


def test_every_other_test_is_its_own_unit_even_parametrized_with_an_at_sign() -> None:
    ids = [
        "tests/e2e/test_top.py::test_top_lists_pools",
        "tests/e2e/test_top.py::test_top_follows_requests",
        "tests/unit/test_x.py::test_y[a@b]",
    ]
    assert [unit_of_work(i) for i in ids] == ids


def test_every_module_named_exists() -> None:
    assert sorted(m for m in ONE_WORKER if not (REPO / m).is_file()) == []
