"""The metrics the dashboard graphs exist: the sync emits each limited pool's usage against its
limits (`PoolUsageOfLimit`), and a finished request's latency is counted per pool, per team and
over all requests, so each percentile (p50, p90, p99) is one series's own (issue 40; the
dashboard in template.yaml, docs/operations.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capacity_launcher.service.pool_metrics import POOL_USAGE_OF_LIMIT
from capacity_launcher.service.telemetry import REQUEST_LATENCY
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request


def emitted(output: str, name: str) -> list[dict[str, Any]]:
    """The EMF documents printed for metric `name`."""
    documents = [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]
    return [
        d
        for d in documents
        if [m["Name"] for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]] == [name]
    ]


def test_the_sync_emits_each_limited_pool_s_usage_against_its_limits(
    cloud: Cloud, subnets: dict[str, str], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a pool limited to 4 instances and 8 cpu, one m5.large (2 cpu) running in it
    limits = {"instances": "4", "cpu": "8"}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits)
    assert cloud.send(launch_request("usage-1", nodePool="general")) == []
    capsys.readouterr()
    # When the sync runs
    sync()
    # Then it emits the pool's usage of each limit, by pool and resource
    found = {
        (d["nodePool"], d["resource"]): d[POOL_USAGE_OF_LIMIT]
        for d in emitted(capsys.readouterr().out, POOL_USAGE_OF_LIMIT)
    }
    assert found == {("general", "instances"): [0.25], ("general", "cpu"): [0.25]}


def test_a_request_s_latency_is_counted_by_pool_by_team_and_over_all(
    cloud: Cloud, subnets: dict[str, str], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    capsys.readouterr()
    assert cloud.send(launch_request("latency-1", nodePool="general")) == []
    (latency,) = emitted(capsys.readouterr().out, REQUEST_LATENCY)
    assert latency["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["nodePool", "requester", "service"],
        ["nodePool", "service"],
        ["requester", "service"],
        ["service"],
    ]
    assert (latency["nodePool"], latency["service"]) == ("general", "capacity-launcher")
