"""Issue 17, "Who is the requester?": a request's `requester` is checked against where it came
from, through both entry paths of the local cloud. Producers send as IAM roles (STS sessions);
the queue's records carry the SenderId SQS sets, and the bus's rule delivers the whole event,
with the `source` and `account` EventBridge set, to the same queue."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import Message
from local_cloud.event_sources import QueueMapping, sqs_event
from local_cloud.lambda_runtime import running
from tests.integration.test_launch_into_gpu_reservations import (
    advance_to,
    buy_block,
    reserved_only_pool,
)
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_quota_admission import POOL, quota
from tests.support.cloud import REGION, Cloud, launch_request

# A record SQS would have stamped (SentTimestamp) is received when it was sent, not at NOW.
NOW = datetime(2026, 11, 28, tzinfo=UTC)

TEAM_A_SOURCE = "team-a.scheduler"


def _producer(role: str) -> tuple[Any, str]:
    """An SQS client acting as a session of a new role, and the role's unique id."""
    iam, sts = boto3.client("iam", region_name=REGION), boto3.client("sts", region_name=REGION)
    created = iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")["Role"]
    credentials = sts.assume_role(RoleArn=created["Arn"], RoleSessionName="scheduler")[
        "Credentials"
    ]
    client = boto3.client(
        "sqs",
        region_name=REGION,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    return client, str(created["RoleId"])


def _deliver(cloud: Cloud) -> list[dict[str, Any]]:
    """What the launch queue's event source mapping does: receive, build Lambda's SQS event,
    run the launcher on it, delete what it did not hand back. Returns the records it built."""
    answer = cloud.sqs.receive_message(
        QueueUrl=cloud.names.launch_queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    messages = answer.get("Messages", [])
    mapping = QueueMapping(cloud.names.launch_queue_url, cloud.names.launch_queue_arn)
    records: list[dict[str, Any]] = sqs_event(messages, mapping, REGION)["Records"]
    with running("LauncherFunction", cloud.environment, cloud.names.account_id):
        handed_back = cloud.batch.process(
            [Message.from_sqs_record(r, NOW) for r in records], lambda: 60_000
        )
    assert handed_back == []
    for message in messages:
        cloud.sqs.delete_message(
            QueueUrl=cloud.names.launch_queue_url, ReceiptHandle=message["ReceiptHandle"]
        )
    return records


def _put_launch_requested(cloud: Cloud, source: str, request: dict[str, Any]) -> None:
    response = boto3.client("events", region_name=REGION).put_events(
        Entries=[
            {
                "Source": source,
                "DetailType": "Launch Requested",
                "Detail": json.dumps(request),
                "EventBusName": cloud.names.event_bus,
            }
        ]
    )
    assert response["FailedEntryCount"] == 0


@pytest.fixture
def pool(cloud: Cloud, subnets: dict[str, str], image: str) -> Cloud:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    return cloud


def _bound_quotas(cloud: Cloud, team_a_sender: str) -> None:
    cloud.apply(
        quota(
            "team-a",
            "4",
            requesterOrigins={
                "team-a": {
                    "eventSources": [TEAM_A_SOURCE],
                    "accounts": [cloud.names.account_id],
                    "queueSenders": [team_a_sender],
                }
            },
        ),
        quota("team-b", "4"),
    )


def _status(cloud: Cloud, request_id: str) -> RequestStatus:
    record = cloud.record(request_id)
    assert record is not None, request_id
    return record.status


def test_queue_records_carry_the_sender_and_only_the_bound_sender_claims_its_requester(
    pool: Cloud,
) -> None:
    team_a, team_a_role = _producer("team-a-scheduler")
    team_b, team_b_role = _producer("team-b-scheduler")
    _bound_quotas(pool, team_a_role)
    url = pool.names.launch_queue_url

    team_a.send_message(
        QueueUrl=url, MessageBody=json.dumps(launch_request("a-own", nodePool=POOL))
    )
    team_b.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(launch_request("b-as-a", nodePool=POOL, requester="team-a")),
    )
    records = _deliver(pool)

    # Lambda's records carry SQS's SenderId: the role's unique id and session
    senders = {r["attributes"]["SenderId"] for r in records}
    assert senders == {f"{team_a_role}:scheduler", f"{team_b_role}:scheduler"}
    # team-a's own sender, with no requester, is served as its one bound requester
    own = pool.record("a-own")
    assert own is not None and own.status is RequestStatus.FULFILLED
    assert own.requester == "team-a"
    # team-b claiming team-a is Rejected, naming the field and the rule, and launches nothing
    refused = pool.record("b-as-a")
    assert refused is not None and refused.status is RequestStatus.REJECTED
    assert [e.code for e in refused.errors] == ["RequesterNotAllowed"]
    assert refused.errors[0].message == (
        f"requester: 'team-a' may be claimed only by bus events from {TEAM_A_SOURCE} in "
        f"{pool.names.account_id} or queue senders {team_a_role} (CapacityQuota "
        f"spec.requesterOrigins); this request is sent to the launch queue by "
        f"{team_b_role}:scheduler, a sender no binding lists"
    )
    assert refused.launched == 0
    assert len(pool.managed_instances()) == 1
    # never retried: a second delivery of the same request replays the rejection
    team_b.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(launch_request("b-as-a", nodePool=POOL, requester="team-a")),
    )
    _deliver(pool)
    assert _status(pool, "b-as-a") is RequestStatus.REJECTED
    assert len(pool.managed_instances()) == 1


