"""A request its pool's limits (or its requester's quota) could lease only part of ends
`PartiallyFulfilled` with an error saying why the rest were not launched, with the numbers,
not `errors: []` (issue 40: a GPU request ended 2 of 3 at its pool's limit, unexplained)."""

from __future__ import annotations

from decimal import Decimal

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import words
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

GPU_TYPE = "g5.12xlarge"  # 4 NVIDIA A10Gs (DescribeInstanceTypes GpuInfo)


def on_demand_pool(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    types: tuple[str, ...],
    limits: dict[str, str],
) -> None:
    """The on-demand pool `general` of `types`, within `limits`."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=types, limits=limits)


def test_a_request_the_pool_limits_cut_short_says_which_limit_and_by_how_much(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a GPU pool limited to 12 GPUs, 4 of them used by an earlier request's instance
    on_demand_pool(cloud, subnets, image, (GPU_TYPE,), {"nvidia.com/gpu": "12"})
    assert cloud.send(launch_request("gpu-first", nodePool="general", count=1)) == []
    # When a request for 3 more arrives (room for 2)
    assert cloud.send(launch_request("gpu-short", nodePool="general", count=3)) == []
    # Then it launches 2 and its record says the pool's GPU limit left room for no more
    record = cloud.record("gpu-short")
    assert record is not None, "no record"
    assert (record.status, record.launched) == (RequestStatus.PARTIALLY_FULFILLED, 2)
    (error,) = record.errors
    assert error.code == "LimitReached"
    assert error.message == (
        "node pool general limits leave room for 2 of the 3 instances asked for: "
        "nvidia.com/gpu limit 12, 4 used by its other instances and leases, 4 each; "
        "the other 1 were not launched"
    )
    # And a request that got all it asked for says nothing of limits
    first = cloud.record("gpu-first")
    assert first is not None and first.status is RequestStatus.FULFILLED and first.errors == []


def test_a_short_lease_the_quota_held_back_names_the_quota() -> None:
    # Given a lease of 2 of the 3 asked for, where the pool's limits would hold all 3
    lease = Lease("gpu", "q-1", 2, Resources(gpu=8, instances=2), expires_at=0)
    limits = PoolLimits.model_validate({"nvidia.com/gpu": "64"})
    # When the record's words for it are made
    error = words.short_lease("gpu", limits, Resources(gpu=4), lease, 3, "team-ml")
    # Then they name the quota, not the pool's limits
    assert error.code == "QuotaReached"
    assert error.message == (
        "CapacityQuota team-ml admits 2 of the 3 instances asked for in node pool gpu now "
        "(the pool's limits would hold more); the other 1 were not launched"
    )


def test_a_request_the_limits_leave_no_room_for_is_told_which_limit_and_its_numbers(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool of m5.large and m5.xlarge (2 and 4 cores) limited to 5 cores, one m5.xlarge
    # running in it
    on_demand_pool(cloud, subnets, image, ("m5.large", "m5.xlarge"), {"cpu": "5"})
    xlarge = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}
    cloud.send(launch_request("fill-1", nodePool="general", count=1, requirements=[xlarge]))
    filled = cloud.record("fill-1")
    assert filled is not None and filled.launched == 1
    # When another request asks (1 core left: not even an m5.large fits)
    cloud.send(launch_request("next-1", nodePool="general", count=2))
    # Then it fails naming the limit that binds, with its numbers, not only that it is full
    record = cloud.record("next-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [(e.code, e.message) for e in record.errors] == [
        (
            "LimitExceeded",
            "node pool general limits leave room for fewer than minCount=1 instances now: "
            "cpu limit 5, 4 used by its instances and leases, 2 for one m5.large (the "
            "candidate type it holds the most of): room for 0",
        )
    ]


def test_no_room_is_said_plainly_where_no_limit_binds_the_candidates() -> None:
    # Given a pool limited on GPUs only, and candidates without GPUs (no limit binds them), or
    # limits that hold the minCount again now (the room came back since the lease was refused)
    limits = PoolLimits.model_validate({"nvidia.com/gpu": "8"})
    cpu_only = {"m5.large": Resources(cpu=Decimal(2), memory_mib=8192, instances=1)}
    # When the record's words for a request leased nothing are made
    plain = "node pool p limits leave room for fewer than minCount=2 instances now"
    # Then they say only that, never numbers that do not show it
    assert words.full_lease("p", limits, Resources(gpu=8), cpu_only, 2).message == plain
    gpus = {"g5.12xlarge": Resources(gpu=4, instances=1)}
    assert words.full_lease("p", limits, Resources(), gpus, 2).message == plain
    assert words.full_lease("p", None, Resources(), gpus, 2).message == plain
