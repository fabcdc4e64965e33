"""Fixtures the reliability suites share."""

from __future__ import annotations

import pytest
from botocore.retries.bucket import TokenBucket
from botocore.retries.standard import ExponentialBackoff


@pytest.fixture(autouse=True)
def no_retry_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore still retries every throttled call as configured; only its sleeps (backoff, and
    adaptive mode's client-side rate limiting) are skipped, so faults cost milliseconds."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    monkeypatch.setattr(TokenBucket, "acquire", lambda self, amount=1, block=True: True)
