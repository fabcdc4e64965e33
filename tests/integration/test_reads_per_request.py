"""Issue 14: what a request reads does not grow with unrelated configuration."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import launch_request, node_pool


def test_a_request_naming_its_pool_reads_that_pool_not_every_pool(cloud, subnets, image):
    # Given the request's pool among twenty others
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(*(node_pool(f"other-{n}", "standard") for n in range(20)))
    pool_reads: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = [params.get("Key", {}).get("pk", {}).get("S")]
        keys += [v.get("S") for v in params.get("ExpressionAttributeValues", {}).values()]
        if "NodePool" in keys:
            pool_reads.append(model.name)

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    # When a fresh container serves a request that names its pool
    cloud.send(launch_request("named-1", nodePool="general"), batch=cloud.fresh_batch())
    # Then it read that one pool item, and never the NodePool partition
    assert pool_reads == ["GetItem"]
    record = cloud.record("named-1")
    assert record is not None and record.launched == 1
