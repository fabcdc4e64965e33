"""A burst into Karpenter's 100-cpu-limit example: a lease the room left cannot hold at the
largest candidate (96 vCPUs) covers only the instance types that fit, so small instances fill
the pool instead of one request reserving the whole limit (docs/placement.md)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch.progress import Context
from capacity_launcher.service.preview import Usage, preview
from tests.support.cloud import Cloud, apply_karpenter_example, launch_request
from tests.support.leases import take

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/karpenter/v1/100-cpu-limit.yaml"
POOL = "limitcpu100"
LIMIT = Decimal(100)
# Three requests of eight and one of two, at once: 26 instances, 52 vCPUs of the smallest.
BURST = {"burst-1": 8, "burst-2": 8, "burst-3": 8, "burst-4": 2}


@pytest.fixture
def example_pool(cloud: Cloud) -> None:
    """The example applied as written, on the network and image aliases it names."""
    apply_karpenter_example(cloud, EXAMPLE)


@pytest.fixture
def usage_seen(cloud: Cloud) -> list[Decimal]:
    """The pool's stored cpu usage after every transaction the service writes."""
    seen: list[Decimal] = []
    store = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb"))

    def look(**_: Any) -> None:
        seen.append(store.usage(POOL).cpu)

    aws.client("dynamodb").meta.events.register("after-call.dynamodb.TransactWriteItems", look)
    return seen


def vcpus(cloud: Cloud, types: set[str]) -> dict[str, int]:
    names = sorted(types)
    found = [  # DescribeInstanceTypes takes at most 100 names a call
        t
        for start in range(0, len(names), 100)
        for t in cloud.ec2.describe_instance_types(InstanceTypes=names[start : start + 100])[
            "InstanceTypes"
        ]
    ]
    return {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in found}


def assert_burst_fulfilled_within_the_limit(cloud: Cloud, usage_seen: list[Decimal]) -> None:
    records = {rid: cloud.record(rid) for rid in BURST}
    for rid, count in BURST.items():
        record = records[rid]
        assert record is not None and record.status is RequestStatus.FULFILLED, record
        assert record.launched == count
    instances = [i for r in records.values() if r is not None for i in r.instances]
    sizes = vcpus(cloud, {i.instance_type for i in instances})
    assert sum(sizes[i.instance_type] for i in instances) <= LIMIT
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage(POOL)
    assert usage.cpu == sum(sizes[i.instance_type] for i in instances)
    assert usage_seen and max(usage_seen) <= LIMIT
    assert len(cloud.managed_instances()) == sum(BURST.values())


def test_a_burst_sent_at_once_is_fulfilled_within_the_100_cpu_limit(
    cloud: Cloud, example_pool: None, usage_seen: list[Decimal], fleet_inputs: list[dict]
) -> None:
    # Given Karpenter's 100-cpu-limit example (c, m, r types up to 96 vCPUs)
    # When three requests of eight and one of two arrive in one batch
    bodies = [launch_request(rid, nodePool=POOL, count=n) for rid, n in BURST.items()]
    assert cloud.send(*bodies) == []
    # Then all four are fulfilled, and the pool never counted more than 100 cpu
    assert_burst_fulfilled_within_the_limit(cloud, usage_seen)
    # And no CreateFleet offered a type the leases did not cover (one that cannot fit 26 times)
    offered = {
        o["InstanceType"]
        for call in fleet_inputs
        for config in call["LaunchTemplateConfigs"]
        for o in config["Overrides"]
    }
    sizes = vcpus(cloud, offered)
    assert offered and all(26 * sizes[t] <= LIMIT for t in offered)
    # And each record names the types left out for the room left
    record = cloud.record("burst-1")
    assert record is not None and record.candidates_left_out is not None
    assert record.candidates_left_out.reason == "RoomLeft"
    assert "c5.24xlarge" not in offered
    assert record.candidates_left_out.left_out > 0


