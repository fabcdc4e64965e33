"""Fifty workers at once against a moto server over HTTP: a pool limit is never overrun, and
every request ends in a terminal status."""

from __future__ import annotations

import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto.server import ThreadedMotoServer

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.status import RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.reliability.outcomes import assert_each_launched_once, pool_usage
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import FAKE_ENV, REGION, Cloud, an_image, default_subnets, launch_request
from tests.support.template import create_resources

WORKERS = 50
LIMIT = 12  # m5.large instances the pool may hold; the workers ask for far more


@pytest.fixture
def server_cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    """The template's resources on a threaded moto server; every client goes over HTTP to it."""
    moto_capacity.install()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # The server shares moto's process-wide backends: start from fresh ones, with AMIs
        # (another suite may have built them with MOTO_EC2_LOAD_DEFAULT_AMIS=false).
        monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "true")
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
        for name, value in {**FAKE_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        names = create_resources(boto3.Session(region_name=REGION), endpoint_url=endpoint)
        environment = names.environment("LauncherFunction")
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        aws.client.cache_clear()
        get_settings.cache_clear()
        yield Cloud(names, environment, events_queue_url="")
    finally:
        aws.client.cache_clear()
        get_settings.cache_clear()
        server.stop()


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
