"""Permanent errors end a request at once with a record naming the field; transient ones are
retried in-process (inside CreateFleet's Errors[] too), and a handed-back message returns soon."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.launch_queue import LaunchQueue
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.backoff import IN_PROCESS_RETRIES
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.startup import system_clock
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)


class Timeline(list[str]):
    """What a launcher (`batch`) did, in order: each CreateFleet call, and each wait through its
    container's pause (which moves the emulator's clock, as the harness's does)."""

    batch: LaunchBatch

    def pause(self, seconds: float) -> None:
        self.append("wait")
        moto_capacity.advance_clock(seconds)

    def waits_between_calls(self) -> list[int]:
        """The waits between one CreateFleet call and the next, for each pair."""
        calls = [i for i, entry in enumerate(self) if entry == "CreateFleet"]
        return [self[a:b].count("wait") for a, b in itertools.pairwise(calls)]


@pytest.fixture
def timeline(cloud: Cloud) -> Iterator[Timeline]:
    """The launcher's CreateFleet calls and waits, its batch built on a pause that records."""
    found = Timeline()

    def called(**_: Any) -> None:
        found.append("CreateFleet")

    events = aws.client("ec2").meta.events
    events.register("provide-client-params.ec2.CreateFleet", called)
    found.batch = cloud.fresh_batch(found.pause)
    yield found
    events.unregister("provide-client-params.ec2.CreateFleet", called)


def _lease_count(cloud: Cloud, pool: str) -> int:
    store = PoolLeaseStore(cloud.names.state_table, 900, aws.client("dynamodb"), clock=time.time)
    return len([lease for lease in store.leases() if lease.pool == pool])


def _apply_class(cloud: Cloud, subnets: dict[str, str], **spec: Any) -> None:
    klass = node_class("broken", [subnets[ZONE]], "ami-0123456789abcdef0", **spec)
    klass["spec"]["securityGroupIds"] = [default_security_group(cloud.ec2)]
    if "imageSsmParameter" in spec:
        del klass["spec"]["imageId"]
    cloud.apply(
        klass,
        node_pool(
            "general",
            "broken",
            requirements=[capacity_type("on-demand"), instance_type("m5.large")],
            limits={"instances": "4"},
        ),
    )


