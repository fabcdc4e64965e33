"""Issue 17, reclaim: a lender whose nominal quota is lent out asks for it back; after its grace
period the sync terminates what its reclaimWithinCohort allows, counted once. And the sync keeps
quota usage (recount) and each quota's status (what `get quotas` reads)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import moto_capacity
from capacity_launcher.adapters import aws, quota_usage
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.quota_reclaims import QuotaReclaims
from capacity_launcher.domain.records.status import (
    INSTANCE_TERMINATED,
    RECLAIM_CLOSED,
    RECLAIM_REQUESTED,
    RequestStatus,
)
from capacity_launcher.service.reconciliation import Reconciliation
from capacity_launcher.settings import get_settings
from capacity_launcher_cli.quota_commands import get_quotas
from tests.integration.test_accounting import deliver, usage
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_quota_admission import passed_over, quota, spare_below, used
from tests.integration.test_quota_status import _Deployment, _listing, _totals
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request

POOL = "general"
GRACE_SECONDS = 120
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


@pytest.fixture
def pool(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> Cloud:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    return cloud


def lender_and_borrower(policy: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """team-a (priority 100) owns 2 instances of nominal quota, all lendable; team-b (priority
    0) owns 1 and may borrow 2 more."""
    team_a = quota(
        "team-a",
        "2",
        priority=100,
        preemption={"reclaimWithinCohort": policy, "gracePeriod": f"{GRACE_SECONDS}s"},
    )
    return team_a, quota("team-b", "1", borrowing="2")


def borrow_all_of_team_a(cloud: Cloud) -> list[str]:
    """team-b runs 3: its own 1, and 2 borrowed from team-a, one request at a time (newest last)."""
    launched = []
    for n in range(3):
        cloud.send(launch_request(f"b-{n}", nodePool=POOL, requester="team-b"))
        record = cloud.record(f"b-{n}")
        assert record is not None and record.status is RequestStatus.FULFILLED, record
        launched += [i.instance_id for i in record.instances]
        moto_capacity.advance_clock(5)  # each counted later than the one before
    assert (used("team-b"), usage()) == (3, 3)
    return launched


def test_a_lender_reclaims_lent_quota_and_the_borrowed_instance_is_terminated_once(
    pool: Cloud,
) -> None:
    # Given team-b borrowing all of team-a's idle quota
    pool.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(pool)
    pool.events()

    # When team-a needs 1 instance of its own nominal quota
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))

    # Then its request fails with QuotaExceeded naming the reclaim it requested
    record = pool.record("a-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [e.code for e in record.errors] == ["QuotaExceeded"]
    message = record.errors[0].message
    assert message.startswith(
        "CapacityQuota team-a: NodePool general, instances: nominal quota is lent out in cohort "
        "research: 1 must be reclaimed first; reclaim reclaim-"
    ), message
    newest = b_instances[-1]
    assert f"requested: {newest} to be released by " in message
    # and Capacity Reclaim Requested names team-b's newest instance, to be terminated after 120 s
    events = pool.events()
    assert sorted(e["detail-type"] for e in events) == [RECLAIM_REQUESTED, "Launch Failed"]
    reclaim = next(e["detail"] for e in events if e["detail-type"] == RECLAIM_REQUESTED)
    assert reclaim["reclaimId"] in message
    assert (reclaim["quota"], reclaim["cohort"], reclaim["nodePool"]) == (
        "team-a",
        "research",
        POOL,
    )
    assert (reclaim["requestId"], reclaim["requester"]) == ("a-1", "team-a")
    assert reclaim["amount"] == [{"name": "instances", "total": "1"}]
    assert (reclaim["reclaimWithinCohort"], reclaim["enforced"]) == ("LowerPriority", True)
    assert [(i["instanceId"], i["requester"], i["quota"]) for i in reclaim["instances"]] == [
        (newest, "team-b", "team-b")
    ]
    assert reclaim["instances"][0]["resources"] == [{"name": "instances", "total": "1"}]
    jsonschema.validate(reclaim, json.loads((SCHEMAS / "reclaim-requested.json").read_text()))

    # When the sync runs within the grace period, nothing is terminated
    report = sync().quotas
    assert report is not None and report.reclaims.pending == [reclaim["reclaimId"]]
    assert len(pool.managed_instances()) == 3

    # When the grace period has passed, the sync terminates the borrowed instance
    moto_capacity.advance_clock(GRACE_SECONDS)
    report = sync().quotas
    assert report is not None
    assert report.reclaims.terminated == [newest]
    assert report.reclaims.closed == {reclaim["reclaimId"]: "terminated"}
    assert sorted(i["InstanceId"] for i in pool.managed_instances()) == sorted(b_instances[:2])
    # and released it from the pool's and team-b's quota usage, with its Instance Terminated
    assert (used("team-b"), usage()) == (2, 2)
    terminated = [e["detail"] for e in pool.events() if e["detail-type"] == INSTANCE_TERMINATED]
    assert [(d["instanceId"], d["state"]) for d in terminated] == [(newest, "shutting-down")]

    # When EC2's own termination events arrive, they are duplicates: counted once
    assert deliver(newest, "shutting-down") == "duplicate"
    assert deliver(newest, "terminated") == "duplicate"
    assert (used("team-b"), usage()) == (2, 2)
    report = sync().quotas  # the next sync finds nothing to repair and no open reclaim
    assert report is not None and report.recounted == [] and report.reclaims.closed == {}
    assert (used("team-b"), usage()) == (2, 2)
    assert pool.events() == []

    # Then team-a's next request is admitted within its nominal quota
    pool.send(launch_request("a-2", nodePool=POOL, requester="team-a"))
    again = pool.record("a-2")
    assert again is not None and again.status is RequestStatus.FULFILLED
    assert (used("team-a"), used("team-b"), usage()) == (1, 2, 3)


def test_a_lender_another_pool_serves_requests_no_reclaim(pool: Cloud) -> None:
    # Given team-b borrowing all of team-a's quota in the heaviest pool, and a lighter pool
    # no quota names
    spare_below(pool)
    pool.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(pool)
    pool.events()
    # When team-a asks for 1 instance naming no pool
    pool.send(launch_request("a-elsewhere", requester="team-a"))
    # Then the lighter pool serves it, passing over the heaviest for its quota
    record = pool.record("a-elsewhere")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare"
    (why,) = passed_over(record)
    assert why.startswith("nodePool general: CapacityQuota team-a: NodePool general, instances: ")
    # and no reclaim is requested: nothing borrowed is taken back
    assert [e["detail-type"] for e in pool.events()] == ["Launch Fulfilled"]
    assert QuotaReclaims(get_settings().state_table_name).get("team-a", POOL) is None
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == []
    assert set(b_instances) <= {i["InstanceId"] for i in pool.managed_instances()}


def test_a_lender_every_pool_refuses_requests_the_reclaim_of_the_first(pool: Cloud) -> None:
    # Given team-a's quota lent out in the heaviest pool, and the lighter pool full
    spare_below(pool, limits={"instances": "1"})
    pool.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(pool)
    pool.send(launch_request("fills-spare", nodePool="spare"))
    pool.events()
    # When team-a asks for 1 instance naming no pool
    pool.send(launch_request("a-nowhere", requester="team-a"))
    # Then it fails in the last pool, naming the first's refusal with the reclaim it requested
    record = pool.record("a-nowhere")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.node_pool == "spare"
    assert [e.code for e in record.errors] == ["NodePoolPassedOver", "LimitExceeded"]
    (why,) = passed_over(record)
    assert why.startswith(
        "nodePool general: CapacityQuota team-a: NodePool general, instances: nominal quota is "
        "lent out in cohort research: 1 must be reclaimed first; reclaim reclaim-"
    ), why
    assert f"requested: {b_instances[-1]} to be released by " in why
    events = pool.events()
    assert sorted(e["detail-type"] for e in events) == [RECLAIM_REQUESTED, "Launch Failed"]
    reclaim = next(e["detail"] for e in events if e["detail-type"] == RECLAIM_REQUESTED)
    assert (reclaim["nodePool"], reclaim["requestId"]) == (POOL, "a-nowhere")
    assert reclaim["reclaimId"] in why


def test_a_reclaim_released_by_its_borrower_closes_without_terminating(pool: Cloud) -> None:
    pool.apply(*lender_and_borrower("Any"))
    b_instances = borrow_all_of_team_a(pool)
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    reclaim = next(e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED)
    # A second refusal of the same lender does not reclaim again: it names the open reclaim
    pool.send(launch_request("a-2", nodePool=POOL, requester="team-a"))
    second = pool.record("a-2")
    assert second is not None
    assert second.errors[0].message.endswith(
        f"; reclaim {reclaim['reclaimId']} (requested by a-1) is open"
    )
    assert [e["detail-type"] for e in pool.events()] == ["Launch Failed"]
    # When team-b releases the named instance itself
    named = reclaim["instances"][0]["instanceId"]
    pool.ec2.terminate_instances(InstanceIds=[named])
    assert deliver(named, "terminated") == "released"
    # Then the sync closes the reclaim and terminates nothing more
    report = sync().quotas
    assert report is not None and report.reclaims.closed == {reclaim["reclaimId"]: "released"}
    moto_capacity.advance_clock(GRACE_SECONDS)
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == []
    remaining = sorted(i["InstanceId"] for i in pool.managed_instances())
    assert remaining == sorted(set(b_instances) - {named})
    assert (used("team-b"), usage()) == (2, 2)


def test_never_asks_the_borrowers_and_terminates_nothing(pool: Cloud) -> None:
    pool.apply(*lender_and_borrower("Never"))
    borrow_all_of_team_a(pool)
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    record = pool.record("a-1")
    assert record is not None
    assert "(not terminated: reclaimWithinCohort Never does not allow it)" in (
        record.errors[0].message
    )
    reclaim = next(e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED)
    assert reclaim["enforced"] is False
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    report = sync().quotas
    assert report is not None and report.reclaims.closed == {reclaim["reclaimId"]: "expired"}
    assert report.reclaims.terminated == []
    assert len(pool.managed_instances()) == 3
    assert QuotaReclaims(get_settings().state_table_name).get("team-a", POOL) is None


def test_the_sync_recounts_quota_usage_and_stores_the_status_get_quotas_shows(
    pool: Cloud, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given team-b running 3 (2 borrowed), and its quota usage item written wrong by hand
    pool.apply(*lender_and_borrower("LowerPriority"))
    borrow_all_of_team_a(pool)
    db = aws.client("dynamodb")
    table = get_settings().state_table_name
    pk = quota_usage.quota_usage_pk("research", POOL)
    db.update_item(
        TableName=table,
        Key={"pk": {"S": pk}, "sk": {"S": "Usage"}},
        UpdateExpression="SET #u = :wrong",
        ExpressionAttributeNames={"#u": "u:instances:team-b"},
        ExpressionAttributeValues={":wrong": {"N": "7"}},
    )
    assert used("team-b") == 7
    # When the sync runs
    report = sync().quotas
    # Then it recounts it from the pool's members, and stores every quota's status
    assert report is not None and report.recounted == [pk]
    assert used("team-b") == 3
    assert report.statuses == ["team-a", "team-b"]
    args = argparse.Namespace(resource="quotas", output="json", names=[])
    assert get_quotas(args, _Deployment(table)) == 0  # type: ignore[arg-type]
    team_a, team_b = _listing(capsys)
    assert _totals(team_b["status"], "usage") == {"instances": "3"}
    assert _totals(team_b["status"], "borrowed") == {"instances": "2"}
    assert _totals(team_a["status"], "lent") == {"instances": "2"}
    assert _totals(team_a["status"], "allocatable") == {"instances": "0"}
    assert team_a["status"]["observedAt"] == team_b["status"]["observedAt"] is not None
    sufficient = {c["type"]: c for c in team_a["status"]["conditions"]}["ResourcesSufficient"]
    assert (sufficient["status"], sufficient["reason"]) == ("False", "QuotaExhausted")
    assert json.loads(json.dumps(team_b["status"]["associationUsages"])) == [
        {"name": "team-b", "usage": [{"name": POOL, "resources": [
            {"name": "instances", "total": "3"}]}]}
    ]  # fmt: skip


def test_an_instance_adopted_by_reconciliation_counts_for_its_quota(pool: Cloud) -> None:
    # Given an instance of team-b whose lease was lost before it settled: counted for the pool
    # only (as reconciliation counts what no lease explains)
    pool.apply(*lender_and_borrower("LowerPriority"))
    pool.send(launch_request("b-0", nodePool=POOL, requester="team-b"))
    record = pool.record("b-0")
    assert record is not None and record.launched == 1
    instance_id = record.instances[0].instance_id
    store = PoolMemberStore(get_settings().state_table_name, clock=time.time)
    member = store.member(POOL, instance_id)
    assert member is not None and store.uncount(member)
    assert store.count(POOL, instance_id, member.amount)  # no requester: the pool's only
    assert (used("team-b"), usage()) == (0, 1)
    # When the sync runs, reconciliation counts it for team-b's quota too, once
    sync()
    assert (used("team-b"), usage()) == (1, 1)
    sync()
    assert (used("team-b"), usage()) == (1, 1)


def test_a_quota_moved_to_another_cohort_takes_its_running_instances_along(pool: Cloud) -> None:
    # Given team-b running 1 instance in cohort research
    pool.apply(quota("team-b", "2"))
    pool.send(launch_request("b-0", nodePool=POOL, requester="team-b"))
    assert used("team-b") == 1
    # When its quota moves to cohort "other" and the sync runs
    moved = quota("team-b", "2")
    moved["spec"]["cohort"] = "other"
    pool.apply(moved)
    sync()
    # Then the instance counts in the new cohort's usage, and no longer in the old one's
    table = get_settings().state_table_name
    other = quota_usage.quota_usage_pk("other", POOL)
    _, found = quota_usage.read(aws.client("dynamodb"), table, other, POOL)
    assert found[("team-b", POOL)].instances == 1
    assert used("team-b") == 0
    assert usage() == 1


def test_a_quota_deleted_then_applied_again_drops_then_counts_its_running_instances(
    pool: Cloud,
) -> None:
    # Given team-b running 1 instance under its quota, beside team-a's quota in the cohort
    pool.apply(quota("team-a", "2"), quota("team-b", "2"))
    pool.send(launch_request("b-0", nodePool=POOL, requester="team-b"))
    assert used("team-b") == 1
    # When its quota is deleted (an apply after it fails) and the sync runs
    pool.delete("CapacityQuota", "team-b")
    sync()
    # Then no quota covers it: its instance holds none, and still counts for the pool
    assert (used("team-b"), usage()) == (0, 1)
    # When the quota is applied again and the sync runs
    pool.apply(quota("team-b", "2"))
    sync()
    # Then the instance counts for it again, once
    assert (used("team-b"), usage()) == (1, 1)
    sync()
    assert (used("team-b"), usage()) == (1, 1)


def test_two_lenders_never_reclaim_the_same_instance(pool: Cloud) -> None:
    # Given team-b (nominal 1) borrowing 1 from team-a and 1 from team-c
    lender = {"priority": 100, "preemption": {"reclaimWithinCohort": "Any"}}
    pool.apply(
        quota("team-a", "1", **lender),
        quota("team-c", "1", **lender),
        quota("team-b", "1", borrowing="2"),
    )
    _, middle, newest = borrow_all_of_team_a(pool)  # the oldest is within its nominal quota
    # When both lenders need their quota back
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    pool.send(launch_request("c-1", nodePool=POOL, requester="team-c"))
    reclaims = [e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED]
    # Then each names a different instance of team-b's borrowed two, never its own nominal one
    named = {r["quota"]: [i["instanceId"] for i in r["instances"]] for r in reclaims}
    assert named == {"team-a": [newest], "team-c": [middle]}


def test_an_instance_its_owner_no_longer_borrows_is_not_terminated(pool: Cloud) -> None:
    # Given team-b (nominal 1) running 2, one borrowed from team-a, and team-a reclaiming it
    lender = {"priority": 100, "preemption": {"reclaimWithinCohort": "Any", "gracePeriod": "60s"}}
    pool.apply(quota("team-a", "1", **lender), quota("team-b", "1", borrowing="1"))
    launched = []
    for n in range(2):
        pool.send(launch_request(f"b-{n}", nodePool=POOL, requester="team-b"))
        record = pool.record(f"b-{n}")
        assert record is not None and record.launched == 1
        launched += [i.instance_id for i in record.instances]
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    reclaim = next(e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED)
    assert [i["instanceId"] for i in reclaim["instances"]] == [launched[1]]
    # When team-b releases its other instance instead (it no longer borrows)
    pool.ec2.terminate_instances(InstanceIds=[launched[0]])
    assert deliver(launched[0], "terminated") == "released"
    # Then after the grace period the named one, now within team-b's nominal quota, stays
    moto_capacity.advance_clock(61)
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == []
    assert report.reclaims.closed == {reclaim["reclaimId"]: "released"}
    assert [i["InstanceId"] for i in pool.managed_instances()] == [launched[1]]
    assert (used("team-b"), usage()) == (1, 1)


def test_a_reclaim_whose_event_could_not_be_published_is_published_by_the_retry(
    pool: Cloud,
) -> None:
    # Given team-b borrowing all of team-a's idle quota, and EventBridge refusing the next put
    pool.apply(*lender_and_borrower("LowerPriority"))
    borrow_all_of_team_a(pool)
    pool.events()
    moto_capacity.inject_fault("events:PutEvents", "AccessDeniedException", times=1)
    # When team-a's refused request asks for the reclaim
    request = launch_request("a-1", nodePool=POOL, requester="team-a")
    assert len(pool.send(request)) == 1
    # Then the delivery is handed back: no outcome is recorded or published without the reclaim's
    assert pool.record("a-1") is None
    assert pool.events() == []
    # When the message comes back
    assert pool.send(request) == []
    # Then the request fails naming the reclaim, and the reclaim's event is published with it
    record = pool.record("a-1")
    assert record is not None and record.status is RequestStatus.FAILED
    events = pool.events()
    assert sorted(e["detail-type"] for e in events) == [RECLAIM_REQUESTED, "Launch Failed"]
    reclaim = next(e["detail"] for e in events if e["detail-type"] == RECLAIM_REQUESTED)
    assert reclaim["reclaimId"] in record.errors[0].message
    # and the sync enforces that one reclaim (opened by the first delivery, not a second)
    report = sync().quotas
    assert report is not None and report.reclaims.pending == [reclaim["reclaimId"]]


# -- issue 24, defect 4: an enforced reclaim is decided again, with the quotas and usage of the
# moment it would terminate, not those of the moment it was requested.


def enforced_reclaim_of_team_b(cloud: Cloud) -> tuple[dict[str, Any], list[str]]:
    """team-a (priority 100, LowerPriority) has an enforced reclaim open on team-b's newest
    instance; the grace period has not passed yet."""
    cloud.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(cloud)
    cloud.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    reclaim = next(e["detail"] for e in cloud.events() if e["detail-type"] == RECLAIM_REQUESTED)
    assert reclaim["enforced"] is True
    assert [i["instanceId"] for i in reclaim["instances"]] == [b_instances[-1]]
    return reclaim, b_instances


def closed_events(cloud: Cloud) -> list[dict[str, Any]]:
    return [e["detail"] for e in cloud.events() if e["detail-type"] == RECLAIM_CLOSED]


def assert_withdrawn(
    cloud: Cloud, report: Any, reclaim: dict[str, Any], b_instances: list[str], reason: str
) -> None:
    """Nothing terminated, the reclaim closed as withdrawn, and its Capacity Reclaim Closed
    event says why, naming the instance it spared."""
    assert report is not None and report.reclaims.terminated == []
    assert report.reclaims.closed == {reclaim["reclaimId"]: "withdrawn"}
    assert sorted(i["InstanceId"] for i in cloud.managed_instances()) == sorted(b_instances)
    assert (used("team-b"), usage()) == (3, 3)
    assert QuotaReclaims(get_settings().state_table_name).get("team-a", POOL) is None
    (closed,) = closed_events(cloud)
    jsonschema.validate(closed, json.loads((SCHEMAS / "reclaim-closed.json").read_text()))
    assert (closed["reclaimId"], closed["quota"], closed["nodePool"]) == (
        reclaim["reclaimId"],
        "team-a",
        POOL,
    )
    assert (closed["outcome"], closed["terminated"]) == ("withdrawn", [])
    assert reason in closed["reason"], closed["reason"]
    assert [s["instanceId"] for s in closed["spared"]] == [b_instances[-1]]


def test_a_reclaim_whose_lender_turns_to_never_during_its_grace_terminates_nothing(
    pool: Cloud,
) -> None:
    # Given an enforced reclaim of team-b's newest instance, and a sync container already warm
    reclaim, b_instances = enforced_reclaim_of_team_b(pool)
    warm = pool.adapters().reservation_sync()
    report = warm.run().quotas
    assert report is not None and report.reclaims.pending == [reclaim["reclaimId"]]
    # When team-a's policy becomes Never during the grace period
    team_a, _ = lender_and_borrower("Never")
    pool.apply(team_a)
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    # Then the same sync terminates nothing, and says the reclaim is withdrawn, and why
    assert_withdrawn(
        pool, warm.run().quotas, reclaim, b_instances, "reclaimWithinCohort is Never now"
    )


def test_a_reclaim_whose_borrower_now_outranks_the_lender_terminates_nothing(
    pool: Cloud,
) -> None:
    # Given an enforced LowerPriority reclaim of team-b's newest instance
    reclaim, b_instances = enforced_reclaim_of_team_b(pool)
    # When team-b's priority is raised above team-a's (100) during the grace period
    _, team_b = lender_and_borrower("LowerPriority")
    team_b["spec"]["priority"] = 200
    pool.apply(team_b)
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    # Then the sync terminates nothing, and says why
    assert_withdrawn(
        pool,
        sync().quotas,
        reclaim,
        b_instances,
        "CapacityQuota team-b's priority 200 is not lower than team-a's 100",
    )


def test_a_reclaim_whose_lender_was_deleted_terminates_nothing(pool: Cloud) -> None:
    # Given an enforced reclaim of team-b's newest instance
    reclaim, b_instances = enforced_reclaim_of_team_b(pool)
    # When team-a's quota is deleted during the grace period
    pool.delete("CapacityQuota", "team-a")
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    # Then the sync terminates nothing, and closes the reclaim saying why
    assert_withdrawn(pool, sync().quotas, reclaim, b_instances, "CapacityQuota team-a was deleted")


def test_a_reclaim_still_allowed_after_a_change_is_enforced(pool: Cloud) -> None:
    # Given an enforced LowerPriority reclaim of team-b's newest instance
    reclaim, b_instances = enforced_reclaim_of_team_b(pool)
    # When team-a's policy becomes Any and team-b's priority is raised above team-a's
    team_a, team_b = lender_and_borrower("Any")
    team_b["spec"]["priority"] = 200
    pool.apply(team_a, team_b)
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    # Then the current policy still allows it: the named instance is terminated
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == [b_instances[-1]]
    assert report.reclaims.closed == {reclaim["reclaimId"]: "terminated"}
    (closed,) = closed_events(pool)
    assert (closed["outcome"], closed["terminated"], closed["spared"]) == (
        "terminated",
        [b_instances[-1]],
        [],
    )
    assert (used("team-b"), usage()) == (2, 2)


def test_a_reclaim_is_closed_when_every_quota_was_deleted(pool: Cloud) -> None:
    # Given an enforced reclaim of team-b's newest instance
    reclaim, b_instances = enforced_reclaim_of_team_b(pool)
    # When every quota is deleted during the grace period
    pool.delete("CapacityQuota", "team-a")
    pool.delete("CapacityQuota", "team-b")
    moto_capacity.advance_clock(GRACE_SECONDS + 1)
    # Then the sync (with no quota left) still finds the reclaim, terminates nothing, closes it
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == []
    assert report.reclaims.closed == {reclaim["reclaimId"]: "withdrawn"}
    assert sorted(i["InstanceId"] for i in pool.managed_instances()) == sorted(b_instances)
    (closed,) = closed_events(pool)
    assert closed["reason"] == "CapacityQuota team-a was deleted"
    # and the next sync finds nothing open
    report = sync().quotas
    assert report is not None and report.reclaims.closed == {} and closed_events(pool) == []


# -- issue 27, item 2: an instance already gone fails a whole TerminateInstances call; under the
# tag-scoped policy EC2 answers UnauthorizedOperation, which is not retried.


def test_an_enforced_reclaim_of_an_instance_already_gone_closes_instead_of_staying_pending(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the role's tag-scoped policy, and reconciliation not uncounting gone instances (its
    # uncount lost a race, say), so quota usage still counts one
    monkeypatch.setattr(Reconciliation, "_uncount_gone", lambda *_, **__: None)
    moto_capacity.set_termination_scope("capacity-launcher:managed", "true")
    pool.apply(*lender_and_borrower("LowerPriority"))
    b_instances = borrow_all_of_team_a(pool)
    newest = b_instances[-1]
    # and team-b's newest instance terminated, its events lost, and forgotten by EC2 an hour on
    pool.ec2.terminate_instances(InstanceIds=[newest])
    moto_capacity.advance_clock(3601)
    # and an enforced reclaim naming it, its grace period over
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    reclaim = next(e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED)
    assert [i["instanceId"] for i in reclaim["instances"]] == [newest]
    moto_capacity.advance_clock(GRACE_SECONDS)

    # When the sync enforces the reclaim
    report = sync().quotas

    # Then it closes (nothing was left to terminate) instead of staying pending for ever
    assert report is not None
    assert report.reclaims.pending == []
    assert report.reclaims.closed == {reclaim["reclaimId"]: "terminated"}
    assert sorted(i["InstanceId"] for i in pool.managed_instances()) == sorted(b_instances[:2])
