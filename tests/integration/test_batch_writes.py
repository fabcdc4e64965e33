"""Issue 38: a batch of compatible requests served by one CreateFleet writes its records together.

Each request's lease is settled in turn (the leases share the pool's usage items), but the
visit's instance records and its request records are each one BatchWriteItem for the whole
visit, not a write of each per request one after another: at 10 ms a DynamoDB call, the 20
round trips a batch of 10 spent on them were most of what kept it from 4x ten batches of one."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_request_edges import items_put
from tests.support.cloud import launch_request

REQUESTS = 10


def _written(params: dict[str, Any]) -> list[str]:
    """What a PutItem or BatchWriteItem call puts: `record` (a request's record), `instance`
    (an instance's record) or `other`, item by item."""
    kinds = []
    for item in items_put(params):
        pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
        if pk.startswith("Request#") and sk == "Record":
            kinds.append("record")
        elif pk.startswith("Instance#"):
            kinds.append("instance")
        else:
            kinds.append("other")
    return kinds


def test_a_batch_writes_its_instance_and_request_records_in_one_call_each(cloud, subnets, image):
    # Given one on-demand pool, and ten requests for it in one SQS batch
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    batch = cloud.fresh_batch()
    cloud.send(launch_request("warm", nodePool="general"), batch=batch)
    calls: Counter[str] = Counter()
    written: Counter[str] = Counter()

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        kinds = _written(params) if model.name in ("PutItem", "BatchWriteItem") else []
        calls.update(set(kinds) - {"other"})
        written.update(kinds)

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    bodies = [launch_request(f"together-{n}", nodePool="general") for n in range(REQUESTS)]
    # When the batch is served (one group: one CreateFleet)
    cloud.send(*bodies, batch=batch)
    # Then every request launched and has its record
    records = [cloud.record(str(body["requestId"])) for body in bodies]
    assert [r.launched if r else None for r in records] == [1] * REQUESTS
    # And the ten instance records went in one call, the ten request records in another
    assert (written["instance"], written["record"]) == (REQUESTS, REQUESTS)
    assert calls == {"instance": 1, "record": 1}
