"""Hostile launch requests through the whole batch path: each is Rejected (published when its
requestId can be read) or dropped with a log; never an exception, a message handed back, or a
launch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.reliability.hostile_bodies import POOL, Hostile, hostile_bodies
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, an_image, default_subnets, local_cloud

LAUNCHES = ("ec2:CreateFleet", "ec2:RunInstances")


@pytest.fixture(scope="module")
def hostile_cloud() -> Iterator[Cloud]:
    """One cloud for every example (a new one each would cost seconds per example)."""
    patch = pytest.MonkeyPatch()
    try:
        with local_cloud(patch) as cloud:
            setup_pool(
                cloud,
                default_subnets(cloud.ec2),
                an_image(cloud.ec2),
                capacity_types=("on-demand",),
                pool=POOL,
            )
            cloud.events()
            yield cloud
    finally:
        patch.undo()


def launch_calls() -> int:
    operations = moto_capacity.state()["operations"]
    return sum(operations.get(op, {}).get("calls", 0) for op in LAUNCHES)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(hostile=hostile_bodies)
def test_a_hostile_body_is_rejected_or_dropped_never_retried_or_launched(
    hostile_cloud: Cloud, hostile: Hostile
) -> None:
    body, request_id = hostile
    before = launch_calls()
    # When the body arrives in an SQS batch beside nothing else
    handed_back = hostile_cloud.send(body)
    # Then it is not handed back to the queue, and nothing was launched
    assert handed_back == []
    assert launch_calls() == before
    # and a readable requestId gets a published, recorded Rejected; anything else stays silent
    published = [(e["detail-type"], e["detail"]["requestId"]) for e in hostile_cloud.events()]
    if request_id is None:
        assert published == []
        return
    assert published == [("Launch Rejected", request_id)]
    record = hostile_cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.REJECTED
    assert record.errors and all(e.message for e in record.errors)
