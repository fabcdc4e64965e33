"""The local cloud's clock, for functions and commands run in another process.

`local up` runs its functions on the emulator's clock (moto_capacity's `CLOCK`, moved by
`POST /moto-capacity/clock`); `invoke` and `submit --dry-run` run in the CLI's own process, so
they read the clock's offset from the running cloud (`GET /moto-capacity/state`) and read time
as its functions do.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from botocore.exceptions import EndpointConnectionError

from capacity_launcher.startup import Host, system_clock
from capacity_launcher_client.deployment import Deployment

STATE_PATH = "/moto-capacity/state"
TIMEOUT_SECONDS = 5.0


def offset_seconds(endpoint_url: str) -> float:
    """How far the running cloud's clock is ahead of the wall clock. A cloud that does not
    answer raises botocore's EndpointConnectionError naming it, as a boto3 call to it would, so
    the CLI says it as it says every unreachable endpoint."""
    url = endpoint_url.rstrip("/") + STATE_PATH
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an HTTP endpoint: {endpoint_url}")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310 - checked
            state = json.loads(answer.read())
    except urllib.error.HTTPError:
        raise  # it answered: not a connection failure
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise EndpointConnectionError(endpoint_url=endpoint_url, error=error) from error
    return float(state["clock"]["offsetSeconds"])


def clock_of(endpoint_url: str) -> Callable[[], datetime]:
    offset = timedelta(seconds=offset_seconds(endpoint_url))
    return lambda: datetime.now(UTC) + offset


def service_clock(deployment: Deployment) -> Callable[[], datetime]:
    """The clock the deployment's functions tell the time by: the running local cloud's (read
    from its server once), or the wall clock for a stack."""
    if not deployment.is_local or deployment.endpoint_url is None:
        return system_clock
    return clock_of(deployment.endpoint_url)


def service_host(deployment: Deployment) -> Host:
    """A host for a function run in this process on the deployment's clock (`invoke`)."""
    return Host(clock=service_clock(deployment))
