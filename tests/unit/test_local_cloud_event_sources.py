"""The SQS event source mapping's rules, and the runtime that runs a function in-process."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import moto_capacity
from capacity_launcher.startup import Host
from local_cloud.event_sources import (
    QueueEventSource,
    QueueMapping,
    schedule_seconds,
    sqs_event,
)
from local_cloud.lambda_runtime import Invocation, LocalFunction

MESSAGES = [
    {"MessageId": "m1", "ReceiptHandle": "r1", "Body": "{}", "Attributes": {"SentTimestamp": "1"}},
    {"MessageId": "m2", "ReceiptHandle": "r2", "Body": "{}", "Attributes": {}},
]


class _Function:
    logical_id = "Fn"
    region = "us-east-1"

    def __init__(self, result: Any = None, error: dict[str, Any] | None = None) -> None:
        self.events: list[Any] = []
        self._result, self._error = result, error

    def invoke(self, event: Any) -> Invocation:
        self.events.append(event)
        return Invocation("Fn", "id", self._result, self._error, "", 1.0)


class _Queue:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> None:
        self.deleted += [e["ReceiptHandle"] for e in Entries]


def _deliver(function: _Function, report: bool = True) -> _Queue:
    queue = _Queue()
    mapping = QueueMapping("url", "arn:aws:sqs:us-east-1:1:q", report_batch_item_failures=report)
    QueueEventSource(function, mapping, queue)._deliver(MESSAGES)  # type: ignore[arg-type]
    return queue


def test_only_the_reported_failures_stay_in_the_queue() -> None:
    function = _Function({"batchItemFailures": [{"itemIdentifier": "m2"}]})

    assert _deliver(function).deleted == ["r1"]


def test_a_failed_invocation_leaves_the_whole_batch() -> None:
    function = _Function(error={"errorType": "RuntimeError", "errorMessage": "boom"})

    assert _deliver(function).deleted == []


def test_an_unknown_or_empty_item_identifier_fails_the_whole_batch() -> None:
    assert _deliver(_Function({"batchItemFailures": [{"itemIdentifier": "other"}]})).deleted == []
    assert _deliver(_Function({"batchItemFailures": [{"itemIdentifier": ""}]})).deleted == []


def test_without_report_batch_item_failures_a_success_deletes_everything() -> None:
    function = _Function({"batchItemFailures": [{"itemIdentifier": "m2"}]})

    assert _deliver(function, report=False).deleted == ["r1", "r2"]


def test_the_sqs_event_has_lambdas_shape() -> None:
    mapping = QueueMapping("url", "arn:aws:sqs:us-east-1:1:q")

    (record, _) = sqs_event(MESSAGES, mapping, "us-east-1")["Records"]

    assert record["messageId"] == "m1"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == "arn:aws:sqs:us-east-1:1:q"
    assert record["attributes"] == {"SentTimestamp": "1"}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto with the extension, under made-up credentials."""
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}.items():
        monkeypatch.setenv(name, value)
    moto_capacity.install()
    with mock_aws():
        yield


def test_the_mappings_records_carry_the_senders_id_as_sqs_sets_it(
    aws: None,
) -> None:
    # AWS: SenderId is a user's id, or a role's id and session (ReceiveMessage, "SenderId").
    iam, sts = boto3.client("iam", "us-east-1"), boto3.client("sts", "us-east-1")
    sqs = boto3.client("sqs", "us-east-1")
    role = iam.create_role(RoleName="producer", AssumeRolePolicyDocument="{}")["Role"]
    keys = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="batch")["Credentials"]
    producer = boto3.client(
        "sqs",
        "us-east-1",
        aws_access_key_id=keys["AccessKeyId"],
        aws_secret_access_key=keys["SecretAccessKey"],
        aws_session_token=keys["SessionToken"],
    )
    url = sqs.create_queue(QueueName="launch")["QueueUrl"]
    producer.send_message(QueueUrl=url, MessageBody="{}")
    function = _Function({"batchItemFailures": []})
    mapping = QueueMapping(url, "arn:aws:sqs:us-east-1:123456789012:launch")
    source = QueueEventSource(function, mapping, sqs)  # type: ignore[arg-type]

    source._deliver(source._gather())

    (record,) = function.events[0]["Records"]
    assert set(record["attributes"]) == {
        "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp", "SenderId", "SentTimestamp"
    }  # fmt: skip
    assert record["attributes"]["SenderId"] == f"{role['RoleId']}:batch"


