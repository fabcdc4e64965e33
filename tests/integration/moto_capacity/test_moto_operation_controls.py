"""Faults, latency and call counters for any moto operation named `service:Operation`."""

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

import moto_capacity


def _code(call: Any, **kwargs: Any) -> str:
    try:
        call(**kwargs)
    except ClientError as error:
        return str(error.response["Error"]["Code"])
    return "ok"


def test_fault_fails_the_next_times_calls_with_the_given_code(ec2: Any) -> None:
    # Given
    moto_capacity.inject_fault("ec2:DescribeInstances", "RequestLimitExceeded", times=2)

    # When
    codes = [_code(ec2.describe_instances) for _ in range(3)]

    # Then
    assert codes == ["RequestLimitExceeded", "RequestLimitExceeded", "ok"]


def test_fault_without_times_or_rate_fails_every_call(ec2: Any) -> None:
    moto_capacity.inject_fault("ec2:CreateFleet", "Unsupported", message="not here")
    for _ in range(3):
        with pytest.raises(ClientError) as error:
            ec2.create_fleet(
                Type="instant",
                TargetCapacitySpecification={"TotalTargetCapacity": 1},
                LaunchTemplateConfigs=[],
            )
        assert error.value.response["Error"] == {"Code": "Unsupported", "Message": "not here"}


def test_fault_at_a_seeded_rate_fails_some_calls_reproducibly(ec2: Any) -> None:
    # Given / When the same seed is used twice
    patterns = []
    for _ in range(2):
        moto_capacity.inject_fault("ec2:DescribeVpcs", "RequestLimitExceeded", rate=0.5, seed=7)
        patterns.append([_code(ec2.describe_vpcs) for _ in range(20)])

    # Then both runs fail the same calls, and not all of them
    assert patterns[0] == patterns[1]
    assert 0 < patterns[0].count("RequestLimitExceeded") < 20


def test_fault_on_dynamodb_update_item_is_a_json_error_of_that_type(aws_client: Any) -> None:
    # Given
    dynamodb = aws_client("dynamodb")
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    moto_capacity.inject_fault(
        "dynamodb:UpdateItem", "ProvisionedThroughputExceededException", times=1
    )

    # When
    update = {
        "TableName": "t",
        "Key": {"k": {"S": "a"}},
        "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"S": "b"}},
    }
    codes = [_code(dynamodb.update_item, **update) for _ in range(2)]

    # Then
    assert codes == ["ProvisionedThroughputExceededException", "ok"]


def test_fault_on_eventbridge_put_events_is_raised_with_its_code(aws_client: Any) -> None:
    events = aws_client("events")
    moto_capacity.inject_fault("events:PutEvents", "ThrottlingException", times=1)
    entry = {"Source": "capacity-launcher", "DetailType": "Launch Fulfilled", "Detail": "{}"}
    assert _code(events.put_events, Entries=[entry]) == "ThrottlingException"
    assert _code(events.put_events, Entries=[entry]) == "ok"


def test_fault_on_sqs_receive_message_is_raised_with_its_code(aws_client: Any) -> None:
    sqs = aws_client("sqs")
    queue_url = sqs.create_queue(QueueName="launches")["QueueUrl"]
    moto_capacity.inject_fault("sqs:ReceiveMessage", "OverLimit", times=1)
    assert _code(sqs.receive_message, QueueUrl=queue_url) == "OverLimit"
    assert _code(sqs.receive_message, QueueUrl=queue_url) == "ok"


def test_latency_delays_every_call_of_the_operation(ec2: Any) -> None:
    # Given
    ec2.describe_vpcs()
    moto_capacity.set_latency("ec2:DescribeVpcs", 0.2)

    # When
    started = time.monotonic()
    ec2.describe_vpcs()
    elapsed = time.monotonic() - started

    # Then
    assert elapsed >= 0.2
    assert moto_capacity.state()["latencies"] == [{"operation": "ec2:DescribeVpcs", "seconds": 0.2}]


def test_counters_count_calls_and_failures_per_operation_once_however_often_installed(
    ec2: Any,
) -> None:
    # Given install() ran again
    moto_capacity.install()
    moto_capacity.install()
    moto_capacity.inject_fault("ec2:DescribeVpcs", "RequestLimitExceeded", times=1)

    # When
    for _ in range(3):
        _code(ec2.describe_vpcs)

    # Then
    assert moto_capacity.state()["operations"]["ec2:DescribeVpcs"] == {"calls": 3, "failures": 1}


def test_reset_clears_pools_faults_latencies_and_counters(ec2: Any) -> None:
    # Given
    moto_capacity.set_capacity("us-east-1", "m5.large", "us-east-1a", "on-demand", 0)
    moto_capacity.inject_fault("ec2:DescribeVpcs", "RequestLimitExceeded")
    moto_capacity.set_latency("ec2:DescribeVpcs", 0.01)
    _code(ec2.describe_vpcs)

    # When
    moto_capacity.reset()

    # Then
    state = moto_capacity.state()
    assert (state["pools"], state["faults"], state["latencies"], state["operations"]) == (
        [],
        [],
        [],
        {},
    )
    assert _code(ec2.describe_vpcs) == "ok"


