"""The fakes the phase tests run on (tests/fakes) answer as the moto-backed adapters do: the same
small scenario against each, the same observations. A fake that drifts from its adapter fails
here, not silently in tests/unit/launch."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent, Share
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.service.ports import Records, UnavailableCache
from capacity_launcher.settings import get_settings
from tests.fakes.stores import FakeRecords, FakeUnavailable
from tests.support.cloud import Cloud

DRY = "on-demand:m5.large:us-east-1a"
FRESH = "on-demand:m5.large:us-east-1b"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def _ice_scenario(make: Callable[[_Clock], UnavailableCache]) -> list[Any]:
    clock = _Clock()
    cache = make(clock)
    seen: list[Any] = []
    cache.mark([(DRY, "InsufficientInstanceCapacity", "no capacity")])
    seen.append({k: e.reason for k, e in cache.current().items()})
    turn = cache.take_turn([DRY, FRESH])
    seen.append((sorted(turn.mine), dict(turn.unavailable)))
    cache.end_turn(turn, launched=[FRESH])
    seen.append(sorted(cache.current()))
    clock.now += 181  # past the entry's 180 s
    seen.append(sorted(cache.current()))
    turn = cache.take_turn([DRY])
    seen.append((sorted(turn.mine), dict(turn.unavailable)))
    return seen


def test_the_fake_ice_cache_answers_as_the_table_does(cloud: Cloud) -> None:
    table = cloud.names.unavailable_offerings_table
    adapter = _ice_scenario(lambda clock: UnavailableOfferings(table, 180, clock=clock))
    fake = _ice_scenario(lambda clock: FakeUnavailable(clock, 180))
    assert fake == adapter
    assert adapter[1] == ([FRESH], {DRY: "InsufficientInstanceCapacity"})


def _records_scenario(records: Records) -> list[Any]:
    intent = LaunchIntent(
        token="tok-1",
        attempt=1,
        capacity_type="on-demand",
        shares=(Share("rc-1", 2),),
        fleet_input={"ClientToken": "tok-1"},
        offerings=(FRESH,),
    )
    now = datetime(2030, 1, 1, tzinfo=UTC)
    record = RequestRecord(
        request_id="rc-1",
        node_pool="general",
        status=RequestStatus.FULFILLED,
        requested=2,
        launched=2,
        received_at=now,
        finished_at=now,
    )
    seen: list[Any] = [
        records.bind_first_body("rc-1", "hash-a"),
        records.bind_first_body("rc-1", "hash-b"),
        records.write_intent(intent),
        records.write_intent(intent),
    ]
    loaded = records.load("rc-1")
    seen.append((loaded[0], [(i.token, i.state, i.instance_ids) for i in loaded[1]]))
    records.complete_intent(
        IntentCompletion("tok-1", ("i-1", "i-2"), ({"code": "X", "message": "y"},))
    )
    loaded = records.load("rc-1")
    seen.append([(i.state, i.instance_ids, i.errors) for i in loaded[1]])
    seen += [records.put_record_if_absent(record), records.put_record_if_absent(record)]
    seen.append(records.get_record("rc-1"))
    # A visit's records, put together: each replaces what its requestId held, as put_record does.
    failed = record.model_copy(update={"status": RequestStatus.FAILED, "launched": 0})
    other = record.model_copy(update={"request_id": "rc-2"})
    records.put_records([failed, other])
    seen += [records.get_record("rc-1"), records.get_record("rc-2")]
    # Read together, an id without a record is left out, one asked twice answered once.
    seen.append(records.get_records(["rc-2", "rc-missing", "rc-1", "rc-2"]))
    return seen


def test_the_fake_records_answer_as_the_table_does(cloud: Cloud) -> None:
    adapter = _records_scenario(
        LaunchRecords(get_settings().state_table_name, aws.client("dynamodb"), clock=time.time)
    )
    assert _records_scenario(FakeRecords()) == adapter
