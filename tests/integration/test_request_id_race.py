"""A valid and an invalid body under one requestId, served at once by two launcher containers:
the requestId is bound to whichever body claims it first. That body's outcome is the one record
and the one terminal event; the other body is Rejected (`RequestIdReused`), published but never
stored, and never overwrites or re-publishes anything of the first.

Each test fixes one interleaving: the other container's whole batch runs at one AWS call of the
first (as the simulation's Interleaver would switch there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request

VALID = launch_request("race-1", nodePool="general", count=1)
INVALID = launch_request("race-1", nodePool="general", count=0)  # count must be 1..500


def terminal_events(cloud: Cloud) -> list[dict[str, Any]]:
    return [e["detail"] for e in cloud.events() if e["detail"]["requestId"] == "race-1"]


def run_first_at(monkeypatch: Any, method: str, other: Callable[[], Any]) -> None:
    """Run `other` (the second container's batch) once, just before `LaunchRecords.<method>`."""
    original = getattr(LaunchRecords, method)
    pending = [other]

    def interleaved(self: LaunchRecords, *args: Any, **kwargs: Any) -> Any:
        while pending:
            pending.pop()()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LaunchRecords, method, interleaved)


def assert_one_outcome_and_one_reuse(cloud: Cloud, status: RequestStatus) -> None:
    record = cloud.record("race-1")
    assert record is not None and record.status is status
    events = terminal_events(cloud)
    reused = [e for e in events if any(x["code"] == "RequestIdReused" for x in e["errors"])]
    outcomes = [e for e in events if e not in reused]
    # Exactly one outcome is published, and it is the stored one
    assert [e["status"] for e in outcomes] == [str(status)]
    assert outcomes[0] == record.to_detail()
    # The other body is refused as a reuse of the requestId: published once, never stored
    assert len(reused) == 1 and reused[0]["status"] == "Rejected"


def test_the_valid_body_bound_first_keeps_the_id_while_the_invalid_one_arrives(
    cloud, subnets, image, monkeypatch
):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    other = cloud.fresh_batch()
    # Given the valid body, claimed and bound in one container, about to record its outcome,
    # when the invalid body under its requestId is served by another container meanwhile
    handed_back: list[list[str]] = []
    run_first_at(
        monkeypatch, "put_records", lambda: handed_back.append(cloud.send(INVALID, batch=other))
    )
    assert cloud.send(VALID) == []
    # Then the valid body's outcome is the one record and the one outcome published; the
    # invalid body is a reuse of the bound requestId, refused and not retried
    assert handed_back == [[]]
    assert_one_outcome_and_one_reuse(cloud, RequestStatus.FULFILLED)
    assert len(cloud.managed_instances()) == 1


def test_the_invalid_body_bound_first_keeps_the_id_while_the_valid_one_arrives(
    cloud, subnets, image, monkeypatch
):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    other = cloud.fresh_batch()
    # Given the invalid body being refused in one container, about to record its rejection,
    # when the valid body under its requestId is served by another container meanwhile
    handed_back: list[list[str]] = []
    run_first_at(
        monkeypatch,
        "put_record_if_absent",
        lambda: handed_back.append(cloud.send(VALID, batch=other)),
    )
    assert cloud.send(INVALID) == []
    # Then only one of them owns the requestId: one record, one outcome, one reuse refused
    assert handed_back == [[]]
    record = cloud.record("race-1")
    assert record is not None
    assert_one_outcome_and_one_reuse(cloud, record.status)
    launched = len(cloud.managed_instances())
    assert launched == (1 if record.status is RequestStatus.FULFILLED else 0)


def test_the_invalid_body_served_first_binds_the_id(cloud, subnets, image):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    # Given the invalid body, refused and recorded
    assert cloud.send(INVALID, batch=cloud.fresh_batch()) == []
    # When the valid body under its requestId arrives in another container
    assert cloud.send(VALID, batch=cloud.fresh_batch()) == []
    # Then it is a reuse of the requestId: the Rejected record stays, nothing launches
    assert_one_outcome_and_one_reuse(cloud, RequestStatus.REJECTED)
    assert cloud.managed_instances() == []
