"""Issue 37, preemption by a waiting request: a request that waits for its own nominal quota,
lent out to a lower-priority team of its cohort, asks for it back through the reclaim path
(docs/quotas.md, Reclaim) as a refused request does; after the lender's grace period the sync
terminates what its reclaimWithinCohort allows, and the wake that follows admits the waiter.
Default (reclaimWithinCohort Never): the reclaim is only asked, nothing is terminated."""

from __future__ import annotations

import moto_capacity
from capacity_launcher.domain.records.status import RECLAIM_REQUESTED, RequestStatus
from tests.integration.test_queue_for_room import queue, record_of, until
from tests.integration.test_quota_admission import used
from tests.integration.test_quota_reclaim import (
    GRACE_SECONDS,
    POOL,
    borrow_all_of_team_a,
    lender_and_borrower,
    pool,
)
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request

__all__ = ["pool"]  # the fixture, shared with the reclaim tests


def wait_as_team_a(cloud: Cloud) -> dict[str, object]:
    """team-a asks for one instance of its own (lent out) quota, willing to wait a day: it waits,
    and returns the reclaim its wait asked for."""
    cloud.send(
        launch_request("a-1", nodePool=POOL, requester="team-a", waitForCapacityUntil=until(days=1))
    )
    waiting = record_of(cloud, "a-1")
    assert waiting.status is RequestStatus.WAITING, waiting.to_detail()
    assert queue() == ["a-1"]
    events = cloud.events()
    assert sorted(e["detail-type"] for e in events) == [RECLAIM_REQUESTED, "Launch Waiting"]
    reclaim: dict[str, object] = next(
        e["detail"] for e in events if e["detail-type"] == RECLAIM_REQUESTED
    )
    # the waiting record's refusal names the reclaim, as a failed request's does
    assert str(reclaim["reclaimId"]) in waiting.errors[0].message
    return reclaim


def test_a_waiting_lender_preempts_the_lower_priority_borrower_and_its_queue_is_woken(
    pool: Cloud,
) -> None:
    # Given team-b (priority 0) borrowing all of team-a's (priority 100, LowerPriority) quota
    pool.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(pool)
    pool.events()
    # When team-a's request waits for its own nominal quota
    reclaim = wait_as_team_a(pool)
    # Then its wait asked for team-b's newest instance back, naming the waiting request
    newest = b_instances[-1]
    assert (reclaim["requestId"], reclaim["requester"], reclaim["enforced"]) == (
        "a-1",
        "team-a",
        True,
    )
    assert [i["instanceId"] for i in reclaim["instances"]] == [newest]  # type: ignore[attr-defined]
    assert len(pool.managed_instances()) == 3
    # When the grace period has passed, the sync terminates the borrowed instance and its
    # minute wakes the queue's head (the woken request is admitted as any woken head is:
    # tests/integration/test_queue_for_room.py)
    moto_capacity.advance_clock(GRACE_SECONDS)
    synced = sync()
    assert synced.quotas is not None and synced.quotas.reclaims.terminated == [newest]
    assert synced.woken == ["a-1"]
    assert sorted(i["InstanceId"] for i in pool.managed_instances()) == sorted(b_instances[:2])
    # Then team-b is back within its nominal quota plus what it still borrows, and team-a's
    # nominal quota is idle for the woken request
    assert (used("team-a"), used("team-b")) == (0, 2)


def test_by_default_a_waiting_lender_only_asks_and_nothing_is_terminated(pool: Cloud) -> None:
    # Given team-a's policy Never (the default): no preemption
    pool.apply(*lender_and_borrower("Never"))
    b_instances = borrow_all_of_team_a(pool)
    pool.events()
    # When team-a's request waits for its quota
    reclaim = wait_as_team_a(pool)
    # Then the reclaim is only asked, and the sync past the grace period terminates nothing
    assert reclaim["enforced"] is False
    moto_capacity.advance_clock(GRACE_SECONDS * 2)
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == []
    assert sorted(i["InstanceId"] for i in pool.managed_instances()) == sorted(b_instances)
    pool.deliver_queued()
    assert record_of(pool, "a-1").status is RequestStatus.WAITING