@pytest.mark.parametrize(
    ("control", "arguments"),
    [
        (moto_capacity.inject_fault, {"operation": "DescribeVpcs", "code": "X"}),
        (moto_capacity.inject_fault, {"operation": "ec2:DescribeVpcs", "code": "X", "rate": 1.5}),
        (moto_capacity.inject_fault, {"operation": "ec2:DescribeVpcs", "code": "X", "times": -1}),
        (moto_capacity.set_latency, {"operation": "ec2:DescribeVpcs", "seconds": -1}),
        (
            moto_capacity.set_capacity,
            {
                "region": "us-east-1",
                "instance_type": "m5.large",
                "zone": "us-east-1a",
                "capacity_type": "reserved",
                "count": 1,
            },
        ),
        (
            moto_capacity.set_capacity,
            {
                "region": "us-east-1",
                "instance_type": "m5.large",
                "zone": "us-east-1a",
                "capacity_type": "spot",
                "count": -1,
            },
        ),
    ],
    ids=["operation-name", "rate", "times", "latency", "capacity-type", "count"],
)
def test_invalid_controls_are_refused_with_value_error(
    control: Any, arguments: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        control(**arguments)


def test_a_server_fault_comes_back_with_its_5xx_status(aws_client: Any) -> None:
    # Resource Groups answers InternalServerErrorException with HTTP 500
    # (https://docs.aws.amazon.com/ARG/latest/APIReference/API_ListGroupResources.html, Errors):
    # the error shape of the service model carries it, so botocore retries it as AWS's would.
    groups = aws_client("resource-groups")
    moto_capacity.inject_fault("resource-groups:ListGroupResources", "InternalServerErrorException")
    with pytest.raises(ClientError) as error:
        groups.list_group_resources(Group="any")
    assert error.value.response["Error"]["Code"] == "InternalServerErrorException"
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_a_long_poll_receives_a_message_sent_while_it_waits(
    aws_client: Callable[[str], Any],
) -> None:
    # ReceiveMessage, WaitTimeSeconds (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/
    # APIReference/API_ReceiveMessage.html): a long poll returns as soon as a message is
    # available. One request at a time per service must not keep the SendMessage out while a
    # ReceiveMessage only waits (moto's own test_messages_polling).
    sqs = aws_client("sqs")
    queue_url = sqs.create_queue(QueueName="long-poll")["QueueUrl"]
    received: list[dict[str, Any]] = []
    poll = threading.Thread(
        target=lambda: received.append(sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=5))
    )
    poll.start()
    time.sleep(0.5)

    started = time.monotonic()
    sqs.send_message(QueueUrl=queue_url, MessageBody="hello")
    send_seconds = time.monotonic() - started
    poll.join()

    assert [message["Body"] for message in received[0]["Messages"]] == ["hello"]
    assert send_seconds < 2


def test_a_long_poll_receives_a_message_as_its_visibility_timeout_ends(
    aws_client: Callable[[str], Any],
) -> None:
    # ReceiveMessage, WaitTimeSeconds (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/
    # APIReference/API_ReceiveMessage.html): "If a message is available, the call returns sooner
    # than WaitTimeSeconds"; one whose visibility timeout ended is available again
    # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/
    # sqs-visibility-timeout.html). moto alone looks once a second: 0.9 s into the wait, here.
    sqs = aws_client("sqs")
    queue_url = sqs.create_queue(QueueName="comes-back")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="again")
    sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=2)
    time.sleep(0.9)

    started = time.monotonic()
    received = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=5)
    waited = time.monotonic() - started

    assert [message["Body"] for message in received["Messages"]] == ["again"]
    assert waited < 1.6  # back at 1.1 s; moto's next look would be at 2 s


def test_a_waiting_long_poll_looks_again_when_the_clock_ends_a_visibility_timeout(
    aws_client: Callable[[str], Any],
) -> None:
    # Advancing the clock past a message's visibility timeout makes it available at once, as
    # waiting that long would on AWS: a long poll waiting meanwhile looks again then, not when
    # its own wait (here the 60 s left of the timeout) is over.
    sqs = aws_client("sqs")
    queue_url = sqs.create_queue(QueueName="clock-moves")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="later")
    sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=60)
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues["clock-moves"]
    waiting = threading.Thread(target=queue.wait_for_messages, args=(20,), daemon=True)
    waiting.start()
    time.sleep(0.2)

    moto_capacity.advance_clock(61)
    waiting.join(timeout=10)

    assert not waiting.is_alive()
    received = sqs.receive_message(QueueUrl=queue_url)
    assert [message["Body"] for message in received["Messages"]] == ["later"]


def test_instance_states_are_the_tagged_instances_and_their_states_as_described(
    ec2: Any, linux_ami: str
) -> None:
    # What EC2's state-change events report (the local cloud sends them from this), read from the
    # emulator: the instances carrying the tags, each with the state DescribeInstances gives.
    def launch(tags: dict[str, str]) -> str:
        tagged = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
        launched = ec2.run_instances(
            ImageId=linux_ami, InstanceType="m5.large", MinCount=1, MaxCount=1,
            TagSpecifications=tagged,
        )  # fmt: skip
        return str(launched["Instances"][0]["InstanceId"])

    managed, ended = launch({"managed": "true"}), launch({"managed": "true", "team": "a"})
    launch({"managed": "false"})
    ec2.terminate_instances(InstanceIds=[ended])

    states = moto_capacity.instance_states("us-east-1", {"managed": "true"})

    described = ec2.describe_instances(Filters=[{"Name": "tag:managed", "Values": ["true"]}])
    assert states == {
        i["InstanceId"]: i["State"]["Name"]
        for r in described["Reservations"]
        for i in r["Instances"]
    }
    assert states == {managed: "running", ended: "terminated"}
    assert moto_capacity.instance_states("us-east-1", {"managed": "true", "team": "a"}) == {
        ended: "terminated"
    }
