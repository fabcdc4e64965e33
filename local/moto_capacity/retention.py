"""SQS message retention on the emulator's clock: a message older than its queue's
MessageRetentionPeriod is gone, from every read.

AWS (DeleteMessage, https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/
API_DeleteMessage.html, and SetQueueAttributes `MessageRetentionPeriod`): SQS deletes by itself
a message left in a queue longer than the queue's retention period. moto keeps such a message:
it still counts in ApproximateNumberOfMessages, and a short-poll ReceiveMessage that meets it
first stops there and answers nothing (long polling steps past it one round at a time). Once
the clock moves past a queue's retention, every read sees the queue as AWS has it: without
those messages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .clock import CLOCK


def drop_expired(queue: Any) -> None:
    """Delete the messages `queue` has kept longer than its retention period."""
    now_ms = CLOCK.now().timestamp() * 1000
    keep_ms = int(queue.message_retention_period) * 1000
    with queue._messages_lock:
        expired = [m for m in queue._messages if m.sent_timestamp + keep_ms <= now_ms]
        for message in expired:
            queue._messages.remove(message)
            queue.pending_messages.discard(message)


def without_expired(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps SQSBackend.get_queue, through which every queue read and receive passes."""

    @functools.wraps(original)
    def get_queue(self: Any, queue_name: str) -> Any:
        queue = original(self, queue_name)
        drop_expired(queue)
        return queue

    return get_queue
