"""Exactly-once launching: each request delivered 1 to 3 times, with a worker killed before
CreateFleet, after it, or after recording; every requestId ends with one set of instances and
one final status."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import LaunchBatch, Message
from tests.integration.reliability.outcomes import assert_each_launched_once
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

COUNTS = {"once-a": 1, "once-b": 2, "once-c": 3}


def _killed(*_: Any, **__: Any) -> None:
    raise SystemExit("worker killed")


def _killed_after(original: Callable[..., Any]) -> Callable[..., Any]:
    def call_then_die(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        raise SystemExit("worker killed")

    return call_then_die


CRASHES: dict[str, tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]] | None] = {
    "no-crash": None,
    "before-create-fleet": (Fleet, "create", lambda _: _killed),
    "after-create-fleet": (LaunchRecords, "complete_intent", lambda _: _killed),
    # A visit writes its requests' records together (settle._write_records).
    "after-recording": (LaunchRecords, "put_records", _killed_after),
}


def deliver(batch: LaunchBatch, *request_ids: str, remaining_ms: int = 60_000) -> list[str]:
    now = datetime.now(UTC)
    messages = [
        Message(f"m-{r}", json.dumps(launch_request(r, nodePool="general", count=COUNTS[r])), now)
        for r in request_ids
    ]
    return batch.process(messages, lambda: remaining_ms)


@contextmanager
def crashing(monkeypatch: pytest.MonkeyPatch, crash: str) -> Iterator[None]:
    how = CRASHES[crash]
    with monkeypatch.context() as patch:
        if how is not None:
            owner, name, make = how
            patch.setattr(owner, name, make(getattr(owner, name)))
        yield


@pytest.mark.parametrize("crash", list(CRASHES))
def test_every_request_ends_with_one_set_of_instances_and_one_final_status(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    monkeypatch: pytest.MonkeyPatch,
    crash: str,
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    # Given one batch of three compatible requests (one shared CreateFleet) and a worker that
    # dies at the crash point. A killed worker's Powertools claim stays in progress until the
    # Lambda's remaining time runs out: a remaining time of 1 ms models that it has expired by
    # the time SQS redelivers, without touching the idempotency table.
    with crashing(monkeypatch, crash):
        if CRASHES[crash] is None:
            assert deliver(cloud.fresh_batch(), *COUNTS, remaining_ms=1) == []
        else:
            with pytest.raises(SystemExit):
                deliver(cloud.fresh_batch(), *COUNTS, remaining_ms=1)
    # When each request comes again, alone, to new containers, and the last one a third time
    first_wave = cloud.events()
    for request_id in COUNTS:
        assert deliver(cloud.fresh_batch(), request_id) == []
    assert deliver(cloud.fresh_batch(), "once-c") == []
    # Then each request has exactly its instances, once, and one final status
    assert assert_each_launched_once(cloud, COUNTS) == sum(COUNTS.values())
    for request_id, count in COUNTS.items():
        record = cloud.record(request_id)
        assert record is not None
        assert (record.status, record.launched) == (RequestStatus.FULFILLED, count)
    # and every event published for a request carries that same outcome
    published: dict[str, set[str]] = {}
    for event in [*first_wave, *cloud.events()]:
        detail = event["detail"]
        published.setdefault(detail["requestId"], set()).add(
            json.dumps([event["detail-type"], sorted(i["instanceId"] for i in detail["instances"])])
        )
    assert set(published) == set(COUNTS)
    assert all(len(outcomes) == 1 for outcomes in published.values()), published
