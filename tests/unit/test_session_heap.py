"""The test session's heap: what collection made (the modules every test imports) is frozen out
of the cyclic collector's scans (tests/conftest.py, pytest_collection_finish)."""

import gc


def test_what_collection_made_is_frozen_and_the_collector_runs() -> None:
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()
