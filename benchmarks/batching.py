"""Batching: one SQS batch of 10 compatible requests against the same 10 requests one batch at a
time, with every EC2 call the launch path makes delayed as a real region would, and every
DynamoDB call by 10 ms (issue 38's target: at least 4x at 10 ms a DynamoDB call)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import moto_capacity
from benchmarks.scene import apply_pool, bench_cloud, request

REQUESTS = 10
EC2_LATENCY_SECONDS = 0.25
# What a launch costs in EC2 round trips once the catalog and subnets are cached.
DELAYED = ("ec2:CreateFleet", "ec2:DescribeInstances", "ec2:CreateTags")
DYNAMODB_LATENCY_SECONDS = 0.010
# Every DynamoDB operation the launch path makes (claims, bindings, leases, intents, records).
DYNAMODB_DELAYED = tuple(
    f"dynamodb:{operation}"
    for operation in (
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    )
)
ROUNDS = 3
BATCHED = "one SQS batch of 10"
SEQUENTIAL = "10 batches of 1 (sequential)"


@dataclass(frozen=True)
class BatchingResult:
    mode: str
    seconds: float
    create_fleet_calls: int
    delayed_calls: dict[str, int]


def _create_fleet_calls() -> int:
    operations: dict[str, dict[str, int]] = moto_capacity.state()["operations"]  # type: ignore[assignment]
    return operations.get("ec2:CreateFleet", {}).get("calls", 0)


def _measure(mode: str, round_number: int) -> BatchingResult:
    with bench_cloud() as cloud:
        apply_pool(cloud, types=("m5.large",))
        batch = cloud.fresh_batch()
        cloud.send(request("warm"), batch=batch)  # a warm container: caches filled
        moto_capacity.reset()
        for operation in DELAYED:
            moto_capacity.set_latency(operation, EC2_LATENCY_SECONDS)
        for operation in DYNAMODB_DELAYED:
            moto_capacity.set_latency(operation, DYNAMODB_LATENCY_SECONDS)
        slug = "batched" if mode == BATCHED else "sequential"
        bodies = [request(f"{slug}-{round_number}-{n}") for n in range(REQUESTS)]
        started = time.perf_counter()
        if mode == BATCHED:
            cloud.send(*bodies, batch=batch)
        else:
            for body in bodies:
                cloud.send(body, batch=batch)
        seconds = time.perf_counter() - started
        records = [cloud.record(str(b["requestId"])) for b in bodies]
        launched = sum(r.launched for r in records if r is not None)
        assert launched == REQUESTS, f"{mode}: launched {launched}"
        operations: dict[str, dict[str, int]] = moto_capacity.state()["operations"]  # type: ignore[assignment]
        delayed = {op: int(operations.get(op, {}).get("calls", 0)) for op in DELAYED}
        return BatchingResult(mode, seconds, _create_fleet_calls(), delayed)


def run() -> list[BatchingResult]:
    """The median of ROUNDS runs of each mode."""
    results = []
    for mode in (BATCHED, SEQUENTIAL):
        runs = sorted((_measure(mode, r) for r in range(ROUNDS)), key=lambda r: r.seconds)
        results.append(runs[len(runs) // 2])
    return results