class _CountedReceives:
    """An SQS client that counts its ReceiveMessage calls."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self.receives = 0

    def receive_message(self, **kwargs: Any) -> Any:
        self.receives += 1
        return self._sqs.receive_message(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)


def test_a_long_polling_mapping_waits_for_a_message_instead_of_polling_and_takes_it_at_once(
    aws: None,
) -> None:
    # Lambda's SQS pollers long-poll (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html):
    # idle, a served cloud's mapping asks once a second, not five times, and a message sent
    # meanwhile is answered at once.
    sqs = _CountedReceives(boto3.client("sqs", "us-east-1"))
    url = sqs.create_queue(QueueName="launch")["QueueUrl"]
    function = _Function({"batchItemFailures": []})
    mapping = QueueMapping(url, "arn:aws:sqs:us-east-1:123456789012:launch")
    source = QueueEventSource(function, mapping, sqs, long_poll_seconds=1)  # type: ignore[arg-type]
    source.start()
    try:
        time.sleep(2.5)
        idle_receives = sqs.receives
        sent = time.monotonic()
        sqs.send_message(QueueUrl=url, MessageBody="{}")
        while not function.events and time.monotonic() < sent + 5:
            time.sleep(0.01)
        delivered_after = time.monotonic() - sent
    finally:
        source.stop()

    assert 1 <= idle_receives <= 4  # short polls every 0.2 s would have asked about 12 times
    assert function.events, "the message sent was never delivered"
    assert delivered_after < 0.5


@pytest.mark.parametrize(
    ("expression", "seconds"), [("rate(1 minute)", 60), ("rate(5 minutes)", 300),
                                ("rate(2 hours)", 7200)]
)  # fmt: skip
def test_rate_schedules(expression: str, seconds: int) -> None:
    assert schedule_seconds(expression) == seconds


def test_cron_schedules_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="only rate"):
        schedule_seconds("cron(0 * * * ? *)")


TEMPLATE = """\
Globals:
  Function:
    Timeout: 7
    Environment:
      Variables: {GREETING: hello}
Resources:
  EchoFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: echo/
      Handler: app.handler
"""
HANDLER = """\
import os


def handler(event, context):
    print("log line")
    if event.get("fail"):
        raise ValueError("asked to fail")
    return {"greeting": os.environ["GREETING"], "event": event,
            "remaining": context.get_remaining_time_in_millis(),
            "name": context.function_name}
"""


@pytest.fixture
def echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalFunction:
    monkeypatch.setenv("GREETING", "unset")  # loading sets it process-wide; undone afterwards
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "app.py").write_text(textwrap.dedent(HANDLER))
    return LocalFunction("EchoFunction", {"GREETING": "hi"},
                         template_path=str(tmp_path / "template.yaml"))  # fmt: skip


def test_a_function_runs_with_its_environment_context_and_captured_logs(
    echo: LocalFunction,
) -> None:
    invocation = echo.invoke({"n": 1})

    assert invocation.error is None
    assert invocation.result["greeting"] == "hi"
    assert invocation.result["event"] == {"n": 1}
    assert 0 < invocation.result["remaining"] <= 7000
    assert invocation.result["name"] == "EchoFunction"
    assert invocation.logs == "log line\n"


def test_a_raising_handler_gives_lambdas_error_object(echo: LocalFunction) -> None:
    invocation = echo.invoke({"fail": True})

    assert invocation.failed
    assert invocation.error is not None
    assert invocation.error["errorType"] == "ValueError"
    assert invocation.error["errorMessage"] == "asked to fail"
    assert json.dumps(invocation.error)


HOSTED_HANDLER = """\
from capacity_launcher.startup import lambda_init

with lambda_init() as host:
    BUILT_AT = host.clock()


def handler(event, context):
    host.pause(5)
    return {"builtAt": BUILT_AT.isoformat(), "now": host.clock().isoformat()}
"""


def test_a_function_builds_its_container_on_the_host_it_is_loaded_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREETING", "unset")
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "app.py").write_text(HOSTED_HANDLER)
    moments = [datetime(2031, 5, 1, tzinfo=UTC)]

    def advance(seconds: float) -> None:
        moments.append(moments[-1] + timedelta(seconds=seconds))

    emulated = Host(clock=lambda: moments[-1], pause=advance)
    template = str(tmp_path / "template.yaml")
    function = LocalFunction(
        "EchoFunction", {"GREETING": "hi"}, template_path=template, host=emulated
    )

    invocation = function.invoke({})

    assert invocation.error is None, invocation.error
    # init read the host's clock, and the handler's wait moved it instead of sleeping
    assert invocation.result == {
        "builtAt": "2031-05-01T00:00:00+00:00",
        "now": "2031-05-01T00:00:05+00:00",
    }
