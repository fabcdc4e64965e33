"""Issue 24, defect 3: a request that meets thousands of dry offerings keeps its record, its event
and its idempotency item within their limits (DynamoDB's 400 KB item, EventBridge's 256 KB
entry), so it is recorded, published and never dead-lettered, and its instances are named."""

from __future__ import annotations

import json
import time
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.domain.launch_request import TOO_DEEP
from capacity_launcher.domain.records.detail_limits import DETAIL_TRUNCATED
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE
from tests.support.cloud import Cloud, capacity_type, launch_request, node_class, node_pool

DYNAMODB_ITEM_BYTES = 400 * 1024
EVENT_ENTRY_BYTES = 256 * 1024
# The one offering left open: everything else the broad pool could use is cached dry.
OPEN = f"on-demand:m5.large:{ZONE}"


def _offerings(cloud: Cloud) -> list[str]:
    """Every on-demand and spot offering of every type EC2 offers in every zone."""
    pages = cloud.ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone"
    )
    pairs = {(o["InstanceType"], o["Location"]) for p in pages for o in p["InstanceTypeOfferings"]}
    return [f"{kind}:{t}:{z}" for t, z in sorted(pairs) for kind in ("on-demand", "spot")]


def _cache_dry(cloud: Cloud, offerings: list[str]) -> None:
    """Another worker's answers a moment ago: the shared ICE cache holds each offering as dry."""
    expires = str(int(time.time()) + 180)
    items = [
        {
            "PutRequest": {
                "Item": {
                    "offering": {"S": key},
                    "reason": {"S": "InsufficientInstanceCapacity"},
                    "message": {"S": "We currently do not have sufficient capacity."},
                    "cachedAt": {"S": "2026-01-01T00:00:00Z"},
                    "expiresAt": {"N": expires},
                }
            }
        }
        for key in offerings
    ]
    table = cloud.names.unavailable_offerings_table
    for start in range(0, len(items), 25):
        aws.client("dynamodb").batch_write_item(RequestItems={table: items[start : start + 25]})


def _broad_pool(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    sg = cloud.ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
    cloud.apply(
        node_class("broad", sorted(subnets.values()), image, securityGroupIds=[sg]),
        node_pool("broad", "broad", requirements=[capacity_type("on-demand", "spot")]),
    )


def _stored_items(cloud: Cloud, request_id: str) -> dict[str, Any]:
    db = aws.client("dynamodb")
    record = db.get_item(
        TableName=cloud.names.state_table,
        Key={"pk": {"S": f"Request#{request_id}"}, "sk": {"S": "Record"}},
    )["Item"]
    claims = db.scan(TableName=cloud.names.idempotency_table)["Items"]
    return {"record": record, "claims": claims}


def _item_bytes(item: dict[str, Any]) -> int:
    """An upper bound of DynamoDB's size of an item: names and values in UTF-8."""
    return sum(len(name.encode()) + len(json.dumps(value).encode()) for name, value in item.items())


def test_thousands_of_dry_offerings_keep_the_record_the_event_and_the_instance(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a broad pool (every type, every zone, on-demand and spot) and a shared ICE cache that
    # holds all of its offerings but one as dry (thousands: far over 400 KB as a list)
    _broad_pool(cloud, subnets, image)
    dry = [o for o in _offerings(cloud) if o != OPEN]
    assert len(dry) > 3000
    _cache_dry(cloud, dry)

    # When a request arrives
    handed_back = cloud.send(launch_request("broad-1", nodePool="broad"))

    # Then its delivery is done (not handed back towards the DLQ) and its record is stored,
    # naming the instance it launched, the dry offerings it could keep, and how many it left out
    assert handed_back == []
    record = cloud.record("broad-1")
    assert record is not None, "no record: the request was lost"
    assert record.status is RequestStatus.FULFILLED
    (instance,) = record.instances
    assert instance.instance_type == "m5.large"
    assert [i["InstanceId"] for i in cloud.managed_instances()] == [instance.instance_id]
    truncated = record.detail_truncated
    assert truncated is not None
    offerings = truncated["unavailableOfferings"]
    # (every dry offering of a type the image can run: thousands)
    assert 3000 < offerings.total <= len(dry)
    assert 0 < offerings.kept == len(record.unavailable_offerings) < offerings.total
    assert [e.code for e in record.errors] == [DETAIL_TRUNCATED]

    # And its event is published with the same detail, within EventBridge's limit
    (event,) = [e for e in cloud.events() if e["detail"].get("requestId") == "broad-1"]
    assert event["detail-type"] == "Launch Fulfilled"
    assert event["detail"] == record.to_detail()
    assert len(json.dumps(event["detail"]).encode()) < EVENT_ENTRY_BYTES

    # And the stored items (the record, the idempotency claim) are within DynamoDB's limit
    stored = _stored_items(cloud, "broad-1")
    assert _item_bytes(stored["record"]) < DYNAMODB_ITEM_BYTES
    assert all(_item_bytes(claim) < DYNAMODB_ITEM_BYTES for claim in stored["claims"])

    # And a redelivery re-publishes the recorded outcome, launching nothing more
    assert cloud.send(launch_request("broad-1", nodePool="broad")) == []
    (replayed,) = [e for e in cloud.events() if e["detail"].get("requestId") == "broad-1"]
    assert replayed["detail"] == record.to_detail()
    assert len(cloud.managed_instances()) == 1


def test_a_body_nested_thousands_deep_with_a_request_id_is_recorded_as_rejected(
    cloud: Cloud,
) -> None:
    # Given a body nested 50,000 deep (issue 24, defect 5) that carries a valid requestId
    nested = "[" * 50_000 + "]" * 50_000
    body = '{"requestId": "deep-1", "nodePool": "general", "count": 2, "requirements": '
    # When it is delivered
    handed_back = cloud.send(body + nested + "}")
    # Then it is deleted, with a Rejected record naming the field and the rule, and its event
    assert handed_back == []
    record = cloud.record("deep-1")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert (record.node_pool, record.requested) == ("general", 2)
    assert [e.message for e in record.errors] == [f"requirements: {TOO_DEEP}"]
    (event,) = cloud.events()
    assert event["detail-type"] == "Launch Rejected"
    assert event["detail"] == record.to_detail()
