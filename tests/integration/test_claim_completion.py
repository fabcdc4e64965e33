"""Issue 38: a request's final record is its idempotency claim's completion.

A delivery claims its requestId (one conditional PutItem on the idempotency table) and never
writes the claim again once the request finished: the final record, stored before the outcome is
published, says it is done. A later delivery still answers with that outcome and does no work,
whether it finds the claim held (the first delivery's deadline not passed: the record is read)
or free again (the claim expired: recovery reads the record and replays it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import expire_idempotency_claims, setup_pool
from tests.support.cloud import Cloud, launch_request


def _idempotency_writes(cloud: Cloud) -> Counter[str]:
    """Calls writing to the idempotency table, by operation, from now on."""
    writes: Counter[str] = Counter()
    table = cloud.names.idempotency_table

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("TableName") == table and model.name not in ("GetItem", "Query", "Scan"):
            writes[model.name] += 1

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    return writes


def _fulfilled(events: list[dict[str, Any]], request_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e["detail"].get("requestId") == request_id]


def test_a_finished_request_writes_its_claim_once(cloud, subnets, image):
    # Given one on-demand pool
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    writes = _idempotency_writes(cloud)
    # When a request is served
    assert cloud.send(launch_request("done-1", nodePool="general")) == []
    # Then it launched, and the claim was written once: no completion after the record
    record = cloud.record("done-1")
    assert record is not None and record.launched == 1
    assert writes == {"PutItem": 1}


def test_a_copy_finding_the_claim_held_answers_with_the_record(cloud, subnets, image):
    # Given a request served (its claim still held: its delivery's deadline has not passed)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    assert cloud.send(launch_request("done-2", nodePool="general")) == []
    first = _fulfilled(cloud.events(), "done-2")
    # When a copy of its message arrives in another container
    copy = launch_request("done-2", nodePool="general")
    handed_back = cloud.send(copy, batch=cloud.fresh_batch())
    # Then it is not handed back: its recorded outcome is published again, nothing launched
    assert handed_back == []
    again = _fulfilled(cloud.events(), "done-2")
    assert [e["detail"] for e in again] == [e["detail"] for e in first]
    assert len(cloud.managed_instances()) == 1


def test_a_copy_after_the_claim_expired_replays_the_record(cloud, subnets, image):
    # Given a request served, and its claim gone since (expired)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    assert cloud.send(launch_request("done-3", nodePool="general")) == []
    first = _fulfilled(cloud.events(), "done-3")
    expire_idempotency_claims(cloud)
    # When a copy of its message arrives
    assert cloud.send(launch_request("done-3", nodePool="general"), batch=cloud.fresh_batch()) == []
    # Then the recorded outcome is published again, and nothing more launched
    again = _fulfilled(cloud.events(), "done-3")
    assert [e["detail"] for e in again] == [e["detail"] for e in first]
    assert len(cloud.managed_instances()) == 1
