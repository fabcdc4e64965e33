"""A request its pool's limits (or its requester's quota) could lease only part of ends
`PartiallyFulfilled` with an error saying why the rest were not launched, with the numbers,
not `errors: []` (issue 40: a GPU request ended 2 of 3 at its pool's limit, unexplained)."""

from __future__ import annotations

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import words
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

GPU_TYPE = "g5.12xlarge"  # 4 NVIDIA A10Gs (DescribeInstanceTypes GpuInfo)


def test_a_request_the_pool_limits_cut_short_says_which_limit_and_by_how_much(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a GPU pool limited to 12 GPUs, 4 of them used by an earlier request's instance
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=(GPU_TYPE,),
        limits={"nvidia.com/gpu": "12"},
    )
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
