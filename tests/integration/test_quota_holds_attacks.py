"""Attacks on the members' hold after an apply (docs/quotas.md, "Members held after an apply"):
no cohort ever runs more than its nominal quotas and what it may borrow, and a quota applied
governs at once, whatever an apply changes under instances that already run (a quota moved to
another cohort, a group over two pools, an apply or another launcher racing the hold; leases in
flight: test_quota_holds_in_flight.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws, quota_usage
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from local_cloud.documents import capacity_quota
from tests.integration.test_launch_into_reservations import (
    ZONE,
    setup_pool,
)
from tests.integration.test_quota_admission import (
    POOL,
    SPARE,
    group_budget,
    pool,
    quota,
    spare_below,
    used,
)
from tests.integration.test_quota_applies_govern import warm
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room

__all__ = ["pool"]  # the fixture


def counted(cohort: str, requester: str, flavor: str = POOL) -> int:
    """The instances cohort `cohort`'s quota usage item of `flavor` counts for `requester`."""
    pk = quota_usage.quota_usage_pk(cohort, flavor)
    db, table = aws.client("dynamodb"), get_settings().state_table_name
    _, found = quota_usage.read(db, table, pk, flavor)
    return found.get((requester, flavor), Resources.ZERO).instances


def refused(cloud: Cloud, request_id: str) -> None:
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.FAILED, record
    assert [e.code for e in record.errors] == ["QuotaExceeded"]


def fulfilled(cloud: Cloud, request_id: str) -> None:
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.FULFILLED, record


def ask(cloud: Cloud, request_id: str, count: int, *, pool: str = POOL, **kwargs: Any) -> None:
    request = launch_request(
        request_id, nodePool=pool, count=count, minCount=count, requester="team-a", **kwargs
    )
    cloud.send(request)


def test_a_quota_moved_to_another_cohort_counts_its_running_instance_there_at_once(
    pool: Cloud,
) -> None:
    # Given team-a running one instance under its quota in cohort research, a warm launcher
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    warm(pool, "in-research")
    assert counted("research", "team-a") == 1
    # When team-a's quota of 2 moves to cohort vision, alone there, and team-a asks at once for
    # a gang of 2 (vision's nominal quotas sum to 2: it would run 3)
    pool.apply(capacity_quota("team-a", POOL, {"instances": "2"}, cohort="vision"))
    ask(pool, "gang-in-vision", 2)
    # Then the instance team-a runs counts in vision at once: the gang is refused
    refused(pool, "gang-in-vision")
    assert (counted("vision", "team-a"), counted("research", "team-a")) == (1, 0)
    # and one more is admitted beside it, then none
    ask(pool, "one-in-vision", 1)
    fulfilled(pool, "one-in-vision")
    ask(pool, "over-in-vision", 1)
    refused(pool, "over-in-vision")
    assert counted("vision", "team-a") == 2


def test_an_admission_in_the_cohort_a_quota_left_no_longer_counts_its_instance(
    pool: Cloud,
) -> None:
    # Given team-a running 2 instances in cohort research (nominal 2 + 2), team-b borrowing none
    pool.apply(quota("team-a", "2"), quota("team-b", "2", borrowing="2"))
    warm(pool, "a-1")
    ask(pool, "a-2", 1)
    fulfilled(pool, "a-2")
    # When team-a's quota moves to cohort vision, and team-b asks at once for 2 in research
    pool.apply(capacity_quota("team-a", POOL, {"instances": "2"}, cohort="vision"))
    pool.send(launch_request("b-1", nodePool=POOL, count=2, minCount=2, requester="team-b"))
    # Then team-b is admitted within its own nominal quota, and team-a counts in vision
    fulfilled(pool, "b-1")
    assert (counted("research", "team-b"), counted("research", "team-a")) == (2, 0)
    assert counted("vision", "team-a") == 2
    # and research (now nominal 2) admits no more: team-b may borrow none, nobody lends
    pool.send(launch_request("b-2", nodePool=POOL, count=1, minCount=1, requester="team-b"))
    refused(pool, "b-2")