def test_a_burst_from_concurrent_workers_stays_within_the_100_cpu_limit(
    cloud: Cloud, example_pool: None, usage_seen: list[Decimal]
) -> None:
    # Given the example, and four workers (containers) each with one of the burst's requests
    batches = {rid: cloud.fresh_batch() for rid in BURST}

    def submit(rid: str) -> list[str]:
        body = launch_request(rid, nodePool=POOL, count=BURST[rid])
        return cloud.send(body, batch=batches[rid])

    with ThreadPoolExecutor(max_workers=len(BURST)) as pool:
        failures = [f for fs in pool.map(submit, BURST) for f in fs]
    assert failures == []
    # Then whatever order the leases were taken in, no lease took the pool over 100 cpu (each
    # worker decided on the usage it read; the write is conditioned on the room being there)
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage(POOL)
    assert usage_seen and max(usage_seen) <= LIMIT and usage.cpu <= LIMIT
    records = [cloud.record(rid) for rid in BURST]
    instances = [i for r in records if r is not None for i in r.instances]
    sizes = vcpus(cloud, {i.instance_type for i in instances})
    assert instances and usage.cpu == sum(sizes[i.instance_type] for i in instances)
    # And the first lease taken, alone in an empty pool, launched all it asked for
    assert any(r is not None and r.status is RequestStatus.FULFILLED for r in records)


def test_a_narrowed_lease_keeps_the_types_it_covers_for_a_redelivery(
    cloud: Cloud, example_pool: None
) -> None:
    # Given a lease of eight narrowed to the types that fit 100 cpu
    store = cloud.adapters().pool_leases()
    two, eight, big = (Resources(cpu=Decimal(n), instances=1) for n in (2, 8, 96))
    sizes = {"c5.large": two, "c5.2xlarge": eight, "c5.24xlarge": big}
    taken = take(store, POOL, "narrowed-1", big, 8, 1, PoolLimits(cpu=100), sizes=sizes)
    assert taken is not None and taken.instance_types == {"c5.large", "c5.2xlarge"}
    assert taken.amount.cpu == 64
    # When a redelivery reads it back, it covers the same types (it launches no other)
    found = store.lease(POOL, "narrowed-1")
    assert found is not None and found.instance_types == {"c5.large", "c5.2xlarge"}
    # And a lease the room left (36 cpu) holds whole covers every candidate it was asked over
    small = {"c5.large": two, "c5.2xlarge": eight}
    whole = take(store, POOL, "whole-1", eight, 4, 1, PoolLimits(cpu=100), sizes=small)
    assert whole is not None and whole.instance_types is None and whole.count == 4
    # While one that needs the 96-vCPU type too is narrowed again, to what the room holds
    again = take(store, POOL, "again-1", big, 1, 1, PoolLimits(cpu=100), sizes=sizes)
    assert again is not None and again.instance_types == {"c5.large"}


def test_a_dry_run_sizes_the_headroom_as_the_lease_would(cloud: Cloud, example_pool: None) -> None:
    # Given the example's pool, empty: 100 vCPUs, and candidates up to 96 vCPUs each
    adapters = cloud.adapters()
    context = Context(
        adapters.launch_ports(), clock=adapters.clock, max_attempts=4, sleep=adapters.pause
    )
    usage = Usage(adapters.pool_usage(), adapters.quota_usage())
    # When a request for 8 is previewed
    answer = preview(context, LaunchRequest(requestId="preview-1", nodePool=POOL, count=8), usage)
    # Then its headroom counts instances of the types a lease of 8 would cover, not of the
    # largest candidate (one 96-vCPU instance would leave room for 1), and names the others
    (pool,) = answer.pools
    room = pool.headroom
    assert room is not None and room.left_out
    assert room.per_instance.cpu * 8 <= LIMIT
    assert room.limits is not None and room.limits >= 8
    assert all(sizes > LIMIT / 8 for sizes in vcpus(cloud, set(room.left_out)).values())
