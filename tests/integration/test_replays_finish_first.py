"""A redelivery finishes its predecessor's launch intents in their pool before anything else is
decided for the request: not passed on, not ended, not put to wait before then.

A request naming no pool is leased in `general` and its worker dies after its CreateFleet (EC2
launched its instance) or with its CreateFleet throttled (EC2 launched nothing); `general` then
refuses requests before anything is leased (its limits can never hold one, or its NodeClass names
a subnet EC2 does not know). The redelivery keeps what the intent launched in `general`, under
its lease, settled to it, and its record lists it (it went on to `spare` and launched a second
instance there, the first running in `general` under no record, its lease held for 15 minutes);
an intent that launched nothing leaves the request to the refusal, as any other request, and
its lease given back. A waiting request whose worker died after launching replays its intent
too, instead of launching again."""

from __future__ import annotations

from datetime import timedelta

import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_gpu_reservations import (
    advance_to,
    buy_block,
    reserved_only_pool,
)
from tests.integration.test_launch_into_reservations import (
    ZONE,
    expire_idempotency_claims,
    setup_pool,
)
from tests.integration.test_pool_fallback_leases import (
    first_delivery_with_intent,
    general_usage,
    killed_at,
    leases,
    redeliver,
    refused_by_general,
)
from tests.integration.test_wait_for_scheduled_capacity import stamp
from tests.support.cloud import Cloud, default_security_group, launch_request, node_class
from tests.support.crashes import worker_dies_at

# The launch queue's visibility timeout (template.yaml): a killed delivery's message comes back.
VISIBILITY_SECONDS = 720


def redelivered(cloud: Cloud, request: dict[str, object]) -> None:
    """The request comes back once its message's visibility runs out (EC2 lists what its dead
    worker launched by then)."""
    moto_capacity.advance_clock(VISIBILITY_SECONDS + 1)
    redeliver(cloud, request)


