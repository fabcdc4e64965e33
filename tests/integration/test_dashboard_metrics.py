"""The metrics the dashboard graphs exist: the sync emits each limited pool's usage against its
limits (`PoolUsageOfLimit`), and a finished request's latency is counted per pool, per team and
over all requests, so each percentile (p50, p90, p99) is one series's own (issue 40; the
dashboard in template.yaml, docs/operations.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.pool_metrics import POOL_USAGE_OF_LIMIT
from capacity_launcher.service.sync_metrics import OLDEST_WAIT, REQUESTS_WAITING
from capacity_launcher.service.telemetry import REQUEST_LATENCY
from local_cloud.documents import capacity_quota
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.integration.test_wait_for_scheduled_capacity import stamp
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


def test_the_sync_counts_the_requests_waiting_and_the_oldest_wait_by_team(
    cloud: Cloud, subnets: dict[str, str], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a pool full to its limit, a quota declaring team-a in another pool (team-b is
    # declared by none), and three requests of the two teams waiting for room in the pool
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.apply(capacity_quota("team-a", "gpu", {"instances": "10"}))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    assert cloud.send(launch_request("fill", nodePool="general")) == []
    deadline = stamp(CLOCK.now() + timedelta(days=1))
    for request_id, team in (("a-1", "team-a"), ("a-2", "team-a"), ("b-1", "team-b")):
        asked = launch_request(
            request_id, nodePool="general", requester=team, waitForCapacityUntil=deadline
        )
        assert cloud.send(asked) == []
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.WAITING
    CLOCK.advance(600)
    capsys.readouterr()
    # When the sync runs (its wake finds the pool still full)
    sync()
    output = capsys.readouterr().out
    # Then it publishes how many wait and the oldest wait, per team and over all; a requester no
    # quota declares is `other`, as in RequestOutcome (free text never becomes a dimension)
    waiting = emitted(output, REQUESTS_WAITING)
    by_team = {d["requester"]: d[REQUESTS_WAITING] for d in waiting if "requester" in d}
    assert by_team == {"team-a": [2.0], "other": [1.0]}
    oldest = {d.get("requester", ""): d[OLDEST_WAIT][0] for d in emitted(output, OLDEST_WAIT)}
    assert set(oldest) == {"", "team-a", "other"}
    assert all(600 <= seconds < 700 for seconds in oldest.values()), oldest
    every = [d for d in waiting if "requester" not in d]
    assert [d[REQUESTS_WAITING] for d in every] == [[3.0]]
