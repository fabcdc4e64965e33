"""SQS retention on the emulator's clock: a message kept longer than its queue's
MessageRetentionPeriod is deleted by SQS (DeleteMessage,
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html:
"Amazon SQS automatically deletes messages left in a queue longer than the retention period")."""

from collections.abc import Callable
from typing import Any

import moto_capacity


def _bodies(answer: dict[str, Any]) -> list[str]:
    return sorted(message["Body"] for message in answer.get("Messages", []))


def _queued(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_short_poll_after_the_clock_passes_retention_gets_the_messages_still_kept(
    aws_client: Callable[[str], Any],
) -> None:
    sqs = aws_client("sqs")
    url = sqs.create_queue(QueueName="held", Attributes={"MessageRetentionPeriod": "60"})[
        "QueueUrl"
    ]
    for body in ("old-1", "old-2"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    moto_capacity.advance_clock(61)
    for body in ("new-1", "new-2"):
        sqs.send_message(QueueUrl=url, MessageBody=body)

    assert _queued(sqs, url) == 2
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    assert _bodies(answer) == ["new-1", "new-2"]


def test_messages_younger_than_retention_stay_after_the_clock_moves(
    aws_client: Callable[[str], Any],
) -> None:
    sqs = aws_client("sqs")
    url = sqs.create_queue(QueueName="kept", Attributes={"MessageRetentionPeriod": "60"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="young")
    moto_capacity.advance_clock(59)

    assert _queued(sqs, url) == 1
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    assert _bodies(answer) == ["young"]