def test_a_bound_sender_cannot_borrow_a_bus_origin_by_writing_an_envelope(pool: Cloud) -> None:
    team_b, team_b_role = _producer("team-b-scheduler")
    pool.apply(
        quota(
            "team-a",
            "4",
            requesterOrigins={"team-a": {"eventSources": [TEAM_A_SOURCE]}},
        ),
        quota("team-b", "4", requesterOrigins={"team-b": {"queueSenders": [team_b_role]}}),
    )
    forged = {
        "detail-type": "Launch Requested",
        "source": TEAM_A_SOURCE,
        "account": pool.names.account_id,
        "detail": launch_request("b-forged", nodePool=POOL, requester="team-a"),
    }
    team_b.send_message(QueueUrl=pool.names.launch_queue_url, MessageBody=json.dumps(forged))
    _deliver(pool)

    record = pool.record("b-forged")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert [e.code for e in record.errors] == ["RequesterNotAllowed"]
    assert f"sent to the launch queue by {team_b_role}:scheduler" in record.errors[0].message
    assert pool.managed_instances() == []


def test_bus_events_are_checked_by_source_and_account(pool: Cloud) -> None:
    _, team_a_role = _producer("team-a-scheduler")
    _bound_quotas(pool, team_a_role)

    _put_launch_requested(pool, TEAM_A_SOURCE, launch_request("bus-a", nodePool=POOL))
    _put_launch_requested(
        pool, "team-b.scheduler", launch_request("bus-b-as-a", nodePool=POOL, requester="team-a")
    )
    _put_launch_requested(
        pool, "team-b.scheduler", launch_request("bus-b", nodePool=POOL, requester="team-b")
    )
    records = _deliver(pool)

    # the rule delivers the whole event; EventBridge, not the producer, sent the message
    bodies = [json.loads(r["body"]) for r in records]
    assert {b["source"] for b in bodies} == {TEAM_A_SOURCE, "team-b.scheduler"}
    assert {b["account"] for b in bodies} == {pool.names.account_id}
    assert all(r["attributes"]["SenderId"] != team_a_role for r in records)
    served = pool.record("bus-a")
    assert served is not None and served.status is RequestStatus.FULFILLED
    assert served.requester == "team-a"
    refused = pool.record("bus-b-as-a")
    assert refused is not None and refused.status is RequestStatus.REJECTED
    assert refused.errors[0].code == "RequesterNotAllowed"
    assert refused.errors[0].message.endswith(
        f"this request is a bus event from source 'team-b.scheduler' in account "
        f"{pool.names.account_id!r}"
    )
    # team-b is bound by no quota: it is served for whoever claims it, as before bindings
    assert _status(pool, "bus-b") is RequestStatus.FULFILLED
    assert len(pool.managed_instances()) == 2


def test_without_bindings_requests_are_served_as_they_claim(pool: Cloud) -> None:
    team_b, _ = _producer("team-b-scheduler")
    pool.apply(quota("team-a", "4"))
    team_b.send_message(
        QueueUrl=pool.names.launch_queue_url,
        MessageBody=json.dumps(launch_request("unbound-1", nodePool=POOL, requester="team-a")),
    )
    _put_launch_requested(
        pool, "anyone", launch_request("unbound-2", nodePool=POOL, requester="team-a")
    )
    _deliver(pool)

    for request_id in ("unbound-1", "unbound-2"):
        record = pool.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED
        assert record.requester == "team-a"