def test_a_group_over_two_pools_applied_counts_the_other_pools_instances_at_once(
    pool: Cloud,
) -> None:
    # Given team-a running 2 instances in spare, which no quota names, and a quota on general
    spare_below(pool, limits={"instances": "10"})
    pool.apply(quota("team-a", "4"))
    pool.send(launch_request("spare-2", nodePool=SPARE, count=2, requester="team-a"))
    fulfilled(pool, "spare-2")
    warm(pool, "general-1")
    # When team-a's quota becomes a group over general and spare, at most 3 across them, and
    # team-a asks at once for 1 more in general (general's members are held: its note is
    # current after this apply only if the apply did not name it, spare's never were)
    pool.apply(group_budget("3", POOL, SPARE))
    ask(pool, "general-2", 1)
    # Then the 2 in spare count at once: 1 + 2 + 1 would overrun 3
    refused(pool, "general-2")
    assert (counted("research", "team-a", SPARE), counted("research", "team-a")) == (2, 1)


def test_a_group_deleted_and_applied_again_counts_both_pools_at_once(pool: Cloud) -> None:
    # Given team-a running 2 in spare and 1 in general under its group of at most 4
    spare_below(pool, limits={"instances": "10"})
    pool.apply(group_budget("4", POOL, SPARE))
    pool.send(launch_request("spare-2", nodePool=SPARE, count=2, requester="team-a"))
    fulfilled(pool, "spare-2")
    warm(pool, "general-1")
    # and the group deleted, the sync run since: they count for their pools only
    pool.delete("CapacityQuota", "team-a")
    sync()
    assert (counted("research", "team-a", SPARE), counted("research", "team-a")) == (0, 0)
    # When it is applied again, and team-a asks at once for 2 in general (3 + 2 > 4)
    pool.apply(group_budget("4", POOL, SPARE))
    ask(pool, "general-2", 2)
    # Then both pools' instances count at once: refused, and 1 more admitted
    refused(pool, "general-2")
    assert (counted("research", "team-a", SPARE), counted("research", "team-a")) == (2, 1)
    ask(pool, "general-3", 1)
    fulfilled(pool, "general-3")
    ask(pool, "spare-3", 1, pool=SPARE)
    refused(pool, "spare-3")


def test_a_quota_deleted_its_first_admission_after_drops_the_holds(pool: Cloud) -> None:
    # Given team-a running 1 under its quota beside team-b's quota of 2, in research
    pool.apply(quota("team-a", "1"), quota("team-b", "2"))
    warm(pool, "a-held")
    # When team-a's quota is deleted (no sync), and team-b asks at once for 2
    pool.delete("CapacityQuota", "team-a")
    pool.send(launch_request("b-2", nodePool=POOL, count=2, minCount=2, requester="team-b"))
    # Then team-b is admitted, team-a's instance no longer counts in research
    fulfilled(pool, "b-2")
    assert (used("team-a"), used("team-b")) == (0, 2)
    # and team-a, which no quota covers in a pool quotas name, is refused
    ask(pool, "a-uncovered", 1)
    refused(pool, "a-uncovered")


def moved_to_vision_after(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch, owner: type, method: str
) -> list[bool]:
    """The first call of `owner.method` is followed at once by team-a's quota of 2 moving to
    cohort vision (alone there); the list says whether it moved."""
    original = getattr(owner, method)
    moved: list[bool] = []

    def then_move(self: Any, *args: Any, **kwargs: Any) -> Any:
        done = original(self, *args, **kwargs)
        if not moved:
            moved.append(True)
            pool.apply(capacity_quota("team-a", POOL, {"instances": "2"}, cohort="vision"))
        return done

    monkeypatch.setattr(owner, method, then_move)
    return moved


def noted_calls() -> list[str]:
    """Every DynamoDB call made from now on, by operation; the Query of a pool's members (with
    its open leases: the live range, `Lease#` to `Member#`) and the note of a pool's members
    held told apart. The unavailable offerings' Scan is left out: its copy
    expires by the clock, not by what a request does (adapters/unavailable_offerings.py)."""
    calls: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        values = [v.get("S") for v in params.get("ExpressionAttributeValues", {}).values()]
        updates = [i.get("Update", {}) for i in params.get("TransactItems", [])] + [params]
        if model.name == "Query" and ("Member#" in values or "Lease#" in values):
            calls.append("Query members")
        elif any(
            "membersHeldAt" in u.get("ExpressionAttributeNames", {}).values() for u in updates
        ):
            calls.append("note held")
        elif model.name != "Scan":
            calls.append(model.name)

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    return calls


