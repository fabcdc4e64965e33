"""Issue 37, preemption judged on the full fit, against the local cloud: a waiting request's
victims are chosen (and decided again by the sync) so that, with them gone, it passes every check
its lease is admitted under: its quota (with a group `limits` summed over every pool of the
group), then its pool's own `limits`. A victim frees the quota where it runs, and its pool's room
only in its own pool: no victim is terminated for a request that would still be refused."""

from __future__ import annotations

from typing import Any

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_preemption_policies import (
    classes,
    delivered_woken,
    preemption_of,
    run,
    wait,
)
from tests.integration.test_queue_for_room import record_of
from tests.integration.test_quota_admission import SPARE, group_budget
from tests.integration.test_quota_reclaim import GRACE_SECONDS, POOL, pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, capacity_type, instance_type, node_pool

__all__ = ["pool"]  # the fixture, shared with the reclaim tests

WITHIN = {"withinClusterQueue": "LowerPriority", "gracePeriod": f"{GRACE_SECONDS}s"}


def pools(cloud: Cloud, general: dict[str, str], *kinds: str) -> None:
    """`general` with ``general`` limits and instances of ``kinds`` (m5.large by default), and
    `spare` (10 instances)."""
    requirements = [capacity_type("on-demand"), instance_type(*(kinds or ("m5.large",)))]
    cloud.apply(
        node_pool(POOL, "standard", requirements=requirements, limits=general),
        node_pool(SPARE, "standard", requirements=requirements, limits={"instances": "10"}),
    )


def grouped_team_a() -> dict[str, Any]:
    """team-a: 4 instances in each of general and spare, 3 across both; LowerPriority."""
    document = group_budget("3", POOL, SPARE)
    document["spec"]["preemption"] = WITHIN
    return document


def terminated_after_grace() -> list[str]:
    moto_capacity.advance_clock(GRACE_SECONDS)
    synced = sync()
    assert synced.quotas is not None
    return synced.quotas.reclaims.terminated


def test_victims_in_another_pool_are_not_taken_when_the_requests_pool_is_at_its_limits(
    pool: Cloud,
) -> None:
    # Given team-a at its group limit of 3: its urgent instance fills general (limit 1), its two
    # batch instances run in spare
    classes(pool)
    pools(pool, {"instances": "1"})
    pool.apply(grouped_team_a())
    run(pool, "a-urgent", "team-a", "urgent")
    spare = [run(pool, f"a-{n}", "team-a", "batch", SPARE) for n in range(2)]
    # When an urgent request of team-a waits in general, refused by the group limit
    events = wait(pool, "waiter", "team-a", "urgent")
    # Then it preempts nothing: a batch instance in spare frees the group's limit, but general
    # would still refuse it
    assert [e["detail-type"] for e in events] == ["Launch Waiting"]
    assert "over the limit of 3 across NodePools" in record_of(pool, "waiter").errors[0].message
    assert terminated_after_grace() == []
    assert {i["InstanceId"] for i in pool.managed_instances()} >= set(spare)
    assert record_of(pool, "waiter").status is RequestStatus.WAITING


def spare_victim_asked(cloud: Cloud) -> tuple[dict[str, Any], list[str]]:
    """team-a at its group limit of 3 (its urgent instance in general, limit 2; two batch ones
    in spare) and an urgent request waiting in general: the preemption it asked, spare's
    instances."""
    classes(cloud)
    pools(cloud, {"instances": "2"})
    cloud.apply(grouped_team_a())
    run(cloud, "a-urgent", "team-a", "urgent")
    spare = [run(cloud, f"a-{n}", "team-a", "batch", SPARE) for n in range(2)]
    return preemption_of(wait(cloud, "waiter", "team-a", "urgent")), spare


def test_a_victim_in_another_pool_of_the_group_is_terminated_when_the_pool_has_room(
    pool: Cloud,
) -> None:
    # Given the urgent request waiting in general, which has room for one more
    reclaim, spare = spare_victim_asked(pool)
    # Then it asks for spare's newest batch instance: it frees the group's limit
    assert [(i["instanceId"], i["nodePool"]) for i in reclaim["instances"]] == [(spare[-1], SPARE)]
    assert reclaim["nodePool"] == POOL
    # and the sync, past the grace period, terminates it (counted out of spare) and admits it
    assert terminated_after_grace() == [spare[-1]]
    admitted = delivered_woken(pool, "waiter")
    assert admitted.status is RequestStatus.FULFILLED, admitted.to_detail()


def test_the_sync_decides_again_on_the_pools_limits_of_then(pool: Cloud) -> None:
    # Given the same preemption asked, and general's limit lowered to 1 during the grace period
    reclaim, spare = spare_victim_asked(pool)
    pools(pool, {"instances": "1"})
    # Then the sync terminates nothing: with the victim gone general would still refuse it
    moto_capacity.advance_clock(GRACE_SECONDS)
    synced = sync()
    assert synced.quotas is not None and synced.quotas.reclaims.terminated == []
    assert synced.quotas.reclaims.closed == {reclaim["reclaimId"]: "withdrawn"}
    assert {i["InstanceId"] for i in pool.managed_instances()} >= set(spare)


def test_victims_in_the_requests_pool_are_as_many_as_its_limits_need(pool: Cloud) -> None:
    # Given general (m5.large and m5.xlarge) limited to 8 vCPUs, full: team-b's two m5.large
    # (4 vCPUs) and team-a's two batch m5.large (its nominal quota of 2 instances)
    classes(pool)
    pools(pool, {"cpu": "8"}, "m5.large", "m5.xlarge")
    team_a, team_b = group_budget("2", POOL), group_budget("2", POOL)
    team_a["spec"]["preemption"] = WITHIN
    team_b["metadata"]["name"], team_b["spec"]["requesters"] = "team-b", ["team-b"]
    pool.apply(team_a, team_b)
    for n in range(2):
        run(pool, f"b-{n}", "team-b", "batch")
    batch = [run(pool, f"a-{n}", "team-a", "batch") for n in range(2)]
    # When an urgent request of team-a for an m5.xlarge (4 vCPUs) waits
    xlarge = [instance_type("m5.xlarge")]
    reclaim = preemption_of(wait(pool, "waiter", "team-a", "urgent", requirements=xlarge))
    # Then its quota needs one victim but general's limit needs both (8 - 2 + 4 > 8): both are
    # asked, terminated after the grace period, and the request is admitted
    assert sorted(i["instanceId"] for i in reclaim["instances"]) == sorted(batch)
    assert sorted(terminated_after_grace()) == sorted(batch)
    admitted = delivered_woken(pool, "waiter")
    assert admitted.status is RequestStatus.FULFILLED, admitted.to_detail()
    assert admitted.instances[0].instance_type == "m5.xlarge"