def two_pools(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """`general` (m5.large on-demand, room for 1 instance, NodeClass `standard`), tried first by
    a request naming no pool, and `spare` (c5.large on-demand, NodeClass `other`)."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=("c5.large",),
        pool="spare",
        klass="other",
    )


@pytest.mark.parametrize("how", ["limits", "node class"])
def test_a_replay_its_pool_now_refuses_keeps_what_its_intent_launched_there(
    cloud, subnets, image, monkeypatch, how
):
    # Given a request whose worker leased `general`, wrote its intent, had EC2 launch its
    # instance and died; and `general` refusing requests since
    two_pools(cloud, subnets, image)
    request = first_delivery_with_intent(cloud, monkeypatch, "complete_intent")
    said = refused_by_general(cloud, subnets, image, how)
    # When it is delivered again
    redelivered(cloud, request)
    # Then it keeps the instance its intent launched in `general`, and launches nothing more:
    # its record lists it and says why it got no more there, its lease is settled to it
    record = cloud.record("moved-on")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general", record.to_detail()
    assert any(said in e.message for e in record.errors), record.to_detail()
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    assert running == [i.instance_id for i in record.instances], record.to_detail()
    assert leases() == []
    assert general_usage() == 1


@pytest.mark.parametrize("how", ["limits", "node class"])
def test_a_replay_whose_intent_launched_nothing_is_refused_as_any_request(
    cloud, subnets, image, monkeypatch, how
):
    # Given a request whose worker leased `general` and wrote its intent, whose CreateFleet was
    # throttled (EC2 launched nothing: it went back to the queue); and `general` refusing
    # requests since
    two_pools(cloud, subnets, image)
    request = first_delivery_with_intent(cloud, monkeypatch, "write_intent_then_throttled")
    refused_by_general(cloud, subnets, image, how)
    # When it is delivered again
    redelivered(cloud, request)
    # Then its intent is ended unsent in `general`, which holds nothing for it any more, and
    # `spare` serves it
    record = cloud.record("moved-on")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare", record.to_detail()
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    assert running == [i.instance_id for i in record.instances], record.to_detail()
    assert leases() == []
    assert general_usage() == 0


def test_a_waiting_request_whose_worker_died_after_launching_replays_its_intent(
    cloud, subnets, image, monkeypatch
):
    # Given a request for 1 instance waiting for a Capacity Block (room for 2) that starts later
    block = buy_block(cloud)
    block_id = block["CapacityReservationId"]
    reserved_only_pool(cloud, subnets, image, block_id)
    deadline = stamp(block["StartDate"] + timedelta(hours=2))
    wait = launch_request("r-wait", nodePool="general", waitForCapacityUntil=deadline)
    assert cloud.send(wait) == []
    assert cloud.record("r-wait").status is RequestStatus.WAITING  # type: ignore[union-attr]
    # When the block starts and the held copy's worker has EC2 launch its instance and dies
    # before recording it (its Waiting record stays, beside its intent and its open lease)
    advance_to(block["StartDate"], 1)
    with worker_dies_at(monkeypatch, "complete_intent"):
        cloud.deliver_queued()
    assert len(cloud.managed_instances()) == 1
    # And the held copy comes back once its visibility runs out, after `standard` was applied
    # again with a tag (a launch composed now differs from the one EC2 has under its token)
    target = {"capacityReservationTarget": {"capacityReservationId": block_id}}
    group = default_security_group(cloud.ec2)
    tagged = {"capacityReservationSpec": target, "securityGroupIds": [group], "tags": {"t": "1"}}
    cloud.apply(node_class("standard", [subnets[ZONE]], image, **tagged))
    expire_idempotency_claims(cloud)
    moto_capacity.advance_clock(VISIBILITY_SECONDS + 1)
    assert cloud.deliver_queued(batch=cloud.fresh_batch()) == ["r-wait"]
    # Then its intent is replayed: the request gets the instance launched for it, and EC2 runs
    # no other (its wait's delivery launched afresh, ignoring the intent: EC2 refused the token
    # with other parameters, and the record said Failed, launched 0, beside its instance)
    record = cloud.record("r-wait")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    assert running == [i.instance_id for i in record.instances], record.to_detail()
    assert leases() == []


def pools_of(cloud: Cloud) -> dict[str, str]:
    """Each running instance of ours -> the pool its tags name."""
    return {
        i["InstanceId"]: {t["Key"]: t["Value"] for t in i["Tags"]}["capacity-launcher:node-pool"]
        for i in cloud.managed_instances()
    }


@pytest.mark.parametrize("count", [1, 2])
def test_a_replay_whose_pool_was_deleted_keeps_what_its_intent_launched_there(
    cloud, subnets, image, monkeypatch, count
):
    # Given a request for `count` instances (minCount 1) whose worker leased `general` for the
    # one instance it has room for, had EC2 launch it and died; and `general` deleted since
    two_pools(cloud, subnets, image)
    request = killed_at(cloud, monkeypatch, "complete_intent", count=count, minCount=1)
    cloud.delete("NodePool", "general")
    # When it is delivered again (it now resolves to `spare`)
    redelivered(cloud, request)
    # Then the instance launched in `general` stays counted there, under its lease settled to it,
    # and the record names it; only what it did not launch is asked of `spare`, under attempt
    # numbers of its own (with count 1 the record said Failed, launched 0, beside its instance,
    # and the lease held `general`'s limits until it expired; with count 2 `spare`'s launch
    # reused the intent's ClientToken, which EC2 refused)
    record = cloud.record("moved-on")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == ("general" if count == 1 else "spare"), record.to_detail()
    running = pools_of(cloud)
    [in_general] = [i for i, pool in running.items() if pool == "general"]
    assert sorted(running.values()) == ["general", "spare"][:count], running
    assert in_general in record.errors[0].message, record.to_detail()
    mine = {i.instance_id for i in record.instances}
    assert mine == set(running) - ({in_general} if count > 1 else set()), record.to_detail()
    assert leases() == []
    assert general_usage() == 1
