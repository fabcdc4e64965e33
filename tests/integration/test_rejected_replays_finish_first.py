"""A redelivery refused before its pool's phases still finishes its predecessor's intents first.

A worker leases a pool, writes its launch intent and dies after its CreateFleet (EC2 launched
the instance) or with its CreateFleet throttled (EC2 launched nothing). Before the message comes
back, the pool the request fell back to refuses it as a place to replay them (that pool's
NodeClass is stored but no longer valid, or sets a tag the request sets otherwise). The error
escaped every delivery: the message went to the dead-letter queue with no record at all.

The intents are finished in their pool first: what they launched stays the request's, named on
its record, the lease settled to it (given back when they launched nothing); then the request is
served afresh where it resolves now, the record naming why the pool refused it."""

from __future__ import annotations

import json

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE
from tests.integration.test_pool_fallback_leases import (
    GENERAL_DRY,
    general_dry,
    leases,
)
from tests.integration.test_replays_finish_first import pools_of, redelivered, two_pools
from tests.support.cloud import (
    Cloud,
    default_security_group,
    launch_request,
    node_class,
)

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

    def killed(*_: object, **__: object) -> None:
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, step, killed)
        patch.setattr(PoolLeaseStore, "cancel", killed)
        with pytest.raises(SystemExit):
            cloud.send(request)
    return request


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
