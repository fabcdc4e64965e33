"""The integration tests' cloud: the local cloud in process (local_cloud.cloud: moto with
moto_capacity, the template's resources, the service composed on the emulator's clock), with
the tests' conveniences on top: EC2's consistency delays on, the status events captured from the
bus, and the launcher driven by hand (one SQS batch, one event source mapping poll)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from botocore.exceptions import ClientError

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import Kind
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.launch import LaunchBatch, Message
from capacity_launcher.service.wiring import Adapters
from capacity_launcher.startup import Host
from local_cloud.cloud import LocalCloud, LocalCloudOptions
from local_cloud.karpenter import alias_parameters, node_role
from local_cloud.lambda_runtime import running
from local_cloud.network import prepare_network
from local_cloud.template import DEFAULT_ACCOUNT_ID
from moto_capacity.core.clock import CLOCK
from tests.support.event_registry import check_registered
from tests.support.moto_images import first_linux_image
from tests.support.template import DeployedNames

REGION = "us-east-1"
TEST_ENV = {
    "POWERTOOLS_METRICS_NAMESPACE": "CapacityLauncher",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
# EC2's eventual consistency is on in every integration test, as on AWS: fresh instance ids stay
# unknown, and new reservations `pending`, for these seconds of the emulator's clock.
INSTANCE_VISIBILITY_SECONDS = 3
RESERVATION_PENDING_SECONDS = 3


# The service runs on the emulator's clock, as it would read AWS's, and its waits (on fresh ids,
# on claims) move that clock instead of sleeping.
HOST = Host(clock=CLOCK.now, pause=moto_capacity.advance_clock)


def emulator_seconds() -> int:
    """Now on the emulator's clock (epoch seconds): what the service stamps its expiries from."""
    return int(CLOCK.now().timestamp())


@dataclass
class Cloud:
    local: LocalCloud
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

    @property
    def host(self) -> Host:
        return self.local.options.function_host

    def adapters(self, pause: Callable[[float], None] | None = None) -> Adapters:
        """A container's composition on the emulator's clock; `pause` replaces its waits."""
        return self.local.adapters(pause)

    def fresh_batch(self, pause: Callable[[float], None] | None = None) -> LaunchBatch:
        """A new launcher, as a new container would build it (own caches, same tables)."""
        adapters = self.adapters(pause)
        return adapters.launch_batch(adapters.idempotency_config())

    @property
    def batch(self) -> LaunchBatch:
        if self._batch is None:
            self._batch = self.fresh_batch()
        return self._batch

    def apply(self, *documents: Mapping[str, Any]) -> None:
        configuration = self.adapters().configuration()
        for document in documents:
            configuration.apply(parse_document(document))

    def delete(self, kind: Kind, name: str) -> None:
        self.adapters().configuration().delete(kind, name)

    def send(self, *bodies: Any, batch: LaunchBatch | None = None) -> list[str]:
        """Deliver one SQS batch to the launcher; returns the message ids handed back."""
        now = CLOCK.now()
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

    def deliver_queued(self, batch: LaunchBatch | None = None, limit: int = 10) -> list[str]:
        """What the event source mapping does once: receive what the launch queue has visible now
        (held requests whose delay passed on the emulator's clock; at most `limit`), invoke the
        launcher, delete the messages it did not hand back. Returns the requestIds delivered."""
        sqs = self.sqs
        url = self.names.launch_queue_url
        received = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=limit, AttributeNames=["All"]
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
        return self.adapters().launch_records().get_record(request_id)

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
                event = json.loads(message["Body"])
                check_registered(event)  # every event as the schema registry publishes it
                found.append(event)
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


_CURRENT: list[Cloud] = []


def current() -> Cloud:
    """The cloud the running test built (for helpers that take none)."""
    assert _CURRENT, "inside local_cloud() only"
    return _CURRENT[-1]


def harness_options(**options: Any) -> LocalCloudOptions:
    """The local cloud as the tests drive it: this process is the launcher's container (the test
    calls the service), no function loaded nor trigger run, the network as moto makes it."""
    defaults: dict[str, Any] = {
        "region": REGION,
        "as_launcher": True,
        "wire_functions": False,
        "example_network": False,
        "environment": TEST_ENV,
    }
    return LocalCloudOptions(**{**defaults, **options})


@contextmanager
def cloud_of(options: LocalCloudOptions, *, capture_events: bool = True) -> Iterator[Cloud]:
    """The local cloud started with `options`, with the tests' conveniences on top."""
    if capture_events:
        options = replace(options, status_events_queue="captured-status-events")
    with LocalCloud(options) as local:
        assert local.names is not None
        events_queue_url = local.status_events_url or ""
        environment = local.names.environment("LauncherFunction")
        cloud = Cloud(local, local.names, environment, events_queue_url)
        _CURRENT.append(cloud)
        try:
            yield cloud
        finally:
            _CURRENT.remove(cloud)


@contextmanager
def local_cloud(
    monkeypatch: Any, *, example_network: bool = False, **parameters: Any
) -> Iterator[Cloud]:
    """The local cloud in process, on the emulator's clock, with EC2's consistency delays
    (`monkeypatch`: kept for the callers' signature; the cloud puts the environment back);
    `example_network`: with what Karpenter's examples expect (local_cloud/karpenter.py)."""
    options = harness_options(
        parameters=parameters,
        example_network=example_network,
        in_process=True,
        function_host=HOST,
        consistency_seconds=(INSTANCE_VISIBILITY_SECONDS, RESERVATION_PENDING_SECONDS),
        reuse_resources=True,
    )
    with cloud_of(options) as cloud:
        yield cloud


def default_subnets(ec2: Any) -> dict[str, str]:
    """zone → the default VPC's subnet in it (moto makes one per zone)."""
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    return {s["AvailabilityZone"]: s["SubnetId"] for s in subnets["Subnets"]}


def an_image(ec2: Any) -> str:
    """A Linux AMI (reservations match on platform, and moto's first image is Windows): the first
    Linux one moto lists, asked for by id (its catalogue says which), not found among them all."""
    image_id = first_linux_image()
    if image_id is not None:
        try:
            (image,) = ec2.describe_images(ImageIds=[image_id])["Images"]
        except ClientError as error:
            if error.response["Error"]["Code"] != "InvalidAMIID.NotFound":
                raise
        else:
            if image.get("Platform") != "windows":
                return image_id
    # A catalogue moto did not load after all (moto imported before MOTO_AMIS_PATH was set).
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


def apply_karpenter_example(cloud: Cloud, path: Path) -> None:
    """One of Karpenter's examples applied as written (its EC2NodeClasses first), on the
    discovery-tagged network, the aliases' public parameters and the node role it names."""
    prepare_network(cloud.ec2)
    alias_parameters(cloud.ec2, DEFAULT_ACCOUNT_ID, REGION)
    node_role(aws.client("iam"))
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    configuration = cloud.adapters().configuration()
    for kind in ("EC2NodeClass", "NodePool"):
        for document in (d for d in documents if d["kind"] == kind):
            applied = REGISTRY.read(document)
            configuration.apply(applied.conversion.hub, applied.conversion.kept)
