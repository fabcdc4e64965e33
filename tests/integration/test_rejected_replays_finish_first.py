"""A redelivery refused before its pool's phases still finishes its predecessor's intents first.

A worker leases a pool, writes its launch intent and dies after its CreateFleet (EC2 launched
the instance) or with its CreateFleet throttled (EC2 launched nothing). Before the message comes
back, the request becomes one that cannot be served where its intents were made:

- its intake rejects it (the NodePool it names was deleted, or applied again so that the request
  conflicts with it; no pool is compatible with it any more). It was recorded `Rejected`, its
  instance running under no record, its lease holding the pool's limits until it expired;
- the pool it fell back to refuses it as a place to replay them (that pool's NodeClass is stored
  but no longer valid, or sets a tag the request sets otherwise). The error escaped every
  delivery: the message went to the dead-letter queue with no record at all.

Either way the intents are finished in their pool first: what they launched stays the request's,
named on its record, the lease settled to it (given back when they launched nothing); then the
refusal answers for the rest."""

from __future__ import annotations

import json

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_pool_fallback_leases import (
    GENERAL_DRY,
    general_dry,
    general_usage,
    leases,
)
from tests.integration.test_replays_finish_first import pools_of, redelivered, two_pools
from tests.support.cloud import (
    Cloud,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
)
from tests.support.crashes import worker_dies_at

LAUNCHED = "complete_intent"  # killed there, after its CreateFleet: EC2 launched its instance
THROTTLED = "throttled"  # its CreateFleet throttled past the retries: handed back, nothing ran


def first_delivery(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, step: str, **fields: object
) -> dict[str, object]:
    """The request's first delivery, after its lease and its intent: killed after EC2 launched
    its instance (nothing runs after a kill, not even a lease's give-back), or handed back with
    its CreateFleet throttled (the lease stays: an intent names the request)."""
    request = launch_request("moved-on", **fields)
    if step == THROTTLED:
        moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
        assert len(cloud.send(request)) == 1
        moto_capacity.reset()
        return request

    with worker_dies_at(monkeypatch, step):
        cloud.send(request)
    return request


# How the request becomes one its intake rejects, and the error code it is rejected with.
REJECTIONS = {
    "pool deleted": ({"nodePool": "general"}, "UnknownNodePool"),
    "pool conflicts": ({"nodePool": "general"}, "RequirementsConflict"),
    "no pool compatible": ({}, "NoCompatibleNodePool"),
}


def rejected_from_now(cloud: Cloud, subnets: dict[str, str], image: str, how: str) -> None:
    """`general` deleted, or applied again allowing c5.large only (the request asks m5.large)."""
    if how == "pool conflicts":
        setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large",))
    else:
        cloud.delete("NodePool", "general")


@pytest.mark.parametrize("how", list(REJECTIONS))
@pytest.mark.parametrize("step", [LAUNCHED, THROTTLED])
def test_a_rejected_redelivery_finishes_its_intents_first(
    cloud, subnets, image, monkeypatch, how, step
):
    # Given a request for an m5.large whose worker leased `general` and wrote its intent, then
    # died after EC2 launched its instance, or went back with its CreateFleet throttled
    two_pools(cloud, subnets, image)
    fields, code = REJECTIONS[how]
    fields = {**fields, "requirements": [instance_type("m5.large")]}
    request = first_delivery(cloud, monkeypatch, step, **fields)
    assert [lease.pool for lease in leases()] == ["general"]
    # And the request rejected by the intake since
    rejected_from_now(cloud, subnets, image, how)
    # When it is delivered again
    redelivered(cloud, request)
    record = cloud.record("moved-on")
    assert record is not None, "no record"
    assert code in [e.code for e in record.errors], record.to_detail()
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    if step == LAUNCHED:
        # Then it keeps the instance its intent launched in `general`, named on its record (it
        # was Rejected, launched 0, its instance running under no record)
        assert record.status is RequestStatus.FULFILLED, record.to_detail()
        assert record.node_pool == "general", record.to_detail()
        assert len(running) == 1, running
        assert running == [i.instance_id for i in record.instances], record.to_detail()
    else:
        # Then its intent launched nothing: the rejection answers it, as any other request
        assert record.status is RequestStatus.REJECTED, record.to_detail()
        assert record.launched == 0 and running == [], record.to_detail()
    # And its lease is settled to what it launched, or given back (it held `general`'s limits
    # until it expired, 15 minutes)
    assert leases() == []
    assert general_usage() == len(running)


