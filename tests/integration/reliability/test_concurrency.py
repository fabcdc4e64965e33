"""Fifty workers at once against a moto server over HTTP: a pool limit is never overrun, and
every request ends in a terminal status."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from moto.moto_api._internal.models import moto_api_backend

from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.startup import Host
from tests.integration.reliability.outcomes import assert_each_launched_once, pool_usage
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import (
    TEST_ENV,
    Cloud,
    an_image,
    cloud_of,
    default_subnets,
    harness_options,
    launch_request,
)

WORKERS = 50
LIMIT = 12  # m5.large instances the pool may hold; the workers ask for far more


@pytest.fixture
def server_cloud() -> Iterator[Cloud]:
    """The local cloud on a threaded moto server; every client goes over HTTP to it."""
    options = harness_options(
        port=0,
        schedules=False,
        instance_events=False,
        function_host=Host(),  # the system's clock and sleep, as in Lambda
        # The server shares moto's process-wide backends: start from fresh ones, with AMIs
        # (another suite may have built them with MOTO_EC2_LOAD_DEFAULT_AMIS=false).
        environment={**TEST_ENV, "MOTO_EC2_LOAD_DEFAULT_AMIS": "true"},
        prepare=moto_api_backend.reset,
    )
    with cloud_of(options, capture_events=False) as cloud:
        yield cloud


def test_fifty_workers_never_overrun_a_limit_and_every_request_ends(
    server_cloud: Cloud,
) -> None:
    cloud = server_cloud
    setup_pool(
        cloud,
        default_subnets(cloud.ec2),
        an_image(cloud.ec2),
        capacity_types=("on-demand",),
        limits={"instances": str(LIMIT)},
    )
    request_ids = [f"race-{n}" for n in range(WORKERS)]
    containers = [cloud.fresh_batch() for _ in range(10)]

    def worker(n: int) -> list[str]:
        # 1 or 2 instances each; ten containers, five workers on each
        body = launch_request(request_ids[n], nodePool="general", count=1 + n % 2, minCount=1)
        return cloud.send(body, batch=containers[n % len(containers)])

    # When fifty workers submit at once
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        handed_back = [m for ms in pool.map(worker, range(WORKERS)) for m in ms]
    # Then none is left hanging, none overran the limit, and usage is what runs
    assert handed_back == []
    launched = assert_each_launched_once(cloud, request_ids)
    assert launched == LIMIT
    statuses = Counter(cloud.record(r).status for r in request_ids)  # type: ignore[union-attr]
    assert statuses[RequestStatus.FAILED] >= WORKERS - LIMIT
    assert pool_usage(cloud).usage("general").instances == LIMIT
