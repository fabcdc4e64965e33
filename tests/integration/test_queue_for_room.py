"""Issue 37, queue, don't refuse: a request that sets `waitForCapacityUntil` and meets its quota,
its pool's limits or dry capacity waits in its pool's admission queue (status Waiting, a Launch
Waiting event, `waitingFor` naming what it waits for) and is woken by room appearing (an instance
of the pool ending, the sync's minute), never by polling; at its deadline it ends Failed with the
reason it waited for. Without the field nothing changes.

Everything runs on the emulator's clock: the held copy (the deadline backstop) comes back when the
test advances the clock past its delay; a wake's copy is visible at once.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.admission_queue import AdmissionQueueItems
from capacity_launcher.domain.accounting.admission_queue import NOT_ADMITTED_BY_DEADLINE
from capacity_launcher.domain.apis.priority_classes import parse_priority_class
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.settings import get_settings
from local_cloud.documents import capacity_quota
from moto_capacity.core.clock import CLOCK
from tests.integration.test_accounting import deliver
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_reservation_sync import sync
from tests.integration.test_wait_for_scheduled_capacity import detail_types, stamp
from tests.support.cloud import Cloud, launch_request

POOL = "general"


@pytest.fixture
def pool(cloud: Cloud, subnets: dict[str, str], image: str) -> Cloud:
    """An on-demand pool of at most 2 instances, with room in EC2 for many more."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    return cloud


def until(**delta: float) -> str:
    return stamp(CLOCK.now() + timedelta(**delta))


def record_of(cloud: Cloud, request_id: str) -> RequestRecord:
    record = cloud.record(request_id)
    assert record is not None, request_id
    return record


def queue() -> list[str]:
    """The request ids in the pool's admission queue, in order (the whole partition: a test's
    look, never the service's)."""
    items = AdmissionQueueItems(get_settings().state_table_name, aws.client("dynamodb"))
    return [e.request_id for e in items.head(POOL, limit=100)]


def end(cloud: Cloud, record: RequestRecord, at: int = 0) -> None:
    """One of the request's instances terminates: EC2 says so, and the event is delivered."""
    gone = record.instances[at].instance_id
    cloud.ec2.terminate_instances(InstanceIds=[gone])
    assert deliver(gone, "terminated") == "released"


def test_a_request_at_its_pools_limits_waits_and_is_admitted_when_an_instance_ends(
    pool: Cloud,
) -> None:
    # Given a pool full to its limits
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    full = record_of(pool, "fill")
    assert full.launched == 2
    pool.events()
    # When a request that may wait a day asks for one more
    assert (
        pool.send(launch_request("waiter", nodePool=POOL, waitForCapacityUntil=until(days=1))) == []
    )
    # Then it waits (not Failed): Waiting, naming the pool's limits, in the pool's queue
    waiting = record_of(pool, "waiter")
    assert waiting.status is RequestStatus.WAITING, waiting.to_detail()
    assert [(a.kind, a.node_pool) for a in waiting.waiting_for] == [("Limit", POOL)]
    assert "limits" in (waiting.waiting_for[0].reason or "")
    assert detail_types(pool, "waiter") == ["Launch Waiting"]
    assert queue() == ["waiter"]
    assert pool.queued() == 1  # its held copy: the deadline backstop
    # When one of the pool's instances terminates (the event is what wakes the queue's head)
    end(pool, full)
    # Then the head's message is sent again at once and, delivered, it is admitted
    assert pool.deliver_queued() == ["waiter"]
    done = record_of(pool, "waiter")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert done.waiting_for == []
    assert detail_types(pool, "waiter") == ["Launch Fulfilled"]
    assert queue() == []


