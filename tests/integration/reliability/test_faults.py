"""Faults from EC2, DynamoDB and EventBridge: nothing lost, nothing launched twice, no leaked
limit usage once the sync has reconciled."""

from __future__ import annotations

from typing import Any

import pytest

import moto_capacity
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from tests.integration.reliability.outcomes import (
    assert_each_launched_once,
    pool_leases,
    pool_usage,
    reconcile_after_leases_expire,
)
from tests.integration.reliability.redrive import MAX_RECEIVE_COUNT, Redrive
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

REQUESTS = 8
LIMIT = 6  # fewer than requested: some requests must fail on limits while faults fire

FAULTS = {
    "ec2-throttling-30pct": ("ec2:CreateFleet", "RequestLimitExceeded", {"rate": 0.3, "seed": 7}),
    # Five in a row outlast botocore's retries: the request must go back to the queue.
    "ec2-describe-throttling": ("ec2:DescribeInstances", "RequestLimitExceeded", {"times": 5}),
    "dynamodb-throttling": (
        "dynamodb:UpdateItem",
        "ProvisionedThroughputExceededException",
        {"rate": 0.3, "seed": 3},
    ),
    "dynamodb-conditional-update": (
        "dynamodb:UpdateItem",
        "ConditionalCheckFailedException",
        {"times": 4},
    ),
    "dynamodb-conditional-put": (
        "dynamodb:PutItem",
        "ConditionalCheckFailedException",
        {"times": 4},
    ),
    "dynamodb-batch-throttling": (
        "dynamodb:BatchWriteItem",
        "ProvisionedThroughputExceededException",
        {"times": 5},
    ),
    "dynamodb-transaction-throttling": (
        "dynamodb:TransactWriteItems",
        "ThrottlingException",
        {"rate": 0.3, "seed": 3},
    ),
    # A code botocore does not retry, so each failure reaches the launcher (and the test is quick).
    "put-events-failing": ("events:PutEvents", "AccessDeniedException", {"times": 3}),
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=list(FAULTS))
def test_under_faults_nothing_is_lost_or_launched_twice_and_limits_reconcile(
    cloud: Cloud, subnets: dict[str, str], image: str, fault: tuple[str, str, dict[str, Any]]
) -> None:
    # Given a pool with room for 6, and a service that keeps failing
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": str(LIMIT)}
    )
    operation, code, how = fault
    moto_capacity.inject_fault(operation, code, **how)
    request_ids = [f"fault-{n}" for n in range(REQUESTS)]
    redrive = Redrive(cloud.fresh_batch, batch_size=4)
    # When 8 requests go through the queue, redelivered as SQS would
    redrive.drain([launch_request(r, nodePool="general") for r in request_ids])
    (injected,) = moto_capacity.state()["faults"]
    assert injected["fired"] > 0, "the fault never fired: this run proves nothing"
    moto_capacity.reset()  # the service calms down
    fired = cloud.events()
    # Then every request ended with one final status, or is in the DLQ with its reason
    # (every fault here is transient: none should need the DLQ)
    assert redrive.dead_letters == []
    launched = assert_each_launched_once(cloud, request_ids)
    assert launched <= LIMIT
    # and every settled outcome was published at least once
    published = {e["detail"]["requestId"] for e in fired}
    assert set(request_ids) <= published
    # and after reconciliation the pool's usage is exactly what runs, with no lease left open
    wiring.Adapters(get_settings()).reservation_sync().run()
    assert pool_usage(cloud).usage("general").instances == launched
    assert [
        le for le in pool_leases(cloud).leases() if le.pool == "general" and not le.settled
    ] == []


def test_a_fault_that_never_clears_ends_in_the_dlq_with_nothing_launched_or_leaked(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given EC2 that throttles every CreateFleet, for good
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": str(LIMIT)}
    )
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded")
    request_ids = [f"stuck-{n}" for n in range(3)]
    redrive = Redrive(cloud.fresh_batch)
    # When the requests go through the queue
    redrive.drain([launch_request(r, nodePool="general") for r in request_ids])
    # Then each is handed back exactly maxReceiveCount times and dead-lettered with its reason
    assert redrive.dead_request_ids() == set(request_ids)
    assert {d.receives for d in redrive.dead_letters} == {MAX_RECEIVE_COUNT}
    assert all("maxReceiveCount" in d.reason for d in redrive.dead_letters)
    # and nothing launched or recorded as final
    assert cloud.managed_instances() == []
    assert all(cloud.record(r) is None for r in request_ids)
    # and their leases, held until they expire, are reclaimed by the sync: no usage leaks
    report = reconcile_after_leases_expire()
    assert sorted(report.reclaimed) == sorted(f"general/{r}" for r in request_ids)
    assert pool_usage(cloud).usage("general").instances == 0
