"""Issue 17: a request in a pool a CapacityQuota names is admitted by its quota, in the same
transaction as the pool-limit lease; refusals end it Failed with QuotaExceeded; usage per quota is
released with the pool's, once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws, quota_usage
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from local_cloud.documents import capacity_quota
from tests.integration.test_accounting import deliver, usage
from tests.integration.test_launch_into_reservations import (
    ZONE,
    expire_idempotency_claims,
    killed_after_create_fleet,
    setup_pool,
)
from tests.support.cloud import Cloud, capacity_type, instance_type, launch_request, node_pool
from tests.support.leases import reserve_room

POOL = "general"
SPARE = "spare"
ONE = Resources(cpu=2, memory_mib=8192, gpu=0, instances=1)  # what an m5.large is counted for


def quota(name: str, nominal: str, *, borrowing: str | None = None, **spec: Any) -> dict[str, Any]:
    limit = {"instances": borrowing} if borrowing is not None else None
    return capacity_quota(name, POOL, {"instances": nominal}, borrowing=limit, **spec)


def held(requester: str) -> Resources:
    """What the cohort's quota usage counts for a requester in the pool."""
    pk = quota_usage.quota_usage_pk("research", POOL)
    _, found = quota_usage.read(aws.client("dynamodb"), get_settings().state_table_name, pk, POOL)
    return found.get((requester, POOL), Resources.ZERO)


def used(requester: str) -> int:
    """The instances the cohort's quota usage counts for a requester in the pool."""
    return held(requester).instances


@pytest.fixture
def pool(cloud: Cloud, subnets: dict[str, str], image: str) -> Cloud:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    return cloud