def test_a_request_over_its_quota_waits_and_is_admitted_when_another_teams_instance_ends(
    pool: Cloud,
) -> None:
    # Given two teams of one cohort in a larger pool; team-a may borrow one instance
    borrow = {"instances": "1"}
    pool.apply(
        capacity_quota("team-a", POOL, {"instances": "1"}, borrowing=borrow),
        capacity_quota("team-b", POOL, {"instances": "1"}),
    )
    pool.send(launch_request("a-1", nodePool=POOL, requester="team-a"))
    pool.send(launch_request("b-1", nodePool=POOL, requester="team-b"))
    theirs = record_of(pool, "b-1")
    assert theirs.launched == 1 and record_of(pool, "a-1").launched == 1
    pool.events()
    # When team-a asks for one more, willing to wait: the cohort has nothing idle to lend
    wait = launch_request(
        "a-2", nodePool=POOL, requester="team-a", waitForCapacityUntil=until(days=1)
    )
    pool.send(wait)
    # Then it waits for its quota, naming the quota, the resource and how much more it needs
    waiting = record_of(pool, "a-2")
    assert waiting.status is RequestStatus.WAITING, waiting.to_detail()
    [awaited] = waiting.waiting_for
    assert (awaited.kind, awaited.quota, awaited.resource, awaited.needed) == (
        "Quota", "team-a", "instances", "1"
    )  # fmt: skip
    assert [e.code for e in waiting.errors] == ["QuotaExceeded"]
    # When team-b's instance terminates, its idle quota may be lent again
    end(pool, theirs)
    assert pool.deliver_queued() == ["a-2"]
    # Then team-a's request is admitted (borrowing), and leaves the queue
    done = record_of(pool, "a-2")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert queue() == []


def test_a_waiting_request_ends_failed_at_its_deadline_with_the_reason_it_waited_for(
    pool: Cloud,
) -> None:
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    pool.events()
    pool.send(launch_request("late", nodePool=POOL, waitForCapacityUntil=until(minutes=10)))
    assert record_of(pool, "late").status is RequestStatus.WAITING
    # When the deadline passes with no room made, the held copy comes back at the deadline
    moto_capacity.advance_clock(11 * 60)
    assert pool.deliver_queued() == ["late"]
    # Then it ends Failed: the refusal it waited out, and why it ends now
    failed = record_of(pool, "late")
    assert failed.status is RequestStatus.FAILED, failed.to_detail()
    assert [e.code for e in failed.errors] == ["LimitExceeded", NOT_ADMITTED_BY_DEADLINE]
    assert "limits of general" in failed.errors[-1].message
    assert failed.waiting_for == [] and failed.launched == 0
    assert detail_types(pool, "late") == ["Launch Waiting", "Launch Failed"]
    assert queue() == []
    assert pool.queued() == 0


def test_without_the_field_a_request_at_the_limits_fails_at_once_as_before(pool: Cloud) -> None:
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    pool.events()
    pool.send(launch_request("now", nodePool=POOL))
    failed = record_of(pool, "now")
    assert failed.status is RequestStatus.FAILED
    assert [e.code for e in failed.errors] == ["LimitExceeded"]
    assert detail_types(pool, "now") == ["Launch Failed"]
    assert queue() == [] and pool.queued() == 0


