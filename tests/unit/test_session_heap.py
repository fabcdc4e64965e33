"""The test session's heap: what collection made (the modules every test imports) is frozen out
of the cyclic collector's scans (tests/conftest.py and tests/support/collector.py)."""

import gc
import os
import sys

from tests.support.collector import THRESHOLDS


def test_what_collection_made_is_frozen_and_the_collector_runs() -> None:
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()


def test_the_collector_runs_at_the_thresholds_set_for_the_suite() -> None:
    assert gc.get_threshold() == THRESHOLDS


def test_hypothesis_loaded_no_plugin_that_walks_the_heap() -> None:
    import hypothesis.internal.entropy as entropy

    assert os.environ.get("HYPOTHESIS_NO_PLUGINS") == "1"
    # trio's plugin registers trio's own generator (and walks the heap to check it)
    trio_run = sys.modules.get("trio._core._run")
    registered = list(entropy.RANDOMS_TO_MANAGE.values())
    assert trio_run is None or not any(r is trio_run._r for r in registered)
