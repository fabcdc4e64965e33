"""`python -m benchmarks.cloud_setup [N]`: the CPU an integration test's cloud costs to set up and
tear down (tests/support/cloud.py's `local_cloud`, with the test session's process caches, and
the `subnets` and `image` fixtures' first EC2 calls), over N clouds (default 50) after one that
makes what is kept: with the template's resources kept and copied per cloud (`reuse_resources`,
local_cloud/snapshot.py, what the tests use), and made by each cloud through botocore and moto."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tests.support.moto_images import use_the_images_tests_use

use_the_images_tests_use()  # before moto is imported, as tests/conftest.py does

from tests.support import cloud as harness  # noqa: E402
from tests.support.process_caches import (  # noqa: E402
    botocore_memos,
    remembered_parses,
    shared_botocore_loader,
)
from tests.support.retries import retries_without_sleeping  # noqa: E402
from tests.support.tls_contexts import shared_tls_contexts  # noqa: E402

CLOUDS = 50


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _test_session() -> Iterator[None]:
    with ExitStack() as stack:
        for context in (
            shared_botocore_loader(),
            remembered_parses(),
            botocore_memos(),
            retries_without_sleeping(),
            shared_tls_contexts(),
        ):
            stack.enter_context(context)
        yield


def _one(reuse: bool) -> None:
    options = harness.harness_options(
        in_process=True,
        function_host=harness.HOST,
        consistency_seconds=(
            harness.INSTANCE_VISIBILITY_SECONDS,
            harness.RESERVATION_PENDING_SECONDS,
        ),
        reuse_resources=reuse,
    )
    with harness.cloud_of(options) as cloud:
        ec2: Any = cloud.ec2
        harness.default_subnets(ec2)
        harness.an_image(ec2)


def cpu_per_cloud(reuse: bool, clouds: int = CLOUDS) -> float:
    """CPU seconds per cloud set up and torn down, after a first one."""
    _one(reuse)
    began = _cpu_seconds()
    for _ in range(clouds):
        _one(reuse)
    return (_cpu_seconds() - began) / clouds


def main(argv: list[str]) -> int:
    clouds = int(argv[0]) if argv else CLOUDS
    with _test_session():
        made = cpu_per_cloud(False, clouds)
        kept = cpu_per_cloud(True, clouds)
    print(f"each cloud making its resources: {made * 1000:.1f} ms of CPU")
    print(f"resources kept, copied per cloud: {kept * 1000:.1f} ms of CPU ({kept / made:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