def test_a_head_that_cannot_fit_does_not_block_a_smaller_request_behind_it(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    cloud.send(launch_request("fill", nodePool=POOL, count=3))
    full = record_of(cloud, "fill")
    # Given a large gang at the head of the queue and a single instance behind it
    deadline = until(days=1)
    cloud.send(
        launch_request("big", nodePool=POOL, count=2, minCount=2, waitForCapacityUntil=deadline)
    )
    moto_capacity.advance_clock(1)
    cloud.send(launch_request("small", nodePool=POOL, waitForCapacityUntil=deadline))
    assert queue() == ["big", "small"]
    # When one instance ends (room for one: not for the head)
    end(cloud, full)
    # Then the head is woken and refused again, and passes the wake to the one behind it
    assert cloud.deliver_queued() == ["big"]
    assert record_of(cloud, "big").status is RequestStatus.WAITING
    assert cloud.deliver_queued() == ["small"]
    assert record_of(cloud, "small").status is RequestStatus.FULFILLED
    # And the head keeps its place, for the next room
    assert queue() == ["big"]


def test_the_syncs_minute_wakes_a_queue_whose_room_came_without_an_event(pool: Cloud) -> None:
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    full = record_of(pool, "fill")
    pool.send(launch_request("waiter", nodePool=POOL, waitForCapacityUntil=until(days=1)))
    assert record_of(pool, "waiter").status is RequestStatus.WAITING
    # Given room made without an event the service sees (an instance gone, its event lost)
    pool.ec2.terminate_instances(InstanceIds=[full.instances[0].instance_id])
    pool.wait_out_consistency()
    assert pool.deliver_queued() == []  # nothing woke the queue yet
    # When the sync runs its minute (reconciliation releases the instance, then the queues)
    sync()
    # Then the queue's head was woken, and is admitted
    assert pool.deliver_queued() == ["waiter"]
    assert record_of(pool, "waiter").status is RequestStatus.FULFILLED


def apply_class(cloud: Cloud, name: str, value: int) -> None:
    """A PriorityClass applied through the service's configuration, as `apply` does."""
    document = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    cloud.adapters().configuration().apply(parse_priority_class(document))


def test_waiting_requests_are_admitted_by_priority_then_arrival(pool: Cloud) -> None:
    apply_class(pool, "batch", 10)
    apply_class(pool, "urgent", 1000)
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    full = record_of(pool, "fill")
    deadline = until(days=1)
    # Given three waiting requests: two of the lower class, then one of the higher, arriving last
    for request_id, klass in (("batch-1", "batch"), ("batch-2", "batch"), ("urgent", "urgent")):
        moto_capacity.advance_clock(1)
        pool.send(
            launch_request(
                request_id, nodePool=POOL, priorityClassName=klass, waitForCapacityUntil=deadline
            )
        )
        assert record_of(pool, request_id).status is RequestStatus.WAITING
    # Then the queue holds them by priority, then arrival
    assert queue() == ["urgent", "batch-1", "batch-2"]
    # When one instance ends, the higher priority is admitted, though it came last
    end(pool, full)
    assert pool.deliver_queued() == ["urgent"]
    assert record_of(pool, "urgent").status is RequestStatus.FULFILLED
    # And the woken head, admitted, wakes the next: refused (no room left), it keeps its place
    assert pool.deliver_queued() == ["batch-1"]
    assert record_of(pool, "batch-1").status is RequestStatus.WAITING
    assert queue() == ["batch-1", "batch-2"]


def test_a_request_naming_an_unknown_priority_class_is_rejected_naming_the_field(
    pool: Cloud,
) -> None:
    pool.send(launch_request("who", nodePool=POOL, priorityClassName="nonesuch"))
    record = record_of(pool, "who")
    assert record.status is RequestStatus.REJECTED
    [error] = record.errors
    assert error.code == "UnknownPriorityClass"
    assert error.message.startswith("priorityClassName: no PriorityClass named 'nonesuch'")
    assert pool.managed_instances() == []


def test_a_pool_applied_with_more_room_wakes_its_queue(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    cloud.send(launch_request("fill", nodePool=POOL))
    cloud.send(launch_request("waiter", nodePool=POOL, waitForCapacityUntil=until(days=1)))
    assert record_of(cloud, "waiter").status is RequestStatus.WAITING
    # When the pool is applied with room for one more
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    # Then its queue's head is woken at once, and admitted
    assert cloud.deliver_queued() == ["waiter"]
    assert record_of(cloud, "waiter").status is RequestStatus.FULFILLED


def test_get_queues_lists_each_pools_waiting_requests_with_their_positions(
    pool: Cloud, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue's pending workloads per queue: positions from the head, what each waits for, read
    now; a pool that is not applied is NotFound, as kubectl says it."""
    import argparse

    from capacity_launcher_cli.request_commands import get_queues
    from tests.integration.test_quota_status import _Deployment, _listing

    apply_class(pool, "urgent", 1000)
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    deadline = until(hours=2)
    for request_id, klass in (("late-1", None), ("late-2", None), ("first", "urgent")):
        moto_capacity.advance_clock(1)
        extra = {"priorityClassName": klass} if klass else {}
        body = launch_request(request_id, nodePool=POOL, waitForCapacityUntil=deadline, **extra)
        pool.send(body)
    deployment = _Deployment(pool.names.state_table)

    args = argparse.Namespace(resource="queues", output="json", names=[])
    assert get_queues(args, deployment) == 0  # type: ignore[arg-type]
    listed = _listing(capsys)

    assert [(q["position"], q["requestId"], q["priority"]) for q in listed] == [
        (1, "first", 1000),
        (2, "late-1", 0),
        (3, "late-2", 0),
    ]
    assert {q["nodePool"] for q in listed} == {POOL}
    assert [w["kind"] for w in listed[0]["waitingFor"]] == ["Limit"]
    # And a dry run of one more says it would wait in that queue, behind how many
    from capacity_launcher.domain.launch_request import LaunchRequest

    dry_run = pool.adapters().dry_run()
    plain = LaunchRequest(requestId="next", nodePool=POOL, count=1, waitForCapacityUntil=deadline)
    urgent = plain.model_copy(update={"priority_class_name": "urgent"})
    would = dry_run(plain).to_dict()["wouldWait"]
    assert {k: would[k] for k in ("nodePool", "priority", "behind")} == {
        "nodePool": POOL,
        "priority": 0,
        "behind": 3,
    }
    assert would["until"][:19] == deadline[:19]
    assert dry_run(urgent).to_dict()["wouldWait"]["behind"] == 1  # behind "first" alone
    alone = LaunchRequest(requestId="no-wait", nodePool=POOL, count=1)
    assert dry_run(alone).to_dict()["wouldWait"] is None
    table = argparse.Namespace(
        resource="queues", output="table", names=[POOL], ignore_not_found=False
    )
    assert get_queues(table, deployment) == 0  # type: ignore[arg-type]
    shown = capsys.readouterr().out
    assert "POSITION" in shown and "first" in shown and "general" in shown
    missing = argparse.Namespace(
        resource="queues", output="json", names=["nonesuch"], ignore_not_found=False
    )
    assert get_queues(missing, deployment) == 1  # type: ignore[arg-type]
    assert "nonesuch" in capsys.readouterr().err


def test_a_held_copy_and_a_wake_copy_in_one_batch_admit_the_request(pool: Cloud) -> None:
    """The wake hands the wait to the copy it sends; the held copy, come back at its delay in the
    same batch, holds the request's claim first and is dropped as 'already waiting'. The wake's
    copy must carry the wait in that batch, not go back to the queue behind the claim for the
    queue's whole visibility timeout (the request then stayed Waiting after room appeared)."""
    pool.send(launch_request("fill", nodePool=POOL, count=2))
    full = record_of(pool, "fill")
    pool.send(launch_request("waiter", nodePool=POOL, waitForCapacityUntil=until(days=1)))
    assert record_of(pool, "waiter").status is RequestStatus.WAITING
    # Given the held copy's delay (15 minutes at most) has passed: it is visible again
    moto_capacity.advance_clock(15 * 60 + 1)
    # When an instance ends, the wake sends the waiter's message again before any delivery
    end(pool, full)
    # Then both copies come in one batch (the held copy first), and the request is admitted
    assert pool.deliver_queued() == ["waiter", "waiter"]
    done = record_of(pool, "waiter")
    assert done.status is RequestStatus.FULFILLED, done.to_detail()
    assert detail_types(pool, "waiter") == ["Launch Waiting", "Launch Fulfilled"]
    assert queue() == []
    assert pool.queued() == 0  # neither copy is left in flight
