"""Fixtures the reliability suites share."""

from __future__ import annotations

import pytest
from botocore.retries.standard import ExponentialBackoff


@pytest.fixture(autouse=True)
def no_retry_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore still retries every throttled call as configured; only its sleeps are skipped,
    so injected faults cost milliseconds instead of seconds."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