def test_only_the_first_request_after_an_apply_pays_for_holding_the_members(pool: Cloud) -> None:
    # Given a warm launcher serving team-a under its quota, and the DynamoDB calls of each
    # request noted (the members' Query and the note of them held told apart)
    pool.apply(quota("team-a", "5"), quota("team-b", "2"))
    warm(pool, "warm-1")
    calls = noted_calls()
    ask(pool, "warm-2", 1)
    before = sorted(calls)
    # When team-b's quota is applied again with another nominal (an apply naming the pool), and
    # team-a asks twice
    pool.apply(quota("team-b", "3"))
    calls.clear()
    ask(pool, "first-after", 1)
    first = list(calls)
    calls.clear()
    ask(pool, "second-after", 1)
    second = sorted(calls)
    fulfilled(pool, "first-after")
    fulfilled(pool, "second-after")
    # Then the first one held the members once (one Query of them, one note) and the second
    # one costs what a request cost before the apply
    assert (first.count("Query members"), first.count("note held")) == (1, 1), first
    assert second == before, (second, before)


ONE = Resources(cpu=2, memory_mib=8192, gpu=0, instances=1)  # what an m5.large is counted for


def reapplied_over_a_running_instance(cloud: Cloud, nominal: str = "2") -> None:
    """team-a running one instance, its quota deleted, the sync run since (the instance
    counted for its pool only), and its quota of `nominal` applied again: the pool's note is
    behind."""
    cloud.apply(quota("team-a", "2"), quota("team-b", "2"))
    warm(cloud, "running")
    cloud.delete("CapacityQuota", "team-a")
    sync()
    assert used("team-a") == 0
    cloud.apply(quota("team-a", nominal))


def store() -> PoolLeaseStore:
    """A launcher's lease store with its own copy of the quotas."""
    table = get_settings().state_table_name
    return PoolLeaseStore(
        table, 900, quotas=ConfigStore(table, clock=system_clock), clock=time.time
    )


