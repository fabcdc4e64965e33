"""Issue 38: an on-demand attempt's answer rides its request's lease settle onto its intent.

One request's on-demand (or spot) fleet that claimed no slots and put no instance in a
reservation stores CreateFleet's answer on its intent in the TransactWriteItems that settles the
request's lease, not in an UpdateItem of its own: a settled lease's intents are done. A container
that dies between CreateFleet and that settle leaves the intent pending (as one that died before
the UpdateItem did): the redelivery sends it again with its ClientToken, EC2 answers with its
first answer (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html; the
emulator models it), and nothing launches twice. A fleet that put an instance in a reservation
notes its slots with its answer, in the same write (the settle's), only while the intent is
pending: a replay of a done intent notes none again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import (
    available,
    expire_idempotency_claims,
    reserve,
    setup_pool,
)
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.cloud import Cloud, launch_request
from tests.support.crashes import worker_dies_at


def _calls(service: str) -> Counter[str]:
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    aws.client(service).meta.events.register(f"provide-client-params.{service}.*", note)
    return calls


def _tokens() -> list[str]:
    """The ClientToken of each CreateFleet sent from now on."""
    tokens: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        tokens.append(str(params.get("ClientToken")))

    aws.client("ec2").meta.events.register("provide-client-params.ec2.CreateFleet", note)
    return tokens


def _intents(cloud: Cloud, request_id: str) -> list[Any]:
    return cloud.adapters().launch_records().load(request_id)[1]


def _usage() -> int:
    return PoolUsageStore(get_settings().state_table_name).usage("general").instances


def _dies_after_create_fleet(patch: pytest.MonkeyPatch) -> None:
    """The container dies after CreateFleet: no settle, no intent completion is written."""

    def dead(*_: object, **__: object) -> None:
        raise RuntimeError("the container died")

    patch.setattr(PoolLeaseStore, "write_settlement", dead)
    patch.setattr(LaunchRecords, "complete_intent", dead)


def test_an_on_demand_answer_rides_the_lease_settle(cloud, subnets, image):
    # Given an on-demand pool, and a warm container
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    sync()
    batch = cloud.fresh_batch()
    assert cloud.send(launch_request("warm-1", nodePool="general"), batch=batch) == []
    dynamodb = _calls("dynamodb")
    # When it serves one request
    assert cloud.send(launch_request("ride-1", nodePool="general"), batch=batch) == []
    # Then its intent is done with the instance launched, and no UpdateItem stored it
    record = cloud.record("ride-1")
    assert record is not None and record.launched == 1
    [intent] = _intents(cloud, "ride-1")
    assert intent.state == "done"
    assert list(intent.instance_ids) == [i.instance_id for i in record.instances]
    assert dynamodb["UpdateItem"] == 0, dynamodb


def test_a_redelivery_after_a_death_before_the_settle_sends_the_same_token(
    cloud, subnets, image, monkeypatch
):
    # Given an on-demand pool limited to 1 instance, and a request whose container died
    # between its CreateFleet and its settle
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    sync()
    request = launch_request("died-1", nodePool="general")
    tokens = _tokens()
    with monkeypatch.context() as patch:
        _dies_after_create_fleet(patch)
        assert len(cloud.send(request)) == 1  # the message goes back
    [pending] = _intents(cloud, "died-1")
    assert pending.state == "pending"  # what the container left: its answer rode nothing
    [launched] = cloud.managed_instances()
    assert _usage() == 1  # the lease holds the room
    expire_idempotency_claims(cloud)
    # When the request is delivered again
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then the intent was sent again with its ClientToken, EC2 answered with the instance it
    # launched the first time, and nothing more runs than the limit
    assert len(tokens) == 2 and tokens[0] == tokens[1] == pending.token
    record = cloud.record("died-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.instance_id for i in record.instances] == [launched["InstanceId"]]
    assert [i["InstanceId"] for i in cloud.managed_instances()] == [launched["InstanceId"]]
    assert _usage() == 1
    [done] = _intents(cloud, "died-1")
    assert done.state == "done" and list(done.instance_ids) == [launched["InstanceId"]]


def test_an_answer_that_took_reservation_slots_is_stored_before_they_are_noted(
    cloud, subnets, image, monkeypatch
):
    # Given an open reservation of 2 the pool's NodeClass selects, and an on-demand pool (its
    # preference open: EC2 puts the instance in the reservation)
    reservation = reserve(cloud, 2, InstanceMatchCriteria="open")
    setup_pool(
        cloud,
        subnets,
        image,
        selector_terms=[{"id": reservation}],
        reservation_spec={"capacityReservationPreference": "open"},
        capacity_types=("on-demand",),
    )
    sync()
    request = launch_request("open-died-1", nodePool="general")
    # When the worker dies where its CreateFleet's answer is stored (an UpdateItem of its own,
    # or its lease settle): a fleet that took a reservation slot notes it with its answer, so it
    # dies before noting it
    with worker_dies_at(monkeypatch, "complete_intent"):
        cloud.send(request)
    assert snapshot(reservation).snapshot.available == 2
    # Then the redelivery sends the pending intent again and notes the slot once
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    record = cloud.record("open-died-1")
    assert record is not None and record.launched == 1
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    assert len(cloud.managed_instances()) == 1
    assert available(cloud, reservation) == 1
    assert snapshot(reservation).snapshot.available == 1  # its slot noted once
