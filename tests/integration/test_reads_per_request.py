"""Issue 14: what a request reads does not grow with unrelated configuration."""

from __future__ import annotations

import json
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from local_cloud.documents import capacity_quota
from tests.integration.test_launch_into_reservations import reserve, setup_pool
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


def test_a_request_reads_only_the_snapshots_of_reservations_it_could_launch_into(
    cloud, subnets, image
):
    # Given a NodeClass selecting by tag two m5.large reservations in its zone, one c5.large
    # there (its pool allows only m5.large) and one m5.large in a zone it has no subnet in,
    # and another NodeClass whose three reservations it does not select, all synced
    team_a = [{"Key": "team", "Value": "a"}]
    tags = {"TagSpecifications": [{"ResourceType": "capacity-reservation", "Tags": team_a}]}
    usable = [reserve(cloud, 2, **tags), reserve(cloud, 3, **tags)]
    other_type = reserve(cloud, 2, itype="c5.large", **tags)
    other_zone = reserve(cloud, 2, zone="us-east-1b", **tags)
    team_b = [{"Key": "team", "Value": "b"}]
    others = [
        reserve(
            cloud,
            2,
            TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": team_b}],
        )
        for _ in range(3)
    ]
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "a"}}])
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "b"}}], pool="b", klass="b")
    cloud.wait_out_consistency()
    wiring.Adapters(get_settings()).reservation_sync().run()
    read: list[str] = []
    partitions: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            partitions.extend(v.get("S") for v in params["ExpressionAttributeValues"].values())
        keys = [params.get("Key")] if "Key" in params else []
        for request in params.get("RequestItems", {}).values():
            keys += request.get("Keys", [])
        read.extend(k["sk"]["S"] for k in keys if k and k["pk"]["S"] == "Reservation")

    events = aws.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.GetItem", note)
    events.register("provide-client-params.dynamodb.BatchGetItem", note)
    events.register("provide-client-params.dynamodb.Query", note)
    # When a fresh container serves one request of that pool
    cloud.send(launch_request("scoped-1", nodePool="general"), batch=cloud.fresh_batch())
    # Then it launched into one of its reservations, having read its coverage item and the
    # snapshots of the two it could use, never the partition or any other reservation
    record = cloud.record("scoped-1")
    assert record is not None and record.launched == 1
    assert record.instances[0].capacity_reservation_id in usable
    assert "Reservation" not in partitions
    snapshots = {sk for sk in read if sk.startswith("cr-")}
    assert snapshots == set(usable)
    assert not snapshots & {other_type, other_zone, *others}
    term = json.dumps({"tags": {"team": "a"}}, sort_keys=True)
    assert [sk for sk in read if not sk.startswith("cr-")] == [f"Covered#selector:{term}"]


def test_a_fresh_request_reads_no_item_of_its_own_partition(cloud, subnets, image):
    # Given a pool, and a count of the items each read of a request's partition returned
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    found: list[str] = []
    asked: list[bool] = []

    def ask(params: dict[str, Any], **_: Any) -> None:
        keys = [params.get("Key", {}).get("pk", {}).get("S", "")]
        keys += [v.get("S", "") for v in params.get("ExpressionAttributeValues", {}).values()]
        asked[:] = [any(k.startswith("Request#") for k in keys)]

    def note(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if asked and asked[0]:
            items = parsed.get("Items", []) + ([parsed["Item"]] if "Item" in parsed else [])
            found.extend(f"{model.name} {i['sk']['S']}" for i in items)

    db = aws.client("dynamodb")
    db.meta.events.register("provide-client-params.dynamodb.*", ask)
    db.meta.events.register("after-call.dynamodb.*", note)
    # When a fresh container serves a new request (its first body is bound before it launches)
    cloud.send(launch_request("fresh-1", nodePool="general"), batch=cloud.fresh_batch())
    # Then none of its own partition's items was read back: not the body's hash it just wrote
    assert found == []
    record = cloud.record("fresh-1")
    assert record is not None and record.launched == 1


def test_a_fresh_container_reads_the_quotas_once_for_a_request(cloud, subnets, image):
    # Given a pool, a quota for the request's requester, and the reads of the quotas counted
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    cloud.apply(capacity_quota("team-a", "general", {"instances": "5"}))
    reads: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = [params.get("Key", {}).get("pk", {}).get("S")]
        keys += [v.get("S") for v in params.get("ExpressionAttributeValues", {}).values()]
        reads.extend(f"{model.name} {k}" for k in keys if k in ("CapacityQuota", "CapacityQuotas"))

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    # When a fresh container serves a request that its quota governs
    request = launch_request("quota-reads-1", nodePool="general", requester="team-a")
    cloud.send(request, batch=cloud.fresh_batch())
    # Then it read the quotas' generations (one Query: the quota set's and each pool's) and
    # their partition once each: the requester's binding and the lease's admission share one read
    assert sorted(reads) == ["Query CapacityQuota", "Query CapacityQuotas"]
    record = cloud.record("quota-reads-1")
    assert record is not None and record.launched == 1