def test_an_apply_between_the_hold_and_the_lease_is_held_again(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's quota of 3 applied again over its running instance
    reapplied_over_a_running_instance(pool, "3")
    moved = moved_to_vision_after(pool, monkeypatch, PoolLeaseStore, "hold_members")
    # When team-a asks for a gang of 2 (research's quota of 3 holds it), and its quota of 2
    # moves to cohort vision (alone there) after the admission held the members in research,
    # before its lease is written
    ask(pool, "gang", 2)
    # Then the lease fails on the pool's quota generation, the members are held again in
    # vision, and the gang (3 where vision's nominal quotas sum to 2) is refused
    assert moved == [True]
    refused(pool, "gang")
    assert (counted("vision", "team-a"), counted("research", "team-a")) == (1, 0)
    # and one more is admitted in vision, then none
    ask(pool, "one", 1)
    fulfilled(pool, "one")
    ask(pool, "over", 1)
    refused(pool, "over")


def test_two_launchers_racing_the_hold_admit_no_more_than_the_quota(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's quota of 2 applied again over its running instance, and two launchers
    reapplied_over_a_running_instance(pool)
    first, second = store(), store()
    original = PoolLeaseStore.hold_members
    raced: list[int] = []

    def race_then_hold(self: PoolLeaseStore, pool_name: str, quotas: Any) -> bool:
        if self is first and not raced:
            raced.append(reserve_room(second, POOL, "lease-second", ONE, 1, 1, None, "team-a"))
        return original(self, pool_name, quotas)

    monkeypatch.setattr(PoolLeaseStore, "hold_members", race_then_hold)
    # When the first launcher's admission of 2 for team-a starts holding the members, and the
    # second launcher's admission of 1 holds them and is written first
    with pytest.raises(QuotaExceeded):
        reserve_room(first, POOL, "lease-first", ONE, 2, 2, None, "team-a")
    # Then the second is admitted (1 running + 1), the first refused: team-a holds its 2
    assert raced == [1]
    assert used("team-a") == 2


def test_a_count_decided_on_an_older_copy_counts_where_the_quota_is_now(pool: Cloud) -> None:
    # Given team-a running one instance in research, and a reconciliation's store whose copy
    # of the quotas is read then (kept 10 minutes)
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    warm(pool, "counted-once")
    table = get_settings().state_table_name
    copy = ConfigStore(table, cache_seconds=600, clock=system_clock)
    copy.quota_set()
    members = PoolMemberStore(table, clock=time.time, quotas=copy)
    (member,) = members.members(POOL)
    # When team-a's quota moves to cohort vision, and the store, which finds the instance
    # uncounted, counts it again on its older copy
    pool.apply(capacity_quota("team-a", POOL, {"instances": "2"}, cohort="vision"))
    assert members.uncount(member)
    assert members.count(POOL, member.instance_id, member.amount, requester="team-a")
    # Then it is counted where team-a's quota is now, not in the cohort its copy says
    assert (counted("vision", "team-a"), counted("research", "team-a")) == (1, 0)


def test_a_pool_no_quota_names_never_holds_its_members(pool: Cloud) -> None:
    # Given quotas on general only, and spare, which no quota names, serving team-a
    spare_below(pool, limits={"instances": "10"})
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    pool.send(launch_request("spare-1", nodePool=SPARE, count=1, requester="team-a"))
    fulfilled(pool, "spare-1")
    calls = noted_calls()
    # When a quota naming general is applied, and team-a asks in spare
    pool.apply(quota("team-b", "3"))
    pool.send(launch_request("spare-2", nodePool=SPARE, count=3, requester="team-a"))
    # Then it is admitted (no quota governs it there) without holding any pool's members
    fulfilled(pool, "spare-2")
    assert "Query members" not in calls and "note held" not in calls, calls


def test_more_than_a_hundred_members_are_held_with_their_recorded_requesters(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given team-a running 101 instances under its quota of 102, the quota deleted, and the
    # sync run since: every member counted for its pool only (its requester in its instance
    # record alone)
    setup_pool(pool, subnets, image, capacity_types=("on-demand",), limits={"instances": "200"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 200)
    pool.apply(quota("team-a", "102"), quota("team-b", "1"))
    pool.send(launch_request("many", nodePool=POOL, count=101, requester="team-a"))
    fulfilled(pool, "many")
    pool.delete("CapacityQuota", "team-a")
    sync()
    assert used("team-a") == 0
    # When the quota is applied again, and team-a asks at once for a gang of 2 (103 > 102)
    pool.apply(quota("team-a", "102"))
    ask(pool, "gang", 2)
    # Then all 101 count at once (two BatchGetItem pages of instance records): refused, and
    # one more admitted
    refused(pool, "gang")
    assert used("team-a") == 101
    ask(pool, "last", 1)
    fulfilled(pool, "last")
    assert used("team-a") == 102


def test_an_apply_in_the_middle_of_the_hold_is_held_again(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's quota of 3 applied again over its running instance
    reapplied_over_a_running_instance(pool, "3")
    moved = moved_to_vision_after(pool, monkeypatch, PoolMemberStore, "hold")
    # When team-a asks for a gang of 2, and its quota of 2 moves to cohort vision (alone there)
    # after the admission held the member in research, before it notes the pool held
    ask(pool, "gang", 2)
    # Then the note fails on the pool's quota generation, the member is held again in vision,
    # and the gang (3 where vision's nominal quotas sum to 2) is refused
    assert moved == [True]
    refused(pool, "gang")
    assert (counted("vision", "team-a"), counted("research", "team-a")) == (1, 0)


def test_quotas_applied_again_unchanged_hold_no_members(pool: Cloud) -> None:
    # Given a warm launcher serving team-a under its quota, its pool's members held
    pool.apply(quota("team-a", "5"), quota("team-b", "2"))
    warm(pool, "warm-1")
    ask(pool, "warm-2", 1)
    calls = noted_calls()
    # When a GitOps loop applies the same quotas again, and team-a asks
    pool.apply(quota("team-a", "5"), quota("team-b", "2"))
    ask(pool, "after-same", 1)
    # Then the apply bumped nothing: no member is held again, nothing noted
    fulfilled(pool, "after-same")
    assert "Query members" not in calls and "note held" not in calls, calls


def test_a_sync_container_run_again_does_not_undo_the_admissions_hold(pool: Cloud) -> None:
    # Given team-a running one instance in research, and a sync container that has run once
    # (it reads the quotas again on its next run: an older copy's hold is
    # test_a_hold_decided_on_an_older_copy_of_the_quotas_changes_nothing's, and a count's
    # test_a_count_decided_on_an_older_copy_counts_where_the_quota_is_now)
    pool.apply(quota("team-a", "3"), quota("team-b", "2"))
    warm(pool, "running")
    older = pool.adapters().reservation_sync()
    older.run()
    # When team-a's quota of 2 moves to cohort vision, an admission holds the member there
    # (its gang of 2 refused: 3 where vision's nominal quotas sum to 2), and the sync container
    # runs again
    pool.apply(capacity_quota("team-a", POOL, {"instances": "2"}, cohort="vision"))
    ask(pool, "gang", 2)
    refused(pool, "gang")
    older.run()
    # Then the member still counts in vision, and vision admits one more, then none
    assert (counted("vision", "team-a"), counted("research", "team-a")) == (1, 0)
    ask(pool, "one", 1)
    fulfilled(pool, "one")
    ask(pool, "over", 1)
    refused(pool, "over")
