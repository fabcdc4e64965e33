"""A Lambda container's init, without the cyclic garbage collector.

Importing boto3, Powertools, pydantic and the service, and building the clients, allocates about a
million objects and frees almost none of them, yet the collector walks them again and again as
they pile up: in the launcher that is about a sixth of init's CPU (docs/BENCHMARKS.md, "Cold
start"). So the collector is paused while the handler module initialises. Inside Lambda, where
that module lives as long as its process, what init made is then frozen (`gc.freeze`): no later
collection walks it again, and the few hundred cycles init dropped stay allocated. Anywhere else
(the local cloud, the tests, which load handlers many times in one process) nothing is frozen and
the collector simply resumes.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

# Set by the Lambda runtime (and `sam local invoke`'s emulator, which runs it) in every container.
LAMBDA_RUNTIME = "AWS_LAMBDA_RUNTIME_API"


@contextmanager
def lambda_init() -> Iterator[None]:
    """Run a handler module's imports and client building with the collector paused."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if os.environ.get(LAMBDA_RUNTIME):
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