def test_a_request_within_its_nominal_quota_is_admitted_and_counted(pool: Cloud) -> None:
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    pool.send(launch_request("within-1", nodePool=POOL, count=2, requester="team-a"))
    record = pool.record("within-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert used("team-a") == 2
    assert used("team-b") == 0
    assert usage() == 2


def test_a_request_beyond_nominal_borrows_idle_quota_of_its_cohort(pool: Cloud) -> None:
    pool.apply(quota("team-a", "1", borrowing="2"), quota("team-b", "3"))
    pool.send(launch_request("borrow-1", nodePool=POOL, count=3, requester="team-a"))
    record = pool.record("borrow-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert used("team-a") == 3


def test_a_request_beyond_its_quota_fails_naming_quota_pool_and_resource(pool: Cloud) -> None:
    pool.apply(quota("team-a", "1"), quota("team-b", "3"))
    pool.events()
    pool.send(launch_request("over-1", nodePool=POOL, count=2, minCount=2, requester="team-a"))
    record = pool.record("over-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [e.code for e in record.errors] == ["QuotaExceeded"]
    assert record.errors[0].message == (
        "CapacityQuota team-a: NodePool general, instances: over nominalQuota 1: using 0, asking 2"
    )
    assert [e["detail-type"] for e in pool.events()] == ["Launch Failed"]
    assert pool.managed_instances() == []
    assert (used("team-a"), usage()) == (0, 0)
    assert PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases() == []


def test_a_requester_no_quota_covers_is_refused_in_a_pool_quotas_name(pool: Cloud) -> None:
    pool.apply(quota("team-a", "4"))
    pool.send(launch_request("stranger-1", nodePool=POOL, requester="team-z"))
    pool.send(launch_request("anonymous-1", nodePool=POOL))
    for request_id in ("stranger-1", "anonymous-1"):
        record = pool.record(request_id)
        assert record is not None and record.status is RequestStatus.FAILED
        assert [e.code for e in record.errors] == ["QuotaExceeded"]
        assert record.errors[0].message.startswith("no CapacityQuota: NodePool general: ")
    assert pool.managed_instances() == []


def test_termination_releases_quota_usage_once(pool: Cloud) -> None:
    pool.apply(quota("team-a", "1"))
    pool.send(launch_request("release-1", nodePool=POOL, requester="team-a"))
    record = pool.record("release-1")
    assert record is not None and record.launched == 1
    assert used("team-a") == 1
    gone = record.instances[0].instance_id
    pool.ec2.terminate_instances(InstanceIds=[gone])
    assert deliver(gone, "terminated") == "released"
    deliver(gone, "terminated")
    assert (used("team-a"), usage()) == (0, 0)
    # the released quota admits the next request
    pool.send(launch_request("release-2", nodePool=POOL, requester="team-a"))
    again = pool.record("release-2")
    assert again is not None and again.status is RequestStatus.FULFILLED
    assert used("team-a") == 1


def racing(monkeypatch: pytest.MonkeyPatch, lease: Callable[[], int]) -> list[int]:
    """Run `lease` right after the next admission has read its quota usage items, before it
    writes; returns (once it ran) what `lease` leased."""
    real = PoolLeaseStore.quota_usage
    raced: list[int] = []

    def read_then_race(self: PoolLeaseStore, items: Any) -> Any:
        reading = real(self, items)
        if not raced:
            raced.append(0)  # the racing lease reads unpatched: it is not raced itself
            raced[0] = lease()
        return reading

    monkeypatch.setattr(PoolLeaseStore, "quota_usage", read_then_race)
    return raced


def test_two_concurrent_admissions_that_together_overrun_admit_one(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a cohort with 3 instances of nominal quota, team-a borrowing up to 2 of team-b's
    pool.apply(quota("team-a", "1", borrowing="2"), quota("team-b", "2"))
    settings = get_settings()
    quotas = ConfigStore(settings.state_table_name, clock=system_clock)

    def store() -> PoolLeaseStore:
        return PoolLeaseStore(settings.state_table_name, 900, quotas=quotas, clock=time.time)

    limits = store().stored_limits(POOL)  # the pool's own limits (10) leave room for both
    # When team-b's admission of 2 reads the cohort's usage, and team-a's admission of 3
    # (which fits that same reading) is written before team-b's transaction
    raced = racing(
        monkeypatch,
        lambda: reserve_room(store(), "general", "lease-a", ONE, 3, 3, limits, "team-a"),
    )
    # Then team-b's transaction fails on the version, it decides again, and is refused
    with pytest.raises(QuotaExceeded) as refused:
        reserve_room(store(), "general", "lease-b", ONE, 2, 2, limits, "team-b")
    assert raced == [3]
    assert (refused.value.quota, refused.value.flavor) == ("team-b", POOL)
    assert refused.value.resource == "instances"
    assert refused.value.reclaim == {"instances": 2}  # all it asks is lent out
    # and the cohort runs no more than the sum of its nominal quotas
    assert (used("team-a"), used("team-b")) == (3, 0)
    assert store().lease("general", "lease-b") is None


def test_a_cancelled_lease_gives_its_quota_back_once(pool: Cloud) -> None:
    pool.apply(quota("team-a", "2"))
    settings = get_settings()
    store = PoolLeaseStore(
        settings.state_table_name,
        900,
        quotas=ConfigStore(settings.state_table_name, clock=system_clock),
        clock=time.time,
    )
    assert reserve_room(store, "general", "lease-1", ONE, 2, 1, None, "team-a") == 2
    assert used("team-a") == 2
    assert store.cancel("general", "lease-1")
    assert not store.cancel("general", "lease-1")
    assert (used("team-a"), usage()) == (0, 0)


def test_a_gang_short_of_min_count_gives_its_quota_back(pool: Cloud) -> None:
    # Given EC2 room for 1 of a gang of 3 that its quota admits
    pool.apply(quota("team-a", "3"))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    pool.send(launch_request("gang-1", nodePool=POOL, count=3, minCount=3, requester="team-a"))
    record = pool.record("gang-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert "MinCountNotMet" in [e.code for e in record.errors]
    # Then the lease is settled to nothing: neither the pool nor the quota counts the gang
    assert (used("team-a"), usage()) == (0, 0)


def spare_below(cloud: Cloud, **spare_spec: Any) -> None:
    """`general` (weight 10, the pool quotas name) over `spare` (weight 1), one class, both
    on-demand m5.large: a request naming no pool tries `general` first."""
    requirements = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(
        node_pool(
            POOL, "standard", weight=10, requirements=requirements, limits={"instances": "10"}
        ),
        node_pool(SPARE, "standard", weight=1, requirements=requirements, **spare_spec),
    )


def passed_over(record: Any) -> list[str]:
    return [e.message for e in record.errors if e.code == "NodePoolPassedOver"]


def test_a_request_naming_no_pool_refused_by_its_quota_is_served_by_the_next_pool(
    pool: Cloud,
) -> None:
    # Given the heaviest pool is named by team-a's quota of 1, and a lighter pool by none
    spare_below(pool)
    pool.apply(quota("team-a", "1"))
    pool.events()
    # When team-a asks for a gang of 2 naming no pool
    pool.send(launch_request("over-no-pool", count=2, minCount=2, requester="team-a"))
    # Then the lighter pool serves it, and the record says why the heavier one did not
    record = pool.record("over-no-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert (record.node_pool, record.launched) == (SPARE, 2)
    assert [e.code for e in record.errors] == ["NodePoolPassedOver"]
    assert passed_over(record) == [
        "nodePool general: CapacityQuota team-a: NodePool general, instances: "
        "over nominalQuota 1: using 0, asking 2"
    ]
    assert [e["detail-type"] for e in pool.events()] == ["Launch Fulfilled"]
    # and nothing is counted in the refusing pool or its quota
    assert (used("team-a"), usage()) == (0, 0)


def test_a_requester_no_quota_covers_goes_on_to_a_pool_no_quota_names(pool: Cloud) -> None:
    spare_below(pool)
    pool.apply(quota("team-a", "4"))

    pool.send(launch_request("stranger-no-pool", requester="team-z"))
    pool.send(launch_request("anonymous-no-pool"))

    for request_id in ("stranger-no-pool", "anonymous-no-pool"):
        record = pool.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED, record
        assert record.node_pool == SPARE
        (why,) = passed_over(record)
        assert why.startswith("nodePool general: no CapacityQuota: NodePool general: ")


def test_a_request_every_compatible_pool_refuses_fails_naming_each(pool: Cloud) -> None:
    # Given team-a's quota names both pools, and covers neither requester below
    spare_below(pool)
    team_a = quota("team-a", "4")
    flavors = team_a["spec"]["resourceGroups"][0]["flavors"]
    flavors.append({"name": SPARE, "resources": [{"name": "instances", "nominalQuota": "4"}]})
    pool.apply(team_a)
    pool.events()
    # When a requester no quota covers names no pool
    pool.send(launch_request("refused-everywhere", requester="team-z"))
    # Then it fails with the last pool's refusal, having passed over the first
    record = pool.record("refused-everywhere")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.node_pool == SPARE
    assert [e.code for e in record.errors] == ["NodePoolPassedOver", "QuotaExceeded"]
    assert passed_over(record)[0].startswith("nodePool general: no CapacityQuota: NodePool general")
    assert record.errors[-1].message.startswith("no CapacityQuota: NodePool spare: ")
    assert [e["detail-type"] for e in pool.events()] == ["Launch Failed"]
    assert pool.managed_instances() == []


def test_a_request_naming_its_pool_is_not_passed_on_when_its_quota_refuses(pool: Cloud) -> None:
    spare_below(pool)
    pool.apply(quota("team-a", "1"))

    pool.send(launch_request("named-over", nodePool=POOL, count=2, minCount=2, requester="team-a"))

    record = pool.record("named-over")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.node_pool == POOL
    assert [e.code for e in record.errors] == ["QuotaExceeded"]
    assert pool.managed_instances() == []


def test_a_replay_after_its_pool_changed_types_counts_what_its_instances_are(
    pool: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's quota of 8 vCPUs, and a worker killed right after its CreateFleet launched
    # 2 m5.large (2 vCPUs each) for team-a
    pool.apply(capacity_quota("team-a", POOL, {"cpu": "8", "instances": "10"}))
    request = launch_request("retyped-1", nodePool=POOL, count=2, requester="team-a")
    killed_after_create_fleet(pool, request, monkeypatch)
    assert len(pool.managed_instances()) == 2
    # And the pool applied again meanwhile with another instance type only
    moto_capacity.set_capacity("us-east-1", "c5.xlarge", ZONE, "on-demand", 100)
    setup_pool(
        pool,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=("c5.xlarge",),
        limits={"instances": "10"},
    )
    expire_idempotency_claims(pool)
    # When the message is delivered again to a new container
    assert pool.send(request, batch=pool.fresh_batch()) == []
    # Then the replay takes the 2 m5.large, and they count what an m5.large is, in the quota
    # and in the pool (not as instances of unknown size)
    record = pool.record("retyped-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert {i.instance_type for i in record.instances} == {"m5.large"}
    assert held("team-a") == ONE * 2
    assert PoolUsageStore(get_settings().state_table_name).usage(POOL) == ONE * 2
    # and team-a's next 2 c5.xlarge (4 vCPUs each) would overrun its 8 vCPUs: refused
    late = launch_request("retyped-2", nodePool=POOL, count=2, minCount=2, requester="team-a")
    pool.send(late, batch=pool.fresh_batch())
    refused = pool.record("retyped-2")
    assert refused is not None and refused.status is RequestStatus.FAILED, refused
    assert [e.code for e in refused.errors] == ["QuotaExceeded"]
    assert refused.errors[0].message.startswith("CapacityQuota team-a: NodePool general, cpu: ")
    assert len(pool.managed_instances()) == 2


def group_budget(limit: str, *pools: str) -> dict[str, Any]:
    """team-a's quota of 4 instances in each of `pools`, at most `limit` across them."""
    document = capacity_quota("team-a", pools[0], {"instances": "4"})
    group = document["spec"]["resourceGroups"][0]
    group["limits"] = {"instances": limit}
    for other in pools[1:]:
        group["flavors"].append(
            {"name": other, "resources": [{"name": "instances", "nominalQuota": "4"}]}
        )
    return document


def test_a_group_limit_across_pools_is_enforced_with_the_other_pools_usage(pool: Cloud) -> None:
    # Given team-a may run 4 instances in general and spare together (issue 24, defect 1)
    spare_below(pool)
    pool.apply(group_budget("4", POOL, SPARE))
    # When it runs 4 in general, then asks for 4 in spare
    pool.send(launch_request("group-1", nodePool=POOL, count=4, requester="team-a"))
    pool.send(launch_request("group-2", nodePool=SPARE, count=4, requester="team-a"))
    # Then the second is refused: the limit counts general's 4
    first, second = pool.record("group-1"), pool.record("group-2")
    assert first is not None and first.status is RequestStatus.FULFILLED, first
    assert second is not None and second.status is RequestStatus.FAILED, second
    assert [e.code for e in second.errors] == ["QuotaExceeded"]
    assert "over the limit of 4 across NodePools general, spare" in second.errors[0].message
    assert len(pool.managed_instances()) == 4


def test_a_concurrent_lease_in_another_pool_of_the_group_conflicts_and_is_decided_again(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's budget of 4 across general and spare, nothing running
    spare_below(pool)
    pool.apply(group_budget("4", POOL, SPARE))
    settings = get_settings()

    def store() -> PoolLeaseStore:
        return PoolLeaseStore(
            settings.state_table_name,
            900,
            quotas=ConfigStore(settings.state_table_name, clock=system_clock),
            clock=time.time,
        )

    # When a lease of 3 in spare reads the group's usage, and a lease of 3 in general (which
    # fits that same reading) is written before spare's transaction
    raced = racing(
        monkeypatch, lambda: reserve_room(store(), POOL, "lease-general", ONE, 3, 3, None, "team-a")
    )
    # Then spare's transaction fails on general's version, it decides again, and is refused
    with pytest.raises(QuotaExceeded, match="across NodePools general, spare"):
        reserve_room(store(), SPARE, "lease-spare", ONE, 3, 3, None, "team-a")
    assert raced == [3]
    # but a smaller lease that fits what is left is admitted
    assert reserve_room(store(), SPARE, "lease-spare-2", ONE, 3, 1, None, "team-a") == 1
