"""Fixtures shared by the unit tests."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from capacity_launcher.observability import logger


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
