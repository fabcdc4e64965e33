"""The test session's heap: what collection made (the modules every test imports) is frozen out
of the cyclic collector's scans (tests/conftest.py and tests/support/collector.py)."""

import gc

from tests.support.collector import THRESHOLDS


def test_what_collection_made_is_frozen_and_the_collector_runs() -> None:
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()


def test_the_collector_runs_at_the_thresholds_set_for_the_suite() -> None:
    assert gc.get_threshold() == THRESHOLDS
