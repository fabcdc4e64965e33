"""Edges a real producer hits: bodies sharing a requestId, tags a request may not override, a
NodeClass naming a reservation that does not exist, and an instance type that does not exist."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.startup import system_clock
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)

# The calls that put a request record.
OPERATIONS = ("PutItem", "BatchWriteItem")


def items_put(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The items a PutItem or BatchWriteItem call's parameters put."""
    items = [params["Item"]] if "Item" in params else []
    return items + [
        write["PutRequest"]["Item"]
        for writes in params.get("RequestItems", {}).values()
        for write in writes
        if "PutRequest" in write
    ]


def refuse_the_next_record_put() -> None:
    """DynamoDB answers the next call putting a request record (a PutItem, or the BatchWriteItem
    of a visit's records) with ConditionalCheckFailedException (as the simulation's fault does,
    condition or not); other puts are left alone."""

    def refuse(params: dict[str, Any], model: Any, **_: object) -> None:
        if any(i.get("sk", {}).get("S") == "Record" for i in items_put(params)):
            for operation in OPERATIONS:
                aws.client("dynamodb").meta.events.unregister(
                    f"provide-client-params.dynamodb.{operation}", refuse
                )
            moto_capacity.inject_fault(
                f"dynamodb:{model.name}", "ConditionalCheckFailedException", times=1
            )

    for operation in OPERATIONS:
        aws.client("dynamodb").meta.events.register(
            f"provide-client-params.dynamodb.{operation}", refuse
        )


