"""The AWS a cold start's first invocation talks to: a moto server (with moto_capacity) in this
process, the template's tables, queues and bus, and the benchmarks' pool, reached by the measured
child processes over HTTP (`AWS_ENDPOINT_URL`). The server's work is this process's CPU, so a
child's CPU time is its own: the handler's and botocore's, never the emulator's."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.moto_api._internal.models import moto_api_backend

from benchmarks.scene import REGION, apply_pool, request
from capacity_launcher.adapters import aws
from capacity_launcher.observability import logger
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import Host
from capacity_launcher_cli.deployment import LOCAL_CREDENTIALS
from local_cloud.template import DeployedNames
from tests.support.cloud import TEST_ENV, cloud_of, harness_options

# The template's function for each handler folder.
FUNCTIONS = {
    "launcher": "LauncherFunction",
    "reservation_sync": "ReservationSyncFunction",
    "instance_events": "InstanceEventsFunction",
}
INSTANCE_TYPE = "m5.large"


@dataclass
class Stage:
    """The served cloud, and the events each handler's first invocation gets."""

    endpoint: str
    names: DeployedNames
    # Instances of ours, launched here, for instance events to hear terminated (one per sample).
    spare_instances: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)  # requestIds the launcher samples sent

    def environment(self, handler: str) -> dict[str, str]:
        """What Lambda gives `handler`'s function: the template's variables, resolved, and the
        endpoint standing in for AWS's."""
        function = FUNCTIONS.get(handler, "LauncherFunction")
        return {
            **LOCAL_CREDENTIALS,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            **self.names.environment(function),
        }

    def event(self, handler: str) -> dict[str, Any]:
        """The event of one first invocation: a new launch request (SQS, one record), the
        minute's schedule, an instance of ours terminated (terminated in EC2 first)."""
        now = datetime.now(UTC)
        if handler == "launcher":
            request_id = f"cold-{uuid.uuid4().hex[:12]}"
            self.launched.append(request_id)
            return _sqs_event(self.names, request(request_id), now)
        if handler == "instance_events":
            instance_id = self.spare_instances.pop()
            aws.client("ec2").terminate_instances(InstanceIds=[instance_id])
            return _eventbridge(
                "EC2 Instance State-change Notification",
                "aws.ec2",
                {"instance-id": instance_id, "state": "terminated"},
                now,
            )
        return _eventbridge("Scheduled Event", "aws.events", {}, now)

    def check(self, handler: str, result: Any) -> None:
        """An invocation that failed would time an error path: the run stops instead."""
        done = {
            "launcher": result == {"batchItemFailures": []},
            "instance_events": isinstance(result, dict) and result.get("action") == "released",
            "reservation_sync": isinstance(result, dict) and "synced" in result,
        }.get(handler, True)
        if not done:
            raise RuntimeError(f"{handler}'s invocation did not do its work: {result!r}")

    def unfulfilled(self) -> list[str]:
        """The launcher samples' requests that did not end Fulfilled."""
        records = wiring.Adapters(get_settings()).launch_records()
        found = {r: records.get_record(r) for r in self.launched}
        return [r for r, record in found.items() if record is None or record.status != "Fulfilled"]


def _sqs_event(names: DeployedNames, body: dict[str, Any], now: datetime) -> dict[str, Any]:
    """What Lambda's SQS event source mapping hands the launcher for one message."""
    sent = str(int(now.timestamp() * 1000))
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "cold-start",
                "body": json.dumps(body),
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": sent,
                    "SenderId": "AIDACOLDSTARTSENDER",
                    "ApproximateFirstReceiveTimestamp": sent,
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": names.launch_queue_arn,
                "awsRegion": REGION,
            }
        ]
    }


def _eventbridge(
    detail_type: str, source: str, detail: dict[str, Any], now: datetime
) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [],
        "detail": detail,
    }


@contextmanager
def served_cloud(spare_instances: int = 0) -> Iterator[Stage]:
    """The local cloud on a moto server in this process (tests/support/cloud.py's harness), with
    the benchmarks' pool, and `spare_instances` of ours launched in it (this process's own
    launcher, on the system's clock as in Lambda)."""
    logger.setLevel(logging.ERROR)  # this process's launcher (the spare instances) stays quiet
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's request log
    options = harness_options(
        port=0,
        schedules=False,
        instance_events=False,
        function_host=Host(),
        environment={**TEST_ENV, "MOTO_EC2_LOAD_DEFAULT_AMIS": "true"},
        prepare=moto_api_backend.reset,
    )
    with cloud_of(options, capture_events=False) as cloud:
        apply_pool(cloud, types=(INSTANCE_TYPE,))
        stage = Stage(cloud.local.endpoint_url, cloud.names)
        with redirect_stdout(io.StringIO()):  # this launcher's metrics
            for n in range(spare_instances):
                cloud.send(request(f"spare-{n}"))
        stage.spare_instances = [i["InstanceId"] for i in cloud.managed_instances()]
        if len(stage.spare_instances) < spare_instances:
            raise RuntimeError(f"launched {len(stage.spare_instances)} of {spare_instances}")
        yield stage
