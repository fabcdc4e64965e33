"""Issue 38: a reservation's slots are claimed in the transaction that writes the launch intent.

An attempt aimed at one reservation (targeted, or an open one its NodeClass selects) claims its
slots in the shared snapshot in the TransactWriteItems that writes its intent, which records
them (`claimed`): no UpdateItem of its own. A replay of a pending intent then knows its slots
are claimed already (the intent exists) and claims none again; so the intent's answer rides
its request's lease settle as an on-demand one does, and slots no instance took are given back
in the write that marks the intent done, once. A warm request into a reservation makes 10 AWS
calls or fewer, however many reservations it could use (a group's 10: DescribeInstances says
which member each instance landed in, whose slot is noted with the answer, in the settle)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.domain.capacity.offerings import RESERVED, offering_key
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.intents import LaunchIntent, Share, SlotsBack
from capacity_launcher.service.reservations import ReservationProvider
from tests.integration.test_intent_done_with_settle import _intents
from tests.integration.test_launch_into_reservations import (
    ZONE,
    available,
    expire_idempotency_claims,
    group_of,
    reserve,
    setup_pool,
    targeted_pool,
)
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.cloud import Cloud, launch_request
from tests.support.crashes import worker_dies_at, worker_killed

TAG = {"claim": "rides-intent"}
# The first request into a reservation a container has not launched into makes its launch
# template (its name names the reservation): once per reservation, not per request.
_FIRST_INTO_A_RESERVATION = ("CreateLaunchTemplate", "DescribeLaunchTemplates")


def _calls(*services: str) -> Counter[str]:
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    for service in services:
        aws.client(service).meta.events.register(f"provide-client-params.{service}.*", note)
    return calls


@pytest.mark.parametrize("usable", [1, 10])
@pytest.mark.parametrize("match", ["targeted", "open"])
def test_a_warm_request_into_a_reservation_makes_nine_calls(cloud, subnets, image, match, usable):
    # Given `usable` reservations of the pool's type and zone its NodeClass selects by tag
    tags = [{"Key": k, "Value": v} for k, v in TAG.items()]
    spec = [{"ResourceType": "capacity-reservation", "Tags": tags}]
    made = [
        reserve(cloud, 4, InstanceMatchCriteria=match, TagSpecifications=spec)
        for _ in range(usable)
    ]
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": TAG}])
    sync()
    batch = cloud.fresh_batch()
    assert cloud.send(launch_request("warm-1", nodePool="general"), batch=batch) == []
    calls = _calls("dynamodb", "ec2", "events")
    # When a warm container serves one request for one instance
    assert cloud.send(launch_request("counted-1", nodePool="general"), batch=batch) == []
    steady = {k: n for k, n in calls.items() if k not in _FIRST_INTO_A_RESERVATION}
    # Then it lands in one of them, in 9 calls: no UpdateItem (the claim rides the intent's
    # transaction, the answer the lease settle's), one read (the coverage and the snapshots it
    # names, the container having kept the coverage it read last)
    record = cloud.record("counted-1")
    assert record is not None and record.launched == 1
    assert record.instances[0].capacity_reservation_id in made
    assert steady == {
        "BatchGetItem": 1,  # the coverage, and the usable snapshots it names
        "BatchWriteItem": 1,  # the request's record
        "CreateFleet": 1,
        "PutEvents": 1,
        "PutItem": 2,  # the idempotency claim, the body's binding
        "TransactWriteItems": 3,  # the lease, the intent with its claim, the settle
    }, calls
    [intent] = _intents(cloud, "counted-1")
    assert intent.state == "done" and intent.claimed == 1


def _dies_before_its_settle(cloud: Cloud, monkeypatch: pytest.MonkeyPatch, request: Any) -> None:
    """The delivery of `request` dies where its answer is stored (its settle, or an UpdateItem
    of its own), and nothing after runs: no slot given back or noted by it."""
    with monkeypatch.context() as patch:
        patch.setattr(ReservationProvider, "give_back", worker_killed)
        patch.setattr(ReservationProvider, "note_launched", worker_killed)
        with worker_dies_at(patch, "complete_intent"):
            cloud.send(request)


def test_a_replay_after_a_death_before_the_settle_claims_no_slot_again(
    cloud, subnets, image, monkeypatch
):
    # Given a targeted reservation of 2, and a request whose container died between its
    # CreateFleet and its settle (its answer stored nowhere; nothing ran after, not even a
    # give-back of slots)
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    request = launch_request("claim-died-1", nodePool="general")
    _dies_before_its_settle(cloud, monkeypatch, request)
    [pending] = _intents(cloud, "claim-died-1")
    assert pending.state == "pending" and pending.claimed == 1
    assert snapshot(reservation).snapshot.available == 1  # claimed with the intent
    expire_idempotency_claims(cloud)
    # When the request is delivered again (the pending intent replayed)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then one instance runs, in the reservation, and its slot was taken once
    record = cloud.record("claim-died-1")
    assert record is not None and record.launched == 1
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    assert len(cloud.managed_instances()) == 1
    assert available(cloud, reservation) == 1
    assert snapshot(reservation).snapshot.available == 1  # not claimed or noted again
    [done] = _intents(cloud, "claim-died-1")
    assert done.state == "done" and [i.instance_id for i in record.instances] == list(
        done.instance_ids
    )


def _claiming(reservation: str, token: str, claimed: int) -> LaunchIntent:
    return LaunchIntent(
        token=token,
        attempt=1,
        capacity_type=RESERVED,
        shares=(Share("adapter-1", claimed),),
        fleet_input={"ClientToken": token},
        offerings=(offering_key(RESERVED, "m5.large", ZONE, reservation),),
        claimed=claimed,
    )


def test_an_intent_claims_its_slots_with_its_write_and_gives_back_once(cloud, subnets, image):
    # Given a targeted reservation of 3, synced
    reservation = targeted_pool(cloud, subnets, image, 3)
    sync()
    records = cloud.adapters().launch_records()
    # When an intent claiming 4 is written: refused, nothing written
    with pytest.raises(ConditionFailed):
        records.write_intent(_claiming(reservation, "cl-too-many", 4))
    assert records.intents(["cl-too-many"]) == []
    assert snapshot(reservation).snapshot.available == 3
    # and one claiming 2: written with its claim
    intent = _claiming(reservation, "cl-two", 2)
    assert records.write_intent(intent) is True
    assert snapshot(reservation).snapshot.available == 1
    # Then its completion with one instance gives the other slot back, once however often it
    # is stored (a replay finding it done gives none back again)
    done = intent.completion(["i-0123456789abcdef0"])
    assert done.slots_back == SlotsBack(reservation, 1)
    for _ in range(2):
        records.complete_intent(done)
    assert snapshot(reservation).snapshot.available == 2
    [stored] = records.intents(["cl-two"])
    assert stored.state == "done" and stored.claimed == 2
    # and a settle refuses to carry a completion that gives slots back
    with pytest.raises(ValueError, match="slots back"):
        records.completion_updates([done])


def test_a_claim_let_go_gives_its_slots_back_once(cloud, subnets, image):
    # Given a targeted reservation of 3, and a pending intent that claimed 2 of its slots
    reservation = targeted_pool(cloud, subnets, image, 3)
    sync()
    records = cloud.adapters().launch_records()
    intent = _claiming(reservation, "cl-raised", 2)
    assert records.write_intent(intent) is True
    assert snapshot(reservation).snapshot.available == 1
    # When its claim is let go (its CreateFleet raised), twice
    records.release_claim(intent)
    records.release_claim(intent)
    # Then its slots are back once, and it claims none: a replay notes what its instances took
    assert snapshot(reservation).snapshot.available == 3
    [stored] = records.intents(["cl-raised"])
    assert stored.state == "pending" and stored.claimed == 0


def _group_pool(cloud: Cloud, subnets: dict[str, str], image: str, *reservations: str) -> None:
    target = {"capacityReservationResourceGroupArn": group_of(cloud, *reservations)}
    setup_pool(cloud, subnets, image, reservation_spec={"capacityReservationTarget": target})


@pytest.mark.parametrize("usable", [1, 10])
def test_a_warm_request_into_a_group_notes_its_slot_with_its_settle(cloud, subnets, image, usable):
    # Given a resource group of `usable` targeted reservations the pool's NodeClass targets, EC2
    # consistent at once (the emulator's visibility delay would add DescribeInstances retries)
    moto_capacity.set_consistency(0, 0)
    made = [reserve(cloud, 4, InstanceMatchCriteria="targeted") for _ in range(usable)]
    _group_pool(cloud, subnets, image, *made)
    sync()
    batch = cloud.fresh_batch()
    assert cloud.send(launch_request("warm-1", nodePool="general"), batch=batch) == []
    calls = _calls("dynamodb", "ec2", "events")
    # When a warm container serves one request for one instance
    assert cloud.send(launch_request("counted-1", nodePool="general"), batch=batch) == []
    steady = dict(calls)
    # Then the member it landed in has its slot noted in the lease settle's transaction, with
    # the intent's answer: no UpdateItem; one read of the coverage and the members: 10 calls
    assert steady == {
        "BatchGetItem": 1,
        "BatchWriteItem": 1,
        "CreateFleet": 1,
        "DescribeInstances": 1,  # which member EC2 put it in
        "PutEvents": 1,
        "PutItem": 2,
        "TransactWriteItems": 3,
    }, calls
    record = cloud.record("counted-1")
    assert record is not None and record.launched == 1
    assert record.instances[0].capacity_reservation_id in made
    taken = {r: 4 - snapshot(r).snapshot.available for r in made}
    assert taken == {r: 4 - available(cloud, r) for r in made}  # each slot noted once
    assert sum(taken.values()) == 2
    [intent] = _intents(cloud, "counted-1")
    assert intent.state == "done"


def test_a_group_replay_after_a_death_before_the_settle_notes_its_slot_once(
    cloud, subnets, image, monkeypatch
):
    # Given a group of one targeted reservation of 2, and a request whose container died
    # between its CreateFleet and its settle (nothing ran after)
    reservation = reserve(cloud, 2, InstanceMatchCriteria="targeted")
    _group_pool(cloud, subnets, image, reservation)
    sync()
    request = launch_request("group-died-1", nodePool="general")
    _dies_before_its_settle(cloud, monkeypatch, request)
    [pending] = _intents(cloud, "group-died-1")
    assert pending.state == "pending"
    assert snapshot(reservation).snapshot.available == 2  # nothing noted yet
    expire_idempotency_claims(cloud)
    # When the request is delivered again (the pending intent replayed)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then its slot is noted once
    record = cloud.record("group-died-1")
    assert record is not None and record.launched == 1
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    assert available(cloud, reservation) == 1
    assert snapshot(reservation).snapshot.available == 1


def test_a_settle_whose_noting_is_refused_settles_and_empties_the_snapshot(
    cloud, subnets, image, monkeypatch
):
    # Given a group of one targeted reservation of 2, and another worker taking its last slots
    # in the shared snapshot while our CreateFleet runs
    reservation = reserve(cloud, 2, InstanceMatchCriteria="targeted")
    _group_pool(cloud, subnets, image, reservation)
    sync()
    real_create = Fleet.create

    def raced(self: Fleet, request: Any) -> Any:
        answer = real_create(self, request)
        assert cloud.adapters().reservation_snapshots().take(reservation, 2)
        return answer

    monkeypatch.setattr(Fleet, "create", raced)
    # When the request's settle carries the slot its instance took (more than the snapshot
    # holds now: the noting's condition refuses it)
    assert cloud.send(launch_request("refused-1", nodePool="general")) == []
    # Then the lease is settled all the same, the intent is done, and the snapshot is empty (as
    # a noting beyond what it holds leaves it), not below zero
    record = cloud.record("refused-1")
    assert record is not None and record.launched == 1
    [intent] = _intents(cloud, "refused-1")
    assert intent.state == "done" and list(intent.instance_ids) == [
        i.instance_id for i in record.instances
    ]
    assert snapshot(reservation).snapshot.available == 0
    assert cloud.adapters().pool_leases().leases() == []  # settled, none left open