def test_an_invalid_body_sharing_a_valid_requests_id_in_one_batch_does_not_reject_it(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool, and a batch where an invalid body comes first with the same requestId
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    invalid = {"requestId": "shared-1", "count": 0}
    valid = launch_request("shared-1", nodePool="general")
    # When the batch is served
    handed_back = cloud.send(invalid, valid)
    # Then the valid request is served and is the only outcome published for that id
    assert handed_back == []
    record = cloud.record("shared-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert [e["detail-type"] for e in cloud.events()] == ["Launch Fulfilled"]


def test_an_invalid_body_that_came_first_keeps_its_request_id(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # The requestId is bound to the first body it arrives with (docs/contracts.md), an invalid
    # keyed body included: whichever container sees which body first, the id has one outcome.
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.send(json.dumps({"requestId": "shared-2", "count": "many"}))
    assert cloud.record("shared-2").status is RequestStatus.REJECTED  # type: ignore[union-attr]

    cloud.send(launch_request("shared-2", nodePool="general"))

    record = cloud.record("shared-2")
    assert record is not None and record.status is RequestStatus.REJECTED, record
    assert [e.code for e in record.errors] == ["InvalidLaunchRequest"]
    assert cloud.managed_instances() == []
    refused = [e for e in cloud.events() if e["detail"]["requestId"] == "shared-2"][-1]
    assert refused["detail"]["errors"][0]["code"] == "RequestIdReused"


def test_a_request_tag_cannot_override_a_node_class_tag(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a NodeClass tagging its instances team=ml
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    _tag_class(cloud, {"team": "ml"})
    # When one request sets team=finance, and two others (coalesced) set their own tags
    cloud.send(
        launch_request("tag-bad", nodePool="general", tags={"team": "finance"}),
        launch_request("tag-a", nodePool="general", tags={"project": "a", "team": "ml"}),
        launch_request("tag-b", nodePool="general", tags={"project": "b"}),
    )
    # Then the overriding one is rejected, naming the key
    bad = cloud.record("tag-bad")
    assert bad is not None and bad.status is RequestStatus.REJECTED
    assert [e.code for e in bad.errors] == ["TagConflict"]
    assert bad.errors[0].message.startswith("tags.team: ")
    # and every launched instance keeps team=ml, with its own request's tags
    tags = {
        i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        for i in cloud.managed_instances()
    }
    assert len(tags) == 2
    assert {t["team"] for t in tags.values()} == {"ml"}
    assert sorted(t["project"] for t in tags.values()) == ["a", "b"]


def _tag_class(cloud: Cloud, tags: dict[str, str]) -> None:
    from capacity_launcher.adapters import aws
    from capacity_launcher.adapters.config_store import ConfigStore
    from capacity_launcher.domain.apis.documents import parse_document, to_document

    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    document = to_document(store.node_class("standard"))
    document["spec"]["tags"] = tags
    store.apply(parse_document(document))


def test_a_node_class_targeting_a_missing_reservation_says_so_in_the_record(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a NodeClass that targets a reservation id EC2 does not have, in a pool that may
    # fall back to on-demand
    missing = "cr-0123456789abcdef0"
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": missing}},
    )
    # When a request launches
    cloud.send(launch_request("no-odcr-1", nodePool="general"))
    # Then it runs on-demand, and the record says the reservation was not there
    record = cloud.record("no-odcr-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_type for i in record.instances] == ["on-demand"]
    assert [e.code for e in record.errors] == ["CapacityReservationNotFound"]
    assert missing in record.errors[0].message
    assert record.errors[0].message.startswith(
        "spec.capacityReservationSpec.capacityReservationTarget.capacityReservationId: "
    )


def test_an_invalid_bodys_rejection_is_published_even_if_the_first_delivery_could_not(
    cloud: Cloud,
) -> None:
    # Given EventBridge refusing the first PutEvents (found by the simulation, seed 13)
    moto_capacity.inject_fault("events:PutEvents", "InternalException", times=1)
    invalid = {"requestId": "bad-once", "count": 0}
    # When the invalid body comes, is handed back, and comes again
    assert len(cloud.send(invalid)) == 1
    assert cloud.send(invalid) == []
    # Then its rejection is recorded once and published
    record = cloud.record("bad-once")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert [e["detail-type"] for e in cloud.events()] == ["Launch Rejected"]


def test_a_record_put_that_fails_is_never_taken_for_written(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given DynamoDB answering the record's (unconditional) PutItem with an error once; the
    # simulation injects ConditionalCheckFailedException there (seed 3: req-3-446 published
    # Failed with no record)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))

    refuse_the_next_record_put()
    request = launch_request("record-once", nodePool="general")
    # When the first delivery cannot write the record
    assert len(cloud.send(request)) == 1
    # Then nothing is published without a record; the retry records and publishes once
    assert cloud.record("record-once") is None
    assert cloud.events() == []
    assert cloud.send(request) == []
    record = cloud.record("record-once")
    assert record is not None and record.status is RequestStatus.FULFILLED
    events = cloud.events()
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled"]
    assert events[0]["detail"]["instances"] == record.to_detail()["instances"]


def test_an_invalid_bodys_rejection_is_not_published_when_its_record_put_was_refused(
    cloud: Cloud,
) -> None:
    # Given DynamoDB refusing the rejection record's conditional put once, with no record there
    refuse_the_next_record_put()
    invalid = {"requestId": "bad-refused", "count": 0}
    # When the invalid body comes, is handed back, and comes again
    assert len(cloud.send(invalid)) == 1
    assert cloud.record("bad-refused") is None
    assert cloud.events() == []
    assert cloud.send(invalid) == []
    # Then its rejection is recorded and published once
    record = cloud.record("bad-refused")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert [e["detail-type"] for e in cloud.events()] == ["Launch Rejected"]


def test_a_request_naming_an_unknown_instance_type_ends_with_a_status_naming_the_field(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool that does not pin instance types
    cloud.apply(
        node_class(
            "open-types",
            list(subnets.values()),
            image,
            securityGroupIds=[default_security_group(cloud.ec2)],
        ),
        node_pool("any-type", "open-types", requirements=[capacity_type("on-demand")]),
    )
    # When a request narrows it to an instance type that does not exist (a typo)
    handed_back = cloud.send(
        launch_request(
            "typo-type", nodePool="any-type", requirements=[instance_type("m5.nonsense")]
        )
    )
    # Then it is Rejected, not retried (DESIGN: bad input gets a clear error, nothing is retried
    # forever), with an error naming the field, the unknown value and the rule
    assert handed_back == []
    record = cloud.record("typo-type")
    assert record is not None and record.status is RequestStatus.REJECTED, record
    assert cloud.managed_instances() == []
    (error,) = record.errors
    assert "node.kubernetes.io/instance-type" in error.message, record.to_detail()
    assert "m5.nonsense" in error.message and "does not exist" in error.message, error


def test_a_node_pool_naming_an_unknown_instance_type_rejects_with_a_status_naming_it(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    # Given a pool whose requirements name one real and two unknown instance types
    setup_pool(cloud, subnets, image, types=("m5.large", "m5.nonsense", "m5.typo"))
    # When a request that narrows nothing asks it for an instance
    handed_back = cloud.send(launch_request("pool-typo", nodePool="general"))
    # Then it is Rejected, not retried, naming the pool's field and only the unknown value
    # (EC2 refuses the whole DescribeInstanceTypes for one unknown name: InvalidInstanceType)
    assert handed_back == []
    record = cloud.record("pool-typo")
    assert record is not None and record.status is RequestStatus.REJECTED, record
    (error,) = record.errors
    assert error.code == "InvalidInstanceType", error
    assert error.message.startswith("NodePool general spec.requirements: "), error
    assert "node.kubernetes.io/instance-type: m5.nonsense, m5.typo: does not exist" in error.message
    # (found by asking alone only the names no zone offers: the call for all three, then two)
    assert ec2_calls["DescribeInstanceTypes"] == 3, ec2_calls


def test_a_served_request_delivered_again_after_its_pool_is_gone_keeps_its_outcome(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a request Fulfilled in its pool
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    request = launch_request("late-1", nodePool="general")
    cloud.send(request)
    served = cloud.record("late-1")
    assert served is not None and served.status is RequestStatus.FULFILLED, served
    cloud.events()
    # When its idempotency claim has expired (its window is shorter than the record's
    # retention), the pool is deleted, and the same body is delivered again
    db = aws.client("dynamodb")
    table = cloud.names.idempotency_table
    for item in db.scan(TableName=table)["Items"]:
        db.delete_item(TableName=table, Key={"id": item["id"]})
    ConfigStore(cloud.names.state_table, db, clock=system_clock).delete_pool("general")
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then it is not Rejected: its recorded outcome stands and is published again
    again = cloud.record("late-1")
    assert again is not None and again.to_detail() == served.to_detail()
    events = cloud.events()
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled"]
    assert events[0]["detail"]["instances"] == served.to_detail()["instances"]