def test_a_waiting_request_of_a_bound_sender_comes_back_as_its_requester(
    cloud: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given team-a's scheduler bound to team-a, and a block that starts later
    block = buy_block(cloud)
    reserved_only_pool(cloud, subnets, image, block["CapacityReservationId"])
    team_a, team_a_role = _producer("team-a-scheduler")
    cloud.apply(quota("team-a", "4", requesterOrigins={"team-a": {"queueSenders": [team_a_role]}}))
    deadline = (block["StartDate"] + timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    request = launch_request("a-waits", nodePool=POOL, count=2, waitForCapacityUntil=deadline)
    # When it sends a request that waits for the block
    team_a.send_message(QueueUrl=cloud.names.launch_queue_url, MessageBody=json.dumps(request))
    assert cloud.deliver_queued() == ["a-waits"]
    waiting = cloud.record("a-waits")
    assert waiting is not None and waiting.status is RequestStatus.WAITING, waiting
    assert waiting.requester == "team-a"
    # Then the copy the launcher held (sent by the launcher, not by team-a's scheduler) is
    # served as team-a once the block is active, not rejected for its sender
    advance_to(block["StartDate"], 1)
    assert cloud.deliver_queued() == ["a-waits"]
    done = cloud.record("a-waits")
    assert done is not None and done.status is RequestStatus.FULFILLED, done.to_detail()
    assert done.requester == "team-a"
    assert len(cloud.managed_instances()) == 2


RESERVATION = "prod-res"


def _reservation(**spec: Any) -> dict[str, Any]:
    """An OME reservation's hub quota (docs/ome.md): it covers its associations by prefix."""
    return quota(
        RESERVATION,
        "4",
        requesters=[],
        requesterPrefixes=[f"capacityreservation/{RESERVATION}/"],
        **spec,
    )


def test_a_reservation_admits_only_the_associations_it_lists(pool: Cloud) -> None:
    """docs/ome.md "Who may associate": without associationRequesters anyone may associate with
    a reservation and be counted under its quota; with it, only those listed."""
    pool.apply(_reservation(associationRequesters=["training-cluster"]))
    asks = {
        "listed": {"requester": "training-cluster"},
        "unlisted": {"requester": "team-b"},
        "no-requester": {},
    }
    for request_id, fields in asks.items():
        _put_launch_requested(
            pool,
            "anyone",
            launch_request(request_id, nodePool=POOL, capacityReservation=RESERVATION, **fields),
        )
    # spelled as the association it would be counted as, without naming the reservation
    _put_launch_requested(
        pool,
        "anyone",
        launch_request(
            "spelled", nodePool=POOL, requester=f"capacityreservation/{RESERVATION}/team-b"
        ),
    )
    _deliver(pool)

    served = pool.record("listed")
    assert served is not None and served.status is RequestStatus.FULFILLED, served
    assert served.requester == f"capacityreservation/{RESERVATION}/training-cluster"
    for request_id, association in (
        ("unlisted", "team-b"),
        ("no-requester", "default"),
        ("spelled", "team-b"),
    ):
        refused = pool.record(request_id)
        assert refused is not None and refused.status is RequestStatus.REJECTED, request_id
        assert [e.code for e in refused.errors] == ["RequesterNotAllowed"]
        assert refused.errors[0].message.startswith(
            f"requester: {association!r} may not associate with capacityReservation "
            f"{RESERVATION!r}: CapacityQuota {RESERVATION} spec.associationRequesters lists "
            "only training-cluster"
        ), refused.errors[0].message
    assert len(pool.managed_instances()) == 1


def test_a_reservation_binds_where_its_associations_come_from(pool: Cloud) -> None:
    """A reservation's requesterOrigins binds its associations: another team's source claiming
    one is Rejected, as named or spelled as the requester it is counted as."""
    pool.apply(
        _reservation(
            associationRequesters=["training-cluster"],
            requesterOrigins={"training-cluster": {"eventSources": [TEAM_A_SOURCE]}},
        )
    )
    claim = {"nodePool": POOL, "requester": "training-cluster"}
    _put_launch_requested(
        pool, TEAM_A_SOURCE, launch_request("a", capacityReservation=RESERVATION, **claim)
    )
    _put_launch_requested(
        pool, "team-b.scheduler", launch_request("b", capacityReservation=RESERVATION, **claim)
    )
    _put_launch_requested(
        pool,
        "team-b.scheduler",
        launch_request(
            "b-spelled",
            nodePool=POOL,
            requester=f"capacityreservation/{RESERVATION}/training-cluster",
        ),
    )
    _deliver(pool)

    assert _status(pool, "a") is RequestStatus.FULFILLED
    for request_id in ("b", "b-spelled"):
        refused = pool.record(request_id)
        assert refused is not None and refused.status is RequestStatus.REJECTED, request_id
        assert refused.errors[0].code == "RequesterNotAllowed"
        assert refused.errors[0].message.startswith(
            f"requester: 'training-cluster' may be claimed only by bus events from "
            f"{TEAM_A_SOURCE} in any account"
        ), refused.errors[0].message
    assert len(pool.managed_instances()) == 1
