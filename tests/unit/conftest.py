"""Fixtures shared by the unit tests, and Hypothesis's settings for them: no deadline. A deadline
is a wall-time assertion (speed is measured in benchmarks/, never asserted in tests), and on a
shared 2-core machine one example now and then takes longer than Hypothesis's 200 ms for reasons
that are not the code's (another process, a garbage collection)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

from capacity_launcher.observability import logger

# Registered before the test modules are imported, so that their own @settings inherit it.
settings.register_profile("unit", deadline=None)
settings.load_profile("unit")


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The service logger's JSON lines, formatted by its own formatter in the logging thread."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    logger._logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger._logger.removeHandler(handler)
