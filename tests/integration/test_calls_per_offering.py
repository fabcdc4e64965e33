"""Issue 38: what a warm request costs in AWS calls does not grow with the offerings its fleet
carries. A healthy offering (no ICE entry, no claim seen) is asked about without a single-flight
claim (domain/capacity/single_flight.py), so one offering or twelve cost the same calls."""

from __future__ import annotations

from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

# Twelve x86_64 types in one zone: twelve on-demand offerings in one CreateFleet.
MANY_TYPES = (
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "c5.large",
    "c5.xlarge",
    "c5.2xlarge",
    "r5.large",
    "r5.xlarge",
    "m5a.large",
    "c5a.large",
    "m6i.large",
    "c6i.large",
)
SERVICES = ("dynamodb", "ec2", "events", "sqs")


def _warm_request_calls(cloud: Cloud, pool: str) -> tuple[int, list[str]]:
    """AWS calls of one request for one instance in `pool`, its container warm (a request of
    the same pool served just before), as botocore counts them (retries inside one not); and
    those that wrote to the ICE table."""
    cloud.send(launch_request(f"{pool}-warm", nodePool=pool))
    table = cloud.names.unavailable_offerings_table
    calls: list[str] = []
    ice_writes: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append(model.name)
        tables = {params.get("TableName"), *params.get("RequestItems", {})}
        tables |= {
            op.get("TableName") for i in params.get("TransactItems", []) for op in i.values()
        }
        if table in tables and model.name not in ("Scan", "GetItem", "BatchGetItem", "Query"):
            ice_writes.append(model.name)

    clients = [aws.client(name) for name in SERVICES]
    for made in clients:
        made.meta.events.register("provide-client-params", note, unique_id="warm-calls")
    try:
        cloud.send(launch_request(f"{pool}-counted", nodePool=pool))
    finally:
        for made in clients:
            made.meta.events.unregister("provide-client-params", unique_id="warm-calls")
    record = cloud.record(f"{pool}-counted")
    assert record is not None and record.launched == 1, record
    return len(calls), ice_writes


def test_a_warm_request_over_healthy_offerings_costs_the_same_calls_whatever_their_number(
    cloud, subnets, image
):
    # Given one pool of one on-demand offering and one of twelve, every offering healthy, EC2
    # consistent at once (the emulator's visibility delay would add DescribeInstances retries)
    moto_capacity.set_consistency(0, 0)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool="one", klass="one")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=MANY_TYPES, pool="many")
    # When a warm container serves a request of each
    one, one_claims = _warm_request_calls(cloud, "one")
    many, many_claims = _warm_request_calls(cloud, "many")
    # Then both cost the same AWS calls, and neither wrote a claim in the ICE table
    assert many == one
    assert one_claims == [] and many_claims == []
