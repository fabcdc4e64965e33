"""An in-process cloud for integration tests: moto (+ moto_capacity), the template's resources,
the launcher wired to them, and the status events captured from the bus."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters import fleet as fleet_adapter
from capacity_launcher.adapters.config_store import Kind
from capacity_launcher.domain.documents import parse_document
from capacity_launcher.domain.status import RequestRecord
from capacity_launcher.service import wiring
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.settings import get_settings
from capacity_launcher_cli.deployment import LOCAL_CREDENTIALS
from local_cloud.lambda_runtime import running
from local_cloud.status_events import capture_status_events
from tests.support.template import DeployedNames, create_resources

REGION = "us-east-1"
FAKE_ENV = {
    **LOCAL_CREDENTIALS,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_METRICS_NAMESPACE": "CapacityLauncher",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
# EC2's eventual consistency is on in every integration test, as on AWS: fresh instance ids stay
# unknown, and new reservations `pending`, for these seconds of the emulator's clock.
INSTANCE_VISIBILITY_SECONDS = 3
RESERVATION_PENDING_SECONDS = 3


@dataclass
class Cloud:
    names: DeployedNames
    environment: dict[str, str]
    events_queue_url: str
    _batch: LaunchBatch | None = field(default=None, repr=False)

    @property
    def ec2(self) -> Any:
        return aws.client("ec2")

    @property
    def sqs(self) -> Any:
        return aws.client("sqs")

    def fresh_batch(self) -> LaunchBatch:
        """A new launcher, as a new container would build it (own caches, same tables)."""
        return wiring.build_launch_batch(wiring.idempotency_config(get_settings()))

    @property
    def batch(self) -> LaunchBatch:
        if self._batch is None:
            self._batch = self.fresh_batch()
        return self._batch

    def apply(self, *documents: Mapping[str, Any]) -> None:
        store = wiring.config_store(get_settings())
        for document in documents:
            store.apply(parse_document(document))

    def delete(self, kind: Kind, name: str) -> None:
        wiring.config_store(get_settings()).delete(kind, name)

    def send(self, *bodies: Any, batch: LaunchBatch | None = None) -> list[str]:
        """Deliver one SQS batch to the launcher; returns the message ids handed back."""
        now = datetime.now(UTC)
        messages = [
            Message(
                f"m-{i}-{uuid.uuid4().hex[:8]}",
                b if isinstance(b, str) else json.dumps(b),
                now,
                queue_arn=self.names.launch_queue_arn,
            )
            for i, b in enumerate(bodies)
        ]
        return self._process(messages, batch)

    def _process(self, messages: list[Message], batch: LaunchBatch | None = None) -> list[str]:
        with running("LauncherFunction", self.environment, self.names.account_id):
            return (batch or self.batch).process(messages, lambda: 60_000)

    def deliver_queued(self, batch: LaunchBatch | None = None) -> list[str]:
        """What the event source mapping does once: receive what the launch queue has visible now
        (held requests whose delay passed on the emulator's clock), invoke the launcher, delete
        the messages it did not hand back. Returns the requestIds delivered."""
        sqs = self.sqs
        url = self.names.launch_queue_url
        received = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        messages = [
            Message(
                m["MessageId"],
                m["Body"],
                datetime.fromtimestamp(int(m["Attributes"]["SentTimestamp"]) / 1000, UTC),
                receipt_handle=m["ReceiptHandle"],
                receive_count=int(m["Attributes"]["ApproximateReceiveCount"]),
                queue_arn=self.names.launch_queue_arn,
                sender_id=m["Attributes"].get("SenderId"),
            )
            for m in received
        ]
        failed = set(self._process(messages, batch)) if messages else set()
        for m in received:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return [json.loads(m["Body"])["requestId"] for m in received]

    def queued(self) -> int:
        """Messages in the launch queue, visible or not yet (delayed, in flight)."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.names.launch_queue_url, AttributeNames=["All"]
        )["Attributes"]
        return sum(
            int(attributes[k])
            for k in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesDelayed",
                "ApproximateNumberOfMessagesNotVisible",
            )
        )

    def record(self, request_id: str) -> RequestRecord | None:
        return wiring.launch_records(get_settings()).get_record(request_id)

    def events(self) -> list[dict[str, Any]]:
        """Every event published on our bus since the last call (drained from a capture queue)."""
        found: list[dict[str, Any]] = []
        while True:
            response = self.sqs.receive_message(
                QueueUrl=self.events_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            messages = response.get("Messages", [])
            if not messages:
                return found
            for message in messages:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.events_queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def wait_out_consistency(self) -> None:
        """What a caller on AWS does before reading: wait until fresh resources are visible."""
        moto_capacity.advance_clock(max(INSTANCE_VISIBILITY_SECONDS, RESERVATION_PENDING_SECONDS))

    def wait_until_active(self, reservation_id: str) -> None:
        """A new reservation is `pending` first; wait (on the emulator's clock) as a user would."""
        for _ in range(RESERVATION_PENDING_SECONDS + 1):
            found = self.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
            if found["CapacityReservations"][0]["State"] == "active":
                return
            moto_capacity.advance_clock(1)
        raise AssertionError(f"{reservation_id} never became active")

    def managed_instances(self) -> list[dict[str, Any]]:
        """Managed instances that EC2 lists (after waiting out its consistency delay)."""
        self.wait_out_consistency()
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag:capacity-launcher:managed", "Values": ["true"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return [i for p in pages for r in p["Reservations"] for i in r["Instances"]]


@contextmanager
def local_cloud(monkeypatch: Any, **parameters: Any) -> Iterator[Cloud]:
    for name, value in FAKE_ENV.items():
        monkeypatch.setenv(name, value)
    moto_capacity.install()
    with mock_aws():
        moto_capacity.reset()
        moto_capacity.set_consistency(INSTANCE_VISIBILITY_SECONDS, RESERVATION_PENDING_SECONDS)
        # The service's backoff on fresh ids moves the emulator's clock instead of sleeping.
        monkeypatch.setattr(fleet_adapter, "pause", moto_capacity.advance_clock)
        names, environment = deploy(monkeypatch, parameters=parameters)
        events_queue_url = capture_status_events(
            aws.client("sqs"), aws.client("events"), names.event_bus, "captured-status-events"
        )
        try:
            yield Cloud(names, environment, events_queue_url)
        finally:
            moto_capacity.reset()
            aws.client.cache_clear()
            get_settings.cache_clear()


def deploy(monkeypatch: Any, **options: Any) -> tuple[DeployedNames, dict[str, str]]:
    """The template's resources (`options` go to `create_resources`), and the launcher's
    environment set for this process, its clients and settings made afresh."""
    aws.client.cache_clear()
    get_settings.cache_clear()
    names = create_resources(boto3.Session(region_name=REGION), **options)
    environment = names.environment("LauncherFunction")
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    return names, environment


def default_subnets(ec2: Any) -> dict[str, str]:
    """zone → the default VPC's subnet in it (moto makes one per zone)."""
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    return {s["AvailabilityZone"]: s["SubnetId"] for s in subnets["Subnets"]}


def an_image(ec2: Any) -> str:
    """A Linux AMI (reservations match on platform, and moto's first image is Windows)."""
    images = ec2.describe_images(Owners=["amazon"])["Images"]
    return str(next(i["ImageId"] for i in images if i.get("Platform") != "windows"))


def default_security_group(ec2: Any) -> str:
    groups = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["default"]}])
    return str(groups["SecurityGroups"][0]["GroupId"])


def node_class(name: str, subnet_ids: list[str], image_id: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": name},
        "spec": {
            "imageId": image_id,
            "subnetIds": subnet_ids,
            "securityGroupIds": ["sg-0123456789abcdef0"],
            **spec,
        },
    }


def node_pool(name: str, node_class_ref: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"nodeClassRef": node_class_ref, **spec},
    }


def capacity_type(*values: str) -> dict[str, Any]:
    return {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(values)}


def instance_type(*values: str) -> dict[str, Any]:
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(values)}


def launch_request(request_id: str, **fields: Any) -> dict[str, Any]:
    return {"requestId": request_id, "count": 1, **fields}
