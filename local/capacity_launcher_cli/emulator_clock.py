"""The local cloud's clock, for functions and commands run in another process.

`local up` runs its functions on the emulator's clock (moto_capacity's `CLOCK`, moved by
`POST /moto-capacity/clock`); `invoke` and `submit --dry-run` run in the CLI's own process, so
they read the clock's offset from the running cloud (`GET /moto-capacity/state`) and read time
as its functions do.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from capacity_launcher.service import wiring
from capacity_launcher_client.deployment import Deployment

STATE_PATH = "/moto-capacity/state"
TIMEOUT_SECONDS = 5.0


def offset_seconds(endpoint_url: str) -> float:
    """How far the running cloud's clock is ahead of the wall clock."""
    url = endpoint_url.rstrip("/") + STATE_PATH
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an HTTP endpoint: {endpoint_url}")
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310 - checked
        state = json.loads(answer.read())
    return float(state["clock"]["offsetSeconds"])


def clock_of(endpoint_url: str) -> Callable[[], datetime]:
    offset = timedelta(seconds=offset_seconds(endpoint_url))
    return lambda: datetime.now(UTC) + offset


def _already_emulated() -> bool:
    """A local cloud in this very process already gave the service its clock."""
    return getattr(wiring.utcnow, "__module__", None) != wiring.__name__


@contextmanager
def emulator_time(deployment: Deployment) -> Iterator[None]:
    """While inside, the service reads the local cloud's time (a stack's: the wall clock)."""
    if not deployment.is_local or deployment.endpoint_url is None or _already_emulated():
        yield
        return
    saved = wiring.utcnow
    wiring.utcnow = clock_of(deployment.endpoint_url)
    try:
        yield
    finally:
        wiring.utcnow = saved
