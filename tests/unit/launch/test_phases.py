"""The launch phases over the fakes of their ports (tests/fakes): each outcome and its record in
milliseconds, no moto, no local cloud (tests/integration runs the same paths over moto)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from capacity_launcher.domain.capacity.offerings import ON_DEMAND
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.accounting_ports import PoolLeases
from capacity_launcher.service.launch.progress import Context
from capacity_launcher.service.launch.replay import end_unsent
from capacity_launcher.service.ports import FleetLauncher, Records, UnavailableCache
from tests.fakes.world import FakeWorld, a_node_class, a_node_pool, a_reservation
from tests.unit.launch.redeliveries import killed_after_intent

RESERVED_ONLY_FIRST: dict[str, Any] = {
    "capacityReservationSelectorTerms": [{"id": "cr-0000000000000000a"}]
}


def _world(
    pool_spec: dict[str, Any] | None = None, reservations: Sequence[ReservationSnapshot] = ()
) -> FakeWorld:
    pool = a_node_pool(
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
        ],
        **(pool_spec or {}),
    )
    return FakeWorld([a_node_class(**RESERVED_ONLY_FIRST), pool], reservations=reservations)


def test_the_fakes_are_the_ports() -> None:
    world = _world()
    # Typed as the protocols: mypy holds each fake to its port.
    ports: tuple[Records, PoolLeases, UnavailableCache, FleetLauncher] = (
        world.records,
        world.leases,
        world.unavailable,
        world.fleet,
    )
    assert all(port is not None for port in ports)


def test_a_reservation_with_room_is_launched_into_first() -> None:
    world = _world(
        reservations=[a_reservation("cr-0000000000000000a", "m5.large", "us-east-1a", 2)]
    )

    report = world.serve({"requestId": "r-1", "count": 2})

    record = world.record("r-1")
    assert record.status is RequestStatus.FULFILLED
    assert [x.capacity_reservation_id for x in record.instances] == ["cr-0000000000000000a"] * 2
    assert report.fleet_calls == 1 and report.fallbacks_to_on_demand == 0
    assert world.fleet.room["cr-0000000000000000a"] == 0
    assert world.snapshots.snapshots["cr-0000000000000000a"].available == 0


def test_a_full_reservation_falls_back_to_on_demand() -> None:
    world = _world(
        reservations=[a_reservation("cr-0000000000000000a", "m5.large", "us-east-1a", 1)]
    )

    report = world.serve({"requestId": "r-1", "count": 3})

    record = world.record("r-1")
    assert record.status is RequestStatus.FULFILLED
    kinds = sorted(str(x.capacity_type) for x in record.instances)
    assert kinds == [ON_DEMAND, ON_DEMAND, "reserved"]
    assert report.fallbacks_to_on_demand == 1
    assert len(world.fleet.calls) == 2


def test_on_demand_ice_moves_on_to_the_next_zone_and_is_cached() -> None:
    world = _world()
    world.fleet.dry.add((ON_DEMAND, "m5.large", "us-east-1a"))

    world.serve({"requestId": "r-1", "count": 1})

    record = world.record("r-1")
    assert record.status is RequestStatus.FULFILLED
    assert [x.zone for x in record.instances] == ["us-east-1b"]
    assert "on-demand:m5.large:us-east-1a" in world.unavailable.current()


def test_an_ice_cache_hit_skips_the_offering_without_asking_ec2() -> None:
    world = _world()
    world.unavailable.mark([("on-demand:m5.large:us-east-1a", "InsufficientInstanceCapacity", "")])

    report = world.serve({"requestId": "r-1", "count": 1})

    asked = [
        o["AvailabilityZone"]
        for c in world.fleet.calls
        for x in c["LaunchTemplateConfigs"]
        for o in x["Overrides"]
    ]
    assert asked == ["us-east-1b"]
    assert report.cache_hits == {ON_DEMAND: 1}
    record = world.record("r-1")
    assert [x.zone for x in record.instances] == ["us-east-1b"]
    skipped = [(u.capacity_type, u.zone, u.reason) for u in record.unavailable_offerings]
    assert skipped == [(ON_DEMAND, "us-east-1a", "InsufficientInstanceCapacity")]


def test_an_ice_entry_expires_on_the_cache_clock() -> None:
    world = _world()
    world.unavailable.mark([("on-demand:m5.large:us-east-1a", "InsufficientInstanceCapacity", "")])
    world.clock.advance(181)

    world.serve({"requestId": "r-1", "count": 1})

    assert world.unavailable.current() == {}
    assert world.record("r-1").instances[0].zone == "us-east-1a"


def test_a_gang_that_lands_short_terminates_what_landed() -> None:
    world = _world(
        reservations=[a_reservation("cr-0000000000000000a", "m5.large", "us-east-1a", 2)]
    )
    world.fleet.dry |= {(ON_DEMAND, "m5.large", z) for z in ("us-east-1a", "us-east-1b")}

    world.serve({"requestId": "r-1", "count": 3, "minCount": 3})

    record = world.record("r-1")
    assert record.status is RequestStatus.FAILED and record.launched == 0
    assert [e.code for e in record.errors][-1] == "MinCountNotMet"
    assert world.fleet.live() == []
    # The terminated pair's slots are free again, in EC2 and in the shared snapshot.
    assert world.fleet.room["cr-0000000000000000a"] == 2
    assert world.snapshots.snapshots["cr-0000000000000000a"].available == 2
    assert world.leases.lease("default", "r-1") is not None
    assert world.leases.usage("default").instances == 0


def test_the_pools_limits_refuse_what_does_not_fit() -> None:
    world = _world({"limits": {"cpu": "4"}})

    world.serve({"requestId": "r-1", "count": 2})
    world.serve({"requestId": "r-2", "count": 1, "minCount": 1})

    assert world.record("r-1").launched == 2
    refused = world.record("r-2")
    assert refused.status is RequestStatus.FAILED and refused.launched == 0
    assert [e.code for e in refused.errors] == ["LimitExceeded"]
    assert len(world.fleet.calls) == 1  # EC2 was never asked for r-2


def test_a_redelivery_replays_the_intent_its_predecessor_left_unsent() -> None:
    world = _world()
    world.serve({"requestId": "r-1", "count": 1})
    first = world.record("r-1")
    killed_after_intent(world, "r-1")
    (intent,) = world.records.intents.values()

    report = world.serve({"requestId": "r-1", "count": 1}, first=False)

    record = world.record("r-1")
    assert record.status is RequestStatus.FULFILLED and record.launched == 1
    assert [c["ClientToken"] for c in world.fleet.calls] == [intent.token]  # the same call
    assert report.fleet_calls == 1
    assert world.records.intents[intent.token].state == "done"
    assert first.launched == 1


def test_an_unsent_intent_without_a_lease_is_ended_not_sent() -> None:
    world = _world()
    world.serve({"requestId": "r-1", "count": 1})
    (intent,) = world.records.intents.values()
    pending = replace(intent, state="pending", instance_ids=())
    world.fleet.calls.clear()
    ctx = Context(world.ports, world.clock.now, 4, world.clock.advance)

    ended = end_unsent(ctx, pending, "no lease covers it", set())

    assert ended.state == "done" and world.fleet.calls == []
    stored = world.records.intents[intent.token]
    assert stored.errors == ({"code": "NotSentAgain", "message": "no lease covers it"},)
    # Its single request's instance EC2 already had is found by its tags and kept.
    assert stored.instance_ids == intent.instance_ids
