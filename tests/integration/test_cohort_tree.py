"""Hierarchical cohorts served (issue 37): Kueue's Cohort documents applied beside the quotas, on
the local cloud. A quota's borrowing reaches past its cohort to its parent's, within each level's
limits; a cohort naming a parent not applied yet is accepted and borrows only within itself until
the parent arrives; every admission through the tree conditions its write on every cohort's usage
item of the tree, so a launch in a sibling cohort between its read and its write cannot overrun.

The tree (one pool, `general`, instances only):

    org (root)
    ├── vision: team-a (nominal 1, borrows), team-b (nominal 1)
    └── speech: team-c (nominal 2)
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws, quota_usage
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigConflict, QuotaExceeded
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import (
    RECLAIM_REQUESTED,
    RequestRecord,
    RequestStatus,
)
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from local_cloud.documents import capacity_quota
from moto_capacity.core.clock import CLOCK
from tests.integration.test_accounting import deliver
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_quota_admission import racing
from tests.integration.test_reservation_sync import sync
from tests.integration.test_wait_for_scheduled_capacity import stamp
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room

POOL = "general"
ONE = Resources(cpu=2, memory_mib=8192, gpu=0, instances=1)  # what an m5.large is counted for


def cohort(
    name: str,
    parent: str | None = None,
    *,
    borrowing: str | None = None,
    lending: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if borrowing is not None or lending is not None:
        term: dict[str, Any] = {"name": "instances", "nominalQuota": "0"}
        if borrowing is not None:
            term["borrowingLimit"] = borrowing
        if lending is not None:
            term["lendingLimit"] = lending
        spec["resourceGroups"] = [
            {"coveredResources": ["instances"], "flavors": [{"name": POOL, "resources": [term]}]}
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def apply(cloud: Cloud, document: dict[str, Any]) -> list[str]:
    """Apply one document as `capacity-launcher apply` does; returns what it waits for."""
    applied = REGISTRY.read(document).conversion
    waiting = cloud.adapters().configuration().apply(applied.hub, applied.kept or None)
    return [f"{w.field}: {w.rule}" for w in waiting]


def quotas(cloud: Cloud) -> None:
    cloud.apply(
        capacity_quota("team-a", POOL, {"instances": "1"}, cohort="vision", allowBorrowing=True),
        capacity_quota("team-b", POOL, {"instances": "1"}, cohort="vision"),
        capacity_quota("team-c", POOL, {"instances": "2"}, cohort="speech"),
    )


def used(cohort_name: str, requester: str) -> int:
    pk = quota_usage.quota_usage_pk(cohort_name, POOL)
    _, found = quota_usage.read(aws.client("dynamodb"), get_settings().state_table_name, pk, POOL)
    return found.get((requester, POOL), Resources.ZERO).instances


def record_of(cloud: Cloud, request_id: str) -> RequestRecord:
    record = cloud.record(request_id)
    assert record is not None, request_id
    return record


def gang(request_id: str, requester: str, count: int, **extra: Any) -> dict[str, Any]:
    return launch_request(
        request_id, nodePool=POOL, requester=requester, count=count, minCount=count, **extra
    )


@pytest.fixture
def pool(cloud: Cloud, subnets: dict[str, str], image: str) -> Cloud:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    quotas(cloud)
    return cloud


def test_a_quota_borrows_from_its_parent_cohort_within_its_limits(pool: Cloud) -> None:
    # Given the tree: vision holds 2, speech lends its 2 up to org
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org")):
        assert apply(pool, document) == []
    # When team-a asks for 4 at once: 2 from its own cohort, 2 through org from speech
    pool.send(gang("a-4", "team-a", 4))
    # Then it is admitted (flat, vision alone could not: 2)
    record = record_of(pool, "a-4")
    assert record.status is RequestStatus.FULFILLED, record.to_detail()
    assert used("vision", "team-a") == 4
    # and nothing is left anywhere in the tree: team-c's own nominal quota is lent out
    pool.send(gang("a-1", "team-a", 1))
    refused = record_of(pool, "a-1")
    assert refused.status is RequestStatus.FAILED
    assert [e.code for e in refused.errors] == ["QuotaExceeded"]
    assert "cohort vision and the cohorts above it" in refused.errors[0].message


def test_a_cohorts_borrowing_limit_refuses_at_the_parents_level(pool: Cloud) -> None:
    # Given vision may borrow at most 1 from above
    for document in (
        cohort("org"),
        cohort("vision", "org", borrowing="1"),
        cohort("speech", "org"),
    ):
        apply(pool, document)
    # When team-a asks for 4: 2 of vision's own, and 2 more from above, over vision's limit
    pool.send(gang("a-4", "team-a", 4))
    # Then it fails naming the quota, the pool and the resource, launching nothing
    refused = record_of(pool, "a-4")
    assert refused.status is RequestStatus.FAILED, refused.to_detail()
    [error] = refused.errors
    assert error.code == "QuotaExceeded"
    assert error.message.startswith("CapacityQuota team-a: NodePool general, instances: short by 1")
    assert pool.managed_instances() == []
    # While 3 (one from above) is admitted
    pool.send(gang("a-3", "team-a", 3))
    assert record_of(pool, "a-3").status is RequestStatus.FULFILLED


def test_a_request_waits_at_the_parents_limit_and_is_admitted_when_the_tree_has_room(
    pool: Cloud,
) -> None:
    # Given the tree, and team-c running its 2 in speech
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org")):
        apply(pool, document)
    pool.send(gang("c-2", "team-c", 2))
    theirs = record_of(pool, "c-2")
    assert theirs.launched == 2
    # When team-a asks for 3, willing to wait: vision has 2, nothing comes from above
    until = stamp(CLOCK.now() + timedelta(days=1))
    pool.send(gang("a-3", "team-a", 3, waitForCapacityUntil=until))
    # Then it waits for its quota, needing 1 more
    waiting = record_of(pool, "a-3")
    assert waiting.status is RequestStatus.WAITING, waiting.to_detail()
    [awaited] = waiting.waiting_for
    assert (awaited.kind, awaited.quota, awaited.needed) == ("Quota", "team-a", "1")
    # When one of team-c's instances ends, speech lends it up through org
    gone = theirs.instances[0].instance_id
    pool.ec2.terminate_instances(InstanceIds=[gone])
    assert deliver(gone, "terminated") == "released"
    assert pool.deliver_queued() == ["a-3"]
    # Then team-a's request is admitted through the tree
    done = record_of(pool, "a-3")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert (used("vision", "team-a"), used("speech", "team-c")) == (3, 1)


def test_a_cohorts_lending_limit_keeps_the_rest_for_its_own_members(pool: Cloud) -> None:
    # Given speech lends at most 1 of its 2 outside itself
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org", lending="1")):
        apply(pool, document)
    # When team-a asks for 4: vision's 2, and 2 from speech, which lends only 1
    # Then 3 is admitted, and team-c still has the 1 speech kept for itself
    three_of_four(pool)


def three_of_four(pool: Cloud) -> None:
    """team-a's 4 is refused, its 3 admitted, and team-c's 1 after it: one of speech's 2 is
    kept from team-a by a limit of the tree."""
    pool.send(gang("a-4", "team-a", 4))
    assert record_of(pool, "a-4").status is RequestStatus.FAILED
    pool.send(gang("a-3", "team-a", 3))
    assert record_of(pool, "a-3").status is RequestStatus.FULFILLED
    pool.send(gang("c-1", "team-c", 1))
    assert record_of(pool, "c-1").status is RequestStatus.FULFILLED
    assert (used("vision", "team-a"), used("speech", "team-c")) == (3, 1)


def test_cohorts_apply_in_any_order_and_a_child_joins_the_tree_when_its_parent_arrives(
    pool: Cloud,
) -> None:
    asked = pool.adapters().queries()
    # When the children are applied before their parent
    assert apply(pool, cohort("vision", "org")) == [
        "spec.parentName: Cohort org is not applied yet; vision borrows only within itself "
        "until it is"
    ]
    apply(pool, cohort("speech", "org"))
    # Then each is stored, not ready, saying why
    _, statuses = asked.cohort_statuses()
    [ready] = statuses["vision"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "ParentNotFound")
    assert statuses["vision"]["memberQuotas"] == ["team-a", "team-b"]
    # and vision borrows only within itself: 3 is refused
    pool.send(gang("a-3", "team-a", 3))
    assert record_of(pool, "a-3").status is RequestStatus.FAILED
    # When the parent arrives
    assert apply(pool, cohort("org")) == []
    _, statuses = asked.cohort_statuses()
    assert statuses["vision"]["conditions"][0]["status"] == "True"
    assert statuses["org"]["childCohorts"] == ["speech", "vision"]
    # Then the tree is active at once: 3 is admitted, one of them through org from speech
    pool.send(gang("a-3b", "team-a", 3))
    assert record_of(pool, "a-3b").status is RequestStatus.FULFILLED


def test_a_three_level_tree_applied_bottom_up_borrows_through_every_level(pool: Cloud) -> None:
    # Given company <- org <- vision (team-a, team-b), and speech (team-c) under company,
    # applied leaves first, the root last
    asked = pool.adapters().queries()
    assert apply(pool, cohort("vision", "org")) == [
        "spec.parentName: Cohort org is not applied yet; vision borrows only within itself "
        "until it is"
    ]
    assert len(apply(pool, cohort("speech", "company"))) == 1
    assert len(apply(pool, cohort("org", "company"))) == 1
    # Then org's subtree stands alone until its parent arrives: vision's 2, nothing from speech
    _, statuses = asked.cohort_statuses()
    assert statuses["vision"]["conditions"][0]["status"] == "True"
    assert statuses["org"]["conditions"][0]["reason"] == "ParentNotFound"
    pool.send(gang("a-3", "team-a", 3))
    assert record_of(pool, "a-3").status is RequestStatus.FAILED
    # When the root arrives
    assert apply(pool, cohort("company")) == []
    _, statuses = asked.cohort_statuses()
    assert {name: s["conditions"][0]["status"] for name, s in statuses.items()} == {
        "company": "True",
        "org": "True",
        "speech": "True",
        "vision": "True",
    }
    assert statuses["company"]["childCohorts"] == ["org", "speech"]
    # Then team-a borrows speech's 2 up through org and company and down again: 4 in all
    pool.send(gang("a-4", "team-a", 4))
    done = record_of(pool, "a-4")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert used("vision", "team-a") == 4
    # and nothing is left anywhere in the tree
    pool.send(gang("c-1", "team-c", 1))
    assert record_of(pool, "c-1").status is RequestStatus.FAILED


def test_a_middle_cohorts_borrowing_limit_holds_two_levels_below_it(pool: Cloud) -> None:
    # Given company <- org (borrows at most 1 from above) <- vision; speech under company
    for document in (
        cohort("company"),
        cohort("org", "company", borrowing="1"),
        cohort("vision", "org"),
        cohort("speech", "company"),
    ):
        apply(pool, document)
    # When team-a asks for 4: vision's 2, and 2 from speech, past org's limit of 1
    # Then 3 is admitted, and team-c keeps the one org could not take
    three_of_four(pool)


def lent_across_the_tree(pool: Cloud) -> list[str]:
    """company <- org <- vision (team-a borrows), speech (team-c, 2, reclaims from lower
    priorities after 60 s) under company, and team-a holding speech's 2 through the tree: its
    instances."""
    for document in (
        cohort("company"),
        cohort("org", "company"),
        cohort("vision", "org"),
        cohort("speech", "company"),
    ):
        apply(pool, document)
    pool.apply(
        capacity_quota(
            "team-c",
            POOL,
            {"instances": "2"},
            cohort="speech",
            priority=100,
            preemption={"reclaimWithinCohort": "LowerPriority", "gracePeriod": "60s"},
        )
    )
    pool.send(gang("a-4", "team-a", 4))
    theirs = [i.instance_id for i in record_of(pool, "a-4").instances]
    assert used("vision", "team-a") == 4
    pool.events()
    return theirs


def test_a_lender_reclaims_its_quota_from_a_borrower_in_another_branch(pool: Cloud) -> None:
    # Given team-a holding team-c's quota, two cohorts away
    theirs = lent_across_the_tree(pool)
    # When team-c asks for 1 of its own nominal quota
    pool.send(gang("c-1", "team-c", 1))
    # Then it fails naming the reclaim it asked for across the tree
    refused = record_of(pool, "c-1")
    assert refused.status is RequestStatus.FAILED
    message = refused.errors[0].message
    lent = "nominal quota is lent out in the tree of cohort speech: 1 must be reclaimed first; "
    assert lent + "reclaim reclaim-" in message, message
    # and Capacity Reclaim Requested names one of team-a's instances, two cohorts away
    events = pool.events()
    [reclaim] = [e["detail"] for e in events if e["detail-type"] == RECLAIM_REQUESTED]
    assert (reclaim["quota"], reclaim["cohort"], reclaim["enforced"]) == ("team-c", "speech", True)
    [named] = reclaim["instances"]
    assert (named["requester"], named["quota"]) == ("team-a", "team-a")
    assert named["instanceId"] in theirs
    # When the grace period has passed, the sync terminates it
    moto_capacity.advance_clock(61)
    report = sync().quotas
    assert report is not None and report.reclaims.terminated == [named["instanceId"]]
    assert used("vision", "team-a") == 3
    # Then team-c's next request is admitted within its nominal quota
    pool.send(gang("c-1b", "team-c", 1))
    assert record_of(pool, "c-1b").status is RequestStatus.FULFILLED


def test_a_waiting_lender_asks_across_the_tree_and_is_admitted_once_it_is_back(
    pool: Cloud,
) -> None:
    # Given team-a holding team-c's quota, two cohorts away
    theirs = lent_across_the_tree(pool)
    # When team-c asks for 1 of its own, willing to wait
    until = stamp(CLOCK.now() + timedelta(days=1))
    pool.send(gang("c-1", "team-c", 1, waitForCapacityUntil=until))
    # Then it waits, and the reclaim it asked for names it and one of team-a's instances
    assert record_of(pool, "c-1").status is RequestStatus.WAITING
    [reclaim] = [e["detail"] for e in pool.events() if e["detail-type"] == RECLAIM_REQUESTED]
    assert (reclaim["requestId"], reclaim["enforced"]) == ("c-1", True)
    assert [i["quota"] for i in reclaim["instances"]] == ["team-a"]
    assert reclaim["instances"][0]["instanceId"] in theirs
    # When the grace period has passed, the sync terminates it and its minute wakes the queue
    # (the released instance's own wake may deliver it once more: a woken request is admitted
    # once, as any: tests/integration/test_queue_for_room.py)
    moto_capacity.advance_clock(61)
    synced = sync()
    assert synced.quotas is not None and synced.quotas.reclaims.terminated == [
        reclaim["instances"][0]["instanceId"]
    ]
    assert synced.woken == ["c-1"]
    assert set(pool.deliver_queued()) == {"c-1"}
    # Then team-c's request is admitted into its own quota, back from the other branch
    done = record_of(pool, "c-1")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert (used("vision", "team-a"), used("speech", "team-c")) == (3, 1)


def test_a_cycle_of_parents_is_refused_at_apply_naming_the_field(pool: Cloud) -> None:
    apply(pool, cohort("vision", "org"))
    with pytest.raises(ConfigConflict, match=r"spec\.parentName: makes a cycle of parents"):
        apply(pool, cohort("org", "vision"))
    assert [c.name for c in pool.adapters().queries().config.cohorts().cohorts()] == ["vision"]


def test_a_launch_in_a_sibling_cohort_between_read_and_write_cannot_overrun_the_tree(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the tree, 4 instances in all: team-a may take 4 through org, team-c has 2
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org")):
        apply(pool, document)
    settings = get_settings()
    config = ConfigStore(settings.state_table_name, clock=system_clock)

    def store() -> PoolLeaseStore:
        return PoolLeaseStore(settings.state_table_name, 900, quotas=config, clock=time.time)

    limits = store().stored_limits(POOL)
    # When team-c's admission of its 2 (in speech) is written after team-a's admission of 4
    # read the tree's usage, before team-a's write
    raced = racing(
        monkeypatch,
        lambda: reserve_room(store(), POOL, "lease-c", ONE, 2, 2, limits, "team-c"),
    )
    # Then team-a's write fails on speech's usage item, it decides again and is refused
    with pytest.raises(QuotaExceeded):
        reserve_room(store(), POOL, "lease-a", ONE, 4, 4, limits, "team-a")
    assert raced == [2]
    # and the tree runs no more than its quotas
    assert (used("vision", "team-a"), used("speech", "team-c")) == (0, 2)


def test_a_cohort_apply_governs_the_leases_decided_before_it(pool: Cloud) -> None:
    # Given the tree, and a launcher that read it (a warm container's copy of the quotas)
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org")):
        apply(pool, document)
    settings = get_settings()
    config = ConfigStore(settings.state_table_name, cache_seconds=600, clock=system_clock)
    assert set(config.quota_set().cohorts) == {"org", "speech", "vision"}
    # When speech is applied again lending nothing (its members keep their quota)
    apply(pool, cohort("speech", "org", lending="0"))
    store = PoolLeaseStore(settings.state_table_name, 900, quotas=config, clock=time.time)
    # Then a lease decided on the copy fails its transaction on the pool's quota generation,
    # is decided again on the stored tree, and is refused: vision has 2
    with pytest.raises(QuotaExceeded):
        reserve_room(store, POOL, "lease-a", ONE, 4, 4, store.stored_limits(POOL), "team-a")
    assert used("vision", "team-a") == 0


def test_a_request_waiting_in_its_cohort_is_woken_when_the_parent_arrives(pool: Cloud) -> None:
    # Given vision applied before its parent (a tree of one), and team-a waiting for a third
    apply(pool, cohort("vision", "org"))
    apply(pool, cohort("speech", "org"))
    until = stamp(CLOCK.now() + timedelta(days=1))
    pool.send(gang("a-3", "team-a", 3, waitForCapacityUntil=until))
    assert record_of(pool, "a-3").status is RequestStatus.WAITING
    # When the parent is applied, the pools of its tree are woken
    apply(pool, cohort("org"))
    assert pool.deliver_queued() == ["a-3"]
    # Then the waiting request is admitted through the tree, without another event
    done = record_of(pool, "a-3")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
