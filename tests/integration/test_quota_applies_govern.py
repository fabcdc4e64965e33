"""Issue 24, defect 2: a CapacityQuota applied (or deleted) just before a request governs it, on
a warm launcher whose copy of the configuration is younger than its cache lifetime. The lease
conditions on the quotas' generation its decision used; a refusal is confirmed on the stored
quotas."""

from __future__ import annotations

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.domain.records.status import RECLAIM_REQUESTED, RequestStatus
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from tests.integration.test_quota_admission import POOL, pool, quota, used
from tests.integration.test_quota_reclaim import borrow_all_of_team_a, lender_and_borrower
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request

__all__ = ["pool"]  # the fixture


def warm(cloud: Cloud, request_id: str) -> None:
    """The launcher serves one request, so its copy of the configuration is loaded now (its
    cache lives 10 s: every step below happens within it)."""
    cloud.send(launch_request(request_id, nodePool=POOL, requester="team-a"))
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.FULFILLED, record


def test_a_quota_applied_just_before_a_request_governs_it(pool: Cloud) -> None:
    # Given a warm launcher that has seen no quota
    warm(pool, "before-quota")
    # When team-a's quota of 2 is applied, and team-a asks at once for a gang of 2 more
    pool.apply(quota("team-a", "2"))
    pool.send(launch_request("gang", nodePool=POOL, count=2, minCount=2, requester="team-a"))
    # Then its quota counts the instance team-a launched before it at once (its first admission
    # in the pool holds the pool's members, docs/quotas.md): the gang would take team-a to 3
    gang = pool.record("gang")
    assert gang is not None and gang.status is RequestStatus.FAILED, gang
    assert [e.code for e in gang.errors] == ["QuotaExceeded"]
    # and one more is admitted, and counted with the one before it
    pool.send(launch_request("after-quota", nodePool=POOL, count=1, minCount=1, requester="team-a"))
    record = pool.record("after-quota")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert used("team-a") == 2
    # and a requester the quota does not cover is refused in the pool, as is one more for team-a
    pool.send(launch_request("stranger", nodePool=POOL, requester="team-z"))
    refused = pool.record("stranger")
    assert refused is not None and refused.status is RequestStatus.FAILED, refused
    assert [e.code for e in refused.errors] == ["QuotaExceeded"]
    pool.send(launch_request("over", nodePool=POOL, count=1, minCount=1, requester="team-a"))
    over = pool.record("over")
    assert over is not None and over.status is RequestStatus.FAILED, over
    assert [e.code for e in over.errors] == ["QuotaExceeded"]


def test_a_quota_deleted_then_applied_again_counts_what_its_team_runs_at_once(pool: Cloud) -> None:
    # Given team-a running one instance under its quota of 2, beside team-b in the cohort
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    warm(pool, "first")
    assert used("team-a") == 1
    # and its quota deleted, and the sync run since: the instance counts for its pool only
    pool.delete("CapacityQuota", "team-a")
    sync()
    assert used("team-a") == 0
    # When the quota is applied again, and team-a asks at once for a gang of 2 more (soak
    # seed 1, step 2156: admitted, and the cohort ran 8 where its nominal quotas sum to 7)
    pool.apply(quota("team-a", "2"))
    pool.send(launch_request("gang-again", nodePool=POOL, count=2, minCount=2, requester="team-a"))
    # Then the instance it runs counts under its quota at once: the gang is refused
    gang = pool.record("gang-again")
    assert gang is not None and gang.status is RequestStatus.FAILED, gang
    assert [e.code for e in gang.errors] == ["QuotaExceeded"]
    assert used("team-a") == 1
    # and one more is admitted beside it
    pool.send(launch_request("one-again", nodePool=POOL, count=1, minCount=1, requester="team-a"))
    record = pool.record("one-again")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert used("team-a") == 2


def test_a_quota_deleted_just_before_a_request_no_longer_governs_it(pool: Cloud) -> None:
    # Given team-a's quota of 1, used up, seen by a warm launcher
    pool.apply(quota("team-a", "1"))
    warm(pool, "within-quota")
    # When the quota is deleted, and team-a asks at once for 2 more
    pool.delete("CapacityQuota", "team-a")
    pool.send(launch_request("no-quota", nodePool=POOL, count=2, minCount=2, requester="team-a"))
    # Then nothing governs it but the pool's limits: admitted
    record = pool.record("no-quota")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.launched == 2


def test_a_reclaim_policy_changed_just_before_a_refusal_is_the_one_its_reclaim_uses(
    pool: Cloud,
) -> None:
    # Given team-b borrowing all of team-a's idle quota, team-a reclaiming LowerPriority, as a
    # warm launcher has seen them
    pool.apply(*lender_and_borrower("LowerPriority"))
    borrow_all_of_team_a(pool)
    # When team-a's policy is set to Never, and team-a asks at once for its own quota
    team_a, _ = lender_and_borrower("Never")
    pool.apply(team_a)
    pool.events()
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    # Then the reclaim it asks for follows Never: asked, not enforced
    record = pool.record("a-1")
    assert record is not None and record.status is RequestStatus.FAILED, record
    reclaim = next(e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED)
    assert (reclaim["reclaimWithinCohort"], reclaim["enforced"]) == ("Never", False)


def test_a_hold_decided_on_an_older_copy_of_the_quotas_changes_nothing(pool: Cloud) -> None:
    # Given team-a running one instance under its quota, the quota deleted, and a sync's store
    # whose copy of the quotas is read then (kept 10 minutes): it would drop the member's hold
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    warm(pool, "held-once")
    pool.delete("CapacityQuota", "team-a")
    table = get_settings().state_table_name
    copy = ConfigStore(table, cache_seconds=600, clock=system_clock)
    copy.quota_set()
    members = PoolMemberStore(table, clock=system_clock, quotas=copy)
    (member,) = members.members(POOL)
    # When the quota is applied again, and the store drops the hold on its older copy
    pool.apply(quota("team-a", "2"))
    dropped = members.hold(member, "team-a")
    # Then the drop fails on the pool's quota generation: the member still counts for team-a
    assert dropped is False
    assert members.member(POOL, member.instance_id) == member
    assert used("team-a") == 1
    # and decided on the stored quotas, there is nothing to move
    assert members.hold(member, "team-a", copy.quota_set(fresh=True)) is False
    assert used("team-a") == 1
