"""Recovery (service/launch/recovery.py), the step before any pool visit, on each case a
redelivery can find: nothing stored (a first delivery), a final record, a Waiting record, an
open lease and no intent, an intent left unsent in its pool, intents whose pool is gone, and a
request its intake rejects now. Over the fakes (tests/fakes), no moto."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.errors import RequestRejected
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch.lifecycle import Phase
from capacity_launcher.service.launch.progress import Context, LaunchReport, Visit
from capacity_launcher.service.launch.recovery import recover, recover_rejected
from capacity_launcher.service.resolution import Prepared
from tests.fakes.world import FakeWorld, a_node_class, a_node_pool
from tests.unit.launch.redeliveries import killed_after_intent, lease_open

REQUEST: dict[str, Any] = {"requestId": "r-1", "count": 1}


def _world() -> FakeWorld:
    return FakeWorld([a_node_class(), a_node_pool("default"), a_node_pool("other")])


def _ctx(world: FakeWorld) -> Context:
    return Context(world.ports, world.clock.now, 4, world.clock.advance)


def _prepared(world: FakeWorld, **fields: Any) -> Prepared:
    request = parse_launch_request({**REQUEST, **fields})
    return world.launcher().prepare(request, world.clock.now())


def _killed_after_intent(world: FakeWorld) -> None:
    world.serve(REQUEST)
    killed_after_intent(world, "r-1")


class _CountingLoads:
    def __init__(self, world: FakeWorld) -> None:
        self.calls = 0
        self._load = world.records.load
        world.records.load = self  # type: ignore[method-assign]

    def __call__(self, request_id: str) -> Any:
        self.calls += 1
        return self._load(request_id)


def test_a_first_delivery_is_fresh_and_reads_nothing() -> None:
    world = _world()
    loads = _CountingLoads(world)

    found = recover(_ctx(world), _prepared(world), True, LaunchReport(records={}))

    assert isinstance(found, list) and [p.state for p in found] == [Phase.FRESH]
    assert loads.calls == 0


def test_a_redelivery_with_nothing_stored_is_recovered_reading_once() -> None:
    world = _world()
    loads = _CountingLoads(world)

    found = recover(_ctx(world), _prepared(world), False, LaunchReport(records={}))

    assert isinstance(found, list) and [p.state for p in found] == [Phase.RECOVERED]
    assert not found[0].first and loads.calls == 1


def test_a_settled_request_is_not_served_its_record_is_replayed() -> None:
    world = _world()
    world.serve(REQUEST)
    calls = len(world.fleet.calls)
    report = LaunchReport(records={})

    found = recover(_ctx(world), _prepared(world), False, report)

    assert found == []
    assert report.records["r-1"].status is RequestStatus.FULFILLED
    assert report.replayed == {"r-1"} and len(world.fleet.calls) == calls


def test_a_waiting_record_makes_the_request_waiting() -> None:
    world = _world()
    world.serve(REQUEST)
    world.records.intents.clear()
    world.records._pointers.clear()
    update = {"status": RequestStatus.WAITING, "instances": [], "launched": 0}
    waiting = world.record("r-1").model_copy(update=update)
    world.records.records["r-1"] = waiting

    found = recover(_ctx(world), _prepared(world), False, LaunchReport(records={}))

    assert isinstance(found, list) and [p.state for p in found] == [Phase.WAITING]
    assert found[0].waited == waiting


def test_an_open_lease_without_intent_is_taken_up_by_the_lease_phase() -> None:
    world = _world()
    # An earlier delivery leased and died before its intent: only the lease is stored.
    world.serve(REQUEST)
    world.records.records.clear()
    world.records.intents.clear()
    world.records._pointers.clear()
    lease_open(world, "r-1")
    world.fleet.calls.clear()

    found = recover(_ctx(world), _prepared(world), False, LaunchReport(records={}))
    assert isinstance(found, list) and [p.state for p in found] == [Phase.RECOVERED]
    world.serve(REQUEST, first=False)

    # The lease was taken up, not a second one taken beside it.
    assert world.record("r-1").launched == 1
    assert list(world.leases.leases) == [("default", "r-1")]
    assert world.leases.leases[("default", "r-1")].settled


def test_an_intent_left_unsent_makes_a_replay_visit_of_its_pool() -> None:
    world = _world()
    _killed_after_intent(world)

    found = recover(_ctx(world), _prepared(world), False, LaunchReport(records={}))

    assert isinstance(found, Visit)
    assert [p.state for p in found.progress] == [Phase.REPLAYING]
    assert [i.state for i in found.intents] == ["pending"]
    assert world.fleet.calls == []  # recovery sends nothing: the replay visit does


def test_intents_whose_pool_is_gone_are_finished_there_unsent() -> None:
    world = _world()
    _killed_after_intent(world)
    (intent,) = world.records.intents.values()
    del world.config.pools["default"]  # deleted since; the request now resolves to `other`

    found = recover(_ctx(world), _prepared(world), False, LaunchReport(records={}))

    assert isinstance(found, list) and [p.state for p in found] == [Phase.RECOVERED]
    assert found[0].pool_name == "other" and found[0].attempts == intent.attempt
    ended = world.records.intents[intent.token]
    assert ended.state == "done" and ended.errors[0]["code"] == "NotSentAgain"
    assert world.fleet.calls == []
    # Nothing launched under its lease there: it was given back.
    assert world.leases.lease("default", "r-1") is None


def test_a_rejected_redelivery_finishes_its_intents_first() -> None:
    world = _world()
    _killed_after_intent(world)
    (intent,) = world.records.intents.values()
    request = parse_launch_request(REQUEST)
    rejected = RequestRejected("NodePoolNotFound", "nodePool default: not found")

    kept = recover_rejected(_ctx(world), request, world.clock.now(), rejected)

    assert kept is None  # they launched nothing for it: the rejection answers
    assert world.records.intents[intent.token].state == "done"
    assert world.leases.lease("default", "r-1") is None