def killed_in_spare(cloud: Cloud, monkeypatch: pytest.MonkeyPatch, step: str) -> dict[str, object]:
    """A request naming no pool, passed over by `general` (dry) to `spare`, which leased, wrote
    its intent, and died after EC2 launched its instance or went back throttled."""
    general_dry(cloud)
    request = first_delivery(cloud, monkeypatch, step, tags={"team": "b"})
    assert [lease.pool for lease in leases()] == ["spare"]
    return request


def spare_refuses(cloud: Cloud, subnets: dict[str, str], image: str, how: str) -> str:
    """`spare`'s NodeClass `other` applied again setting the tag the request sets to another
    value, or stored as an older release left it (no longer valid). Returns what the refusal
    says (the field and the rule)."""
    if how == "tag conflict":
        group = default_security_group(cloud.ec2)
        tagged = {"securityGroupIds": [group], "tags": {"team": "a"}}
        cloud.apply(node_class("other", [subnets[ZONE]], image, **tagged))
        return "tags.team: is set by NodeClass other to 'a'; a request cannot override it"
    aws.client("dynamodb").put_item(
        TableName=cloud.names.state_table,
        Item={
            "pk": {"S": "NodeClass"},
            "sk": {"S": "other"},
            "document": {"S": json.dumps({"kind": "NodeClass", "metadata": {"name": "other"}})},
        },
    )
    return "refers to NodeClass 'other', which is stored but no longer valid"


def general_has_room_again(cloud: Cloud) -> None:
    """EC2 has m5.large on-demand again, and the ICE cache no longer holds it."""
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 10)
    cloud.adapters().unavailable_offerings().clear(GENERAL_DRY)


@pytest.mark.parametrize("how", ["tag conflict", "invalid class"])
@pytest.mark.parametrize("step", [LAUNCHED, THROTTLED])
def test_a_replay_whose_pool_refuses_to_resolve_it_finishes_its_intents_first(
    cloud, subnets, image, monkeypatch, how, step
):
    # Given a request whose worker fell back to `spare`, leased there and wrote its intent
    two_pools(cloud, subnets, image)
    request = killed_in_spare(cloud, monkeypatch, step)
    # And `spare` refusing to resolve it since
    refusal = spare_refuses(cloud, subnets, image, how)
    # When it is delivered again, `general` having room again
    general_has_room_again(cloud)
    redelivered(cloud, request)
    # Then it has a record, not an error on every delivery until the dead-letter queue: its
    # intent is finished in `spare`, the record saying why nothing more is launched there
    record = cloud.record("moved-on")
    assert record is not None, "no record: the message went back to the queue"
    assert record.status is RequestStatus.FULFILLED, record.to_detail()
    said = [e.message for e in record.errors if "nodePool spare" in e.message]
    assert said and refusal in said[0], record.to_detail()
    running = pools_of(cloud)
    assert len(running) == 1, running
    if step == LAUNCHED:
        # It keeps the instance launched in `spare` (the request asked for one: all of it)
        assert list(running.values()) == ["spare"], running
        assert record.node_pool == "spare", record.to_detail()
    else:
        # Its intent launched nothing: it is served afresh, in `general`
        assert list(running.values()) == ["general"], running
        assert record.node_pool == "general", record.to_detail()
    assert list(running) == [i.instance_id for i in record.instances], record.to_detail()
    # And `spare` holds nothing more for it than what runs there
    assert leases() == []


@pytest.mark.parametrize(
    ("min_count", "status"),
    [(1, RequestStatus.PARTIALLY_FULFILLED), (2, RequestStatus.FAILED)],
)
def test_a_rejected_redelivery_keeps_part_of_a_request_as_minCount_allows(
    cloud, subnets, image, monkeypatch, min_count, status
):
    # Given a request for 2 instances naming `general`, whose worker's CreateFleet launched 1
    # (EC2 had room for no more) and died; and `general` deleted since
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    fields = {"nodePool": "general", "count": 2, "minCount": min_count}
    request = first_delivery(cloud, monkeypatch, LAUNCHED, **fields)
    assert len(cloud.managed_instances()) == 1
    cloud.delete("NodePool", "general")
    # When it is delivered again
    redelivered(cloud, request)
    # Then it keeps the instance when minCount allows it; a gang short of its minCount is
    # terminated, as any gang is, and its record says so beside the rejection
    record = cloud.record("moved-on")
    assert record is not None and record.status is status, record.to_detail()
    codes = [e.code for e in record.errors]
    assert codes == ["UnknownNodePool", "MinCountNotMet"][:min_count], record.to_detail()
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    assert running == [i.instance_id for i in record.instances], record.to_detail()
    assert len(running) == 2 - min_count, running
    assert leases() == []
    assert general_usage() == len(running)
