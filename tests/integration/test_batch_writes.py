"""Issue 38: a batch of compatible requests served by one CreateFleet writes its records together.

Each request's lease is settled in turn (the leases share the pool's usage items), and each
instance's record is put in the settle's transaction that counts it as a member (no write of
its own, never a member without its record); the visit's request records are one BatchWriteItem
for the whole visit, not a write per request one after another: at 10 ms a DynamoDB call, the
20 round trips a batch of 10 spent on them were most of what kept it from 4x ten batches of
one."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_request_edges import items_put
from tests.support.cloud import launch_request

REQUESTS = 10
WRITES = ("PutItem", "BatchWriteItem", "TransactWriteItems")


def _written(params: dict[str, Any]) -> list[str]:
    """What a PutItem, BatchWriteItem or TransactWriteItems call puts: `record` (a request's
    record), `instance` (an instance's record), `member` (an instance counted in its pool) or
    `other`, item by item."""
    kinds = []
    transacted = [t["Put"]["Item"] for t in params.get("TransactItems", []) if "Put" in t]
    for item in items_put(params) + transacted:
        pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
        if pk.startswith("Request#") and sk == "Record":
            kinds.append("record")
        elif pk.startswith("Instance#"):
            kinds.append("instance")
        elif sk.startswith("Member#"):
            kinds.append("member")
        else:
            kinds.append("other")
    return kinds


def test_a_batch_writes_its_request_records_in_one_call_and_each_instance_s_with_its_member(
    cloud, subnets, image
):
    # Given one on-demand pool, and ten requests for it in one SQS batch
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    batch = cloud.fresh_batch()
    cloud.send(launch_request("warm", nodePool="general"), batch=batch)
    calls: Counter[str] = Counter()
    written: Counter[str] = Counter()
    counted: list[list[str]] = []  # the kinds each call counting a member or recording puts

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        kinds = _written(params) if model.name in WRITES else []
        calls.update(f"{model.name} {kind}" for kind in set(kinds) - {"other"})
        written.update(kinds)
        if "instance" in kinds or "member" in kinds:
            counted.append(kinds)

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    bodies = [launch_request(f"together-{n}", nodePool="general") for n in range(REQUESTS)]
    # When the batch is served (one group: one CreateFleet)
    cloud.send(*bodies, batch=batch)
    # Then every request launched and has its record
    records = [cloud.record(str(body["requestId"])) for body in bodies]
    assert [r.launched if r else None for r in records] == [1] * REQUESTS
    # And each instance record went with its member in its request's settle, the ten request
    # records in one call
    assert (written["instance"], written["member"], written["record"]) == (REQUESTS,) * 3
    assert calls == {
        "TransactWriteItems instance": REQUESTS,
        "TransactWriteItems member": REQUESTS,
        "BatchWriteItem record": 1,
    }
    # And never a member without its record, or a record without its member, in one call
    assert all(kinds.count("instance") == kinds.count("member") for kinds in counted), counted
