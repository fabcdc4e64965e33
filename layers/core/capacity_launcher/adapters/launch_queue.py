"""The launch queue, seen from the launcher: a handed-back message returns after a short backoff;
a held one (a request waiting for scheduled capacity) is sent again, delayed. The sync sends a
static NodePool's launches into it as any producer does (`send`).

Lambda's event source mapping leaves a failed message invisible for the queue's whole visibility
timeout (720 s); ChangeMessageVisibility brings it back after seconds, more with each receive.
A wait may last 14 days, far beyond maxReceiveCount receives and the queue's retention, so a
waiting request's message is not handed back: a copy is sent with DelaySeconds (a new message,
received 0 times, retained afresh) and the delivery that held it succeeds and is deleted.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.domain.backoff import hand_back_seconds
from capacity_launcher.domain.launch_request import Message
from capacity_launcher.observability import logger

# SQS's largest DelaySeconds.
MAX_DELAY_SECONDS = 900


def queue_url(queue_arn: str) -> str:
    """arn:aws:sqs:REGION:ACCOUNT:NAME -> the queue's URL (the client's endpoint routes it)."""
    _, partition, _, region, account, name = queue_arn.split(":", 5)
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{domain}/{account}/{name}"


class LaunchQueue:
    def __init__(self, sqs: Any | None = None, rng: Callable[[], float] = random.random) -> None:
        self._sqs = sqs
        self._rng = rng
        self._visibility: dict[str, int | None] = {}

    def hand_back(self, messages: Sequence[Message]) -> None:
        """Each message visible again after a jittered backoff that grows with its receives;
        a failure here only means the queue's own visibility timeout applies."""
        for message in messages:
            if not message.receipt_handle or not message.queue_arn:
                continue
            try:
                url = queue_url(message.queue_arn)
                seconds = hand_back_seconds(message.receive_count, self._rng)
                ceiling = self._queue_visibility(url)
                if ceiling is not None:
                    seconds = min(seconds, ceiling)  # shorten the queue's wait, never lengthen it
                self._client.change_message_visibility(
                    QueueUrl=url,
                    ReceiptHandle=message.receipt_handle,
                    VisibilityTimeout=seconds,
                )
            except (ClientError, ValueError):
                logger.warning(
                    "could not shorten the handed-back message's visibility",
                    exc_info=True,
                    extra={"messageId": message.message_id},
                )
                continue
            logger.info(
                "handed back to the queue",
                extra={
                    "messageId": message.message_id,
                    "receiveCount": message.receive_count,
                    "visibleInSeconds": seconds,
                },
            )

    def can_hold(self, message: Message) -> bool:
        """Only a message that came from the queue can be held in it."""
        return message.queue_arn is not None

    def hold(self, message: Message, delay_seconds: int) -> str:
        """Send the request again, visible after `delay_seconds` (at most SQS's 900); the new
        message's id. Raises as any AWS call does (the delivery is then handed back)."""
        body = message.body if isinstance(message.body, str) else json.dumps(message.body)
        if message.queue_arn is None:
            raise ValueError("only a message from the launch queue can be held in it")
        with aws_call("SendMessage"):
            sent = self._client.send_message(
                QueueUrl=queue_url(message.queue_arn),
                MessageBody=body,
                DelaySeconds=max(0, min(delay_seconds, MAX_DELAY_SECONDS)),
            )
        logger.info(
            "held in the queue until the next look at scheduled capacity",
            extra={
                "messageId": message.message_id,
                "heldBy": sent["MessageId"],
                "visibleInSeconds": delay_seconds,
            },
        )
        return str(sent["MessageId"])

    def redrive(self, queue_arn: str, body: str) -> str:
        """Send a waiting request's message again, visible now (a wake: room appeared in its
        queue); the new message's id."""
        with aws_call("SendMessage"):
            sent = self._client.send_message(QueueUrl=queue_url(queue_arn), MessageBody=body)
        return str(sent["MessageId"])

    def send(self, url: str, body: Mapping[str, Any]) -> str:
        """A new launch request into the queue at `url` (a static NodePool's launch); its
        message id."""
        with aws_call("SendMessage"):
            sent = self._client.send_message(QueueUrl=url, MessageBody=json.dumps(body))
        return str(sent["MessageId"])

    @property
    def _client(self) -> Any:
        if self._sqs is None:
            self._sqs = client("sqs")
        return self._sqs

    def _queue_visibility(self, url: str) -> int | None:
        """The queue's own visibility timeout, read once per container (None if unreadable)."""
        if url not in self._visibility:
            try:
                attributes = self._client.get_queue_attributes(
                    QueueUrl=url, AttributeNames=["VisibilityTimeout"]
                )["Attributes"]
                self._visibility[url] = int(attributes["VisibilityTimeout"])
            except (ClientError, KeyError, ValueError):
                self._visibility[url] = None
        return self._visibility[url]