GROUP_KEY = "capacityReservationResourceGroupArn"
MISSING_GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/missing"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"imageSsmParameter": "/aws/service/none/here"}, "spec.imageSsmParameter"),
        ({"subnetIds": ["subnet-0123456789abcdef0"]}, "spec.subnetIds"),
        (
            {"capacityReservationSpec": {"capacityReservationTarget": {GROUP_KEY: MISSING_GROUP}}},
            f"spec.capacityReservationSpec.capacityReservationTarget.{GROUP_KEY}",
        ),
    ],
    ids=["missing-ssm-parameter", "missing-subnet", "missing-reservation-group"],
)
def test_a_permanent_node_class_error_fails_the_request_at_once_naming_the_field(
    cloud: Cloud, subnets: dict[str, str], spec: dict[str, Any], field: str
) -> None:
    # Given a NodeClass naming something AWS refuses for good
    _apply_class(cloud, subnets, **spec)
    # When a request arrives
    handed_back = cloud.send(launch_request("broken-1", nodePool="general"))
    # Then it is not handed back: it ends now, Failed, with a record and an event naming the field
    assert handed_back == []
    record = cloud.record("broken-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert any(e.message.startswith(f"{field}:") for e in record.errors), record.errors
    assert [e["detail-type"] for e in cloud.events()] == ["Launch Failed"]
    # ...and its lease is released (the limit is free for the next request)
    assert _lease_count(cloud, "general") == 0
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage("general")
    assert usage == Resources.ZERO


def test_a_request_naming_no_pool_passes_over_a_pool_whose_node_class_aws_refuses(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a heavier pool whose NodeClass targets a reservation group that does not exist (red
    # team 2: the request was handed back until the DLQ, never trying the next pool), and a
    # lighter pool that can serve
    _apply_class(
        cloud,
        subnets,
        capacityReservationSpec={"capacityReservationTarget": {GROUP_KEY: MISSING_GROUP}},
    )
    setup_pool(cloud, subnets, image, pool="fallback", klass="fine")
    broken = node_pool(
        "general",
        "broken",
        weight=10,
        requirements=[capacity_type("on-demand"), instance_type("m5.large")],
    )
    cloud.apply(broken)
    # When a request naming no pool arrives
    handed_back = cloud.send(launch_request("no-pool-1"))
    # Then it is served by the next pool, and its record says why the first passed it over
    assert handed_back == []
    record = cloud.record("no-pool-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "fallback"
    [passed] = [e for e in record.errors if e.code == "NodePoolPassedOver"]
    assert passed.message.startswith("nodePool general: spec.capacityReservationSpec"), passed


def test_an_image_ec2_does_not_have_fails_the_request_with_its_code_and_spares_the_ice_cache(
    cloud: Cloud, subnets: dict[str, str]
) -> None:
    # Given a NodeClass whose image does not exist (EC2 answers CreateFleet's override with
    # InvalidAMIID.NotFound in Errors[], DESIGN step 7: "missing image" is no capacity fault)
    _apply_class(cloud, subnets, imageId="ami-00000000000000000")
    # When a request arrives
    handed_back = cloud.send(launch_request("no-image-1", nodePool="general"))
    # Then it ends now, Failed with EC2's code and message, and no offering is marked dry
    assert handed_back == []
    record = cloud.record("no-image-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [e.code for e in record.errors] == ["InvalidAMIID.NotFound"], record.errors
    assert "ami-00000000000000000" in record.errors[0].message
    dry = aws.client("dynamodb").scan(TableName=cloud.names.unavailable_offerings_table)
    assert dry["Items"] == []
    assert _lease_count(cloud, "general") == 0


def _on_create_fleet(rewrite: Callable[[int, dict[str, Any]], None]) -> list[int]:
    """Rewrite each CreateFleet answer as EC2 could have sent it (call number, parsed answer)."""
    calls: list[int] = []

    def hook(parsed: dict[str, Any], **_: Any) -> None:
        calls.append(len(calls) + 1)
        rewrite(len(calls), parsed)

    aws.client("ec2").meta.events.register("after-call.ec2.CreateFleet", hook)
    return calls


@pytest.mark.parametrize("code", ["InternalError", "ServiceUnavailable", "Unavailable"])
def test_a_transient_code_inside_create_fleet_errors_is_retried_in_process(
    cloud: Cloud, subnets: dict[str, str], image: str, code: str, timeline: Timeline
) -> None:
    # Given EC2 launches nothing and reports a transient fault for the override (first call only)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)

    def transient_first(call: int, parsed: dict[str, Any]) -> None:
        if call == 1:
            for error in parsed.get("Errors", []):
                error["ErrorCode"] = code
            moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 10)

    calls = _on_create_fleet(transient_first)
    # When 2 instances are requested
    request = launch_request("transient-1", nodePool="general", count=2)
    handed_back = cloud.send(request, batch=timeline.batch)
    # Then they are asked for again after one short wait (not failed for good), and both run
    assert handed_back == []
    assert len(calls) == 2
    assert timeline.waits_between_calls() == [1]
    record = cloud.record("transient-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.launched == 2
    assert sorted(i.instance_id for i in record.instances) == sorted(
        i["InstanceId"] for i in cloud.managed_instances()
    )


def test_throttling_beside_launched_instances_keeps_them_and_retries_the_rest(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a successful CreateFleet that launched 1 and was throttled for the other 2
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)

    def throttled_first(call: int, parsed: dict[str, Any]) -> None:
        if call == 1:
            assert parsed["Instances"], "the first call must launch something"
            for error in parsed.get("Errors", []):
                error["ErrorCode"] = "RequestLimitExceeded"
            moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 10)

    _on_create_fleet(throttled_first)
    # When 3 are requested
    handed_back = cloud.send(launch_request("throttled-1", nodePool="general", count=3))
    # Then the launched instance is kept, the rest launched in this invocation, nothing duplicated
    assert handed_back == []
    record = cloud.record("throttled-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    running = cloud.managed_instances()
    assert len(running) == 3
    assert {i.instance_id for i in record.instances} == {i["InstanceId"] for i in running}


def test_a_fault_that_outlasts_the_retries_hands_back_with_nothing_lost(
    cloud: Cloud, subnets: dict[str, str], image: str, timeline: Timeline
) -> None:
    # Given every CreateFleet answer reports InternalError and launches nothing
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)

    def always_internal(call: int, parsed: dict[str, Any]) -> None:
        for error in parsed.get("Errors", []):
            error["ErrorCode"] = "InternalError"

    calls = _on_create_fleet(always_internal)
    # When a request arrives
    handed_back = cloud.send(launch_request("internal-1", nodePool="general"), batch=timeline.batch)
    # Then it is retried a bounded number of times, then handed back (not failed for good)
    assert len(handed_back) == 1
    assert len(calls) == IN_PROCESS_RETRIES + 1
    assert timeline.waits_between_calls() == [1] * IN_PROCESS_RETRIES
    assert cloud.record("internal-1") is None
    # And once EC2 recovers, the redelivery launches it
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 10)
    aws.client("ec2").meta.events.unregister("after-call.ec2.CreateFleet")
    assert cloud.send(launch_request("internal-1", nodePool="general")) == []
    record = cloud.record("internal-1")
    assert record is not None and record.status is RequestStatus.FULFILLED


def test_transaction_conflicts_are_retried_by_the_client(cloud: Cloud) -> None:
    # Given DynamoDB refuses the next two transactions: another writer touched the same item
    moto_capacity.inject_fault(
        "dynamodb:TransactWriteItems", "TransactionConflictException", times=2
    )
    # When a NodePool is applied (one transaction with its NodeClass)
    cloud.apply(
        node_class("k", ["subnet-0123456789abcdef0"], "ami-0123456789abcdef0"),
        node_pool("p", "k"),
    )
    # Then the client retried through the conflicts, and the pool exists
    (fault,) = moto_capacity.state()["faults"]
    assert fault["fired"] == 2
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    assert store.node_pool("p").metadata.name == "p"


def test_a_handed_back_message_returns_after_seconds_not_the_queues_timeout(
    cloud: Cloud,
) -> None:
    # Given a message received from the launch queue (visibility 720 s), for the 3rd time
    sqs = aws.client("sqs")
    url, arn = cloud.names.launch_queue_url, cloud.names.launch_queue_arn
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    changes: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility",
        lambda params, **_: changes.append(dict(params)),
    )
    message = Message(
        received["MessageId"],
        received["Body"],
        received_at=None,  # type: ignore[arg-type]
        receipt_handle=received["ReceiptHandle"],
        receive_count=3,
        queue_arn=arn,
    )
    # When the launcher hands it back
    LaunchQueue(sqs, rng=lambda: 1.0).hand_back([message])
    # Then it is visible again after a minute at most (8-16 s, 16-32 s, 32-64 s for its 3rd
    # receive, ...; domain/backoff.py), growing with its receive count, not after 720 s
    assert [c["VisibilityTimeout"] for c in changes] == [64]
    assert changes[0]["ReceiptHandle"] == received["ReceiptHandle"]


def test_the_local_event_source_mapping_honours_a_shortened_visibility(cloud: Cloud) -> None:
    # Given the launch queue (visibility 720 s) and the local event source mapping over it,
    # with a function that hands its message back as the launcher does
    from local_cloud.event_sources import QueueEventSource, QueueMapping
    from local_cloud.lambda_runtime import Invocation

    sqs = aws.client("sqs")
    url, arn = cloud.names.launch_queue_url, cloud.names.launch_queue_arn
    queue = LaunchQueue(sqs, rng=lambda: 0.0)

    class HandsBack:
        logical_id, region = "LauncherFunction", "us-east-1"

        def invoke(self, event: dict[str, Any]) -> Invocation:
            (record,) = event["Records"]
            queue.hand_back(
                [
                    Message(
                        record["messageId"],
                        record["body"],
                        received_at=None,  # type: ignore[arg-type]
                        receipt_handle=record["receiptHandle"],
                        receive_count=int(record["attributes"]["ApproximateReceiveCount"]),
                        queue_arn=record["eventSourceARN"],
                    )
                ]
            )
            failures = {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
            return Invocation("LauncherFunction", "id", failures, None, "", 1.0)

    mapping = QueueMapping(url, arn, batch_size=1, report_batch_item_failures=True)
    source = QueueEventSource(HandsBack(), mapping, sqs)  # type: ignore[arg-type]
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    # When the mapping delivers it and the function hands it back
    source._deliver(source._gather())
    # Then it is delivered again seconds later (within 10 s of the emulator's clock, which SQS's
    # visibility reads), its receive count grown, not after 720 s
    again: list[dict[str, Any]] = []
    for _ in range(100):
        again = sqs.receive_message(QueueUrl=url, AttributeNames=["All"]).get("Messages", [])
        if again:
            break
        moto_capacity.advance_clock(0.1)
    assert again and again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_duplicate_of_a_request_in_progress_keeps_the_queues_visibility(
    cloud: Cloud, subnets: dict[str, str], image: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a request another worker is serving right now (its idempotency claim is in progress)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    body = launch_request("busy-1", nodePool="general")
    cloud.batch._claims.claim({"requestId": "busy-1"}, 60_000)  # the idempotency key
    sqs = aws.client("sqs")
    changes: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility",
        lambda params, **_: changes.append(dict(params)),
    )
    sqs.send_message(QueueUrl=cloud.names.launch_queue_url, MessageBody=json.dumps(body))
    received = sqs.receive_message(QueueUrl=cloud.names.launch_queue_url)["Messages"][0]
    duplicate = Message(
        received["MessageId"],
        received["Body"],
        datetime.now(UTC),
        receipt_handle=received["ReceiptHandle"],
        receive_count=1,
        queue_arn=cloud.names.launch_queue_arn,
    )
    # When its duplicate arrives
    handed_back = cloud.batch.process([duplicate], lambda: 60_000)
    # Then it goes back to the queue with the queue's own visibility (its receives are not spent
    # in seconds while the original may run for minutes)
    assert handed_back == [received["MessageId"]]
    assert changes == []
    # and the hand-back is logged, with when the other delivery's claim lapses (issue 34)
    [logged] = [r for r in caplog.records if "in progress in another delivery" in r.message]
    assert (logged.requestId, logged.receiveCount) == ("busy-1", 1)  # type: ignore[attr-defined]
    assert logged.claimHeldUntilMs > time.time() * 1000  # type: ignore[attr-defined]
