"""botocore's retries without their waits: the tests that fault AWS calls on purpose.

A throttled or failing call is still retried by botocore exactly as the layer configures it
(adapters/aws.py: standard or adaptive mode, its maximum attempts), and every attempt still
reaches the emulator (its fault counters see each one); only the waits in between are skipped:
the exponential back-off before each retry, and adaptive mode's client-side rate limiting (its
token bucket refills on the wall clock, which a test would otherwise spend seconds on).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.retries.bucket import TokenBucket
from botocore.retries.standard import ExponentialBackoff


@contextmanager
def retries_without_sleeping() -> Iterator[None]:
    """While open, botocore retries as configured and waits nothing between attempts."""
    delay, acquire = ExponentialBackoff.delay_amount, TokenBucket.acquire
    ExponentialBackoff.delay_amount = lambda self, context: 0.0  # type: ignore[method-assign]
    TokenBucket.acquire = lambda self, amount=1, block=True: True  # type: ignore[method-assign]
    try:
        yield
    finally:
        ExponentialBackoff.delay_amount = delay  # type: ignore[method-assign]
        TokenBucket.acquire = acquire  # type: ignore[method-assign]
