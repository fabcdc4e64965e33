"""SQS on the emulator's clock, and messages that carry their sender.

Delays (DelaySeconds), visibility timeouts and retention follow the emulator's clock, as every
other time in the extension: a test or demo that advances the clock sees a delayed message
arrive, as it would after waiting that long on AWS.

Retention: a message older than its queue's MessageRetentionPeriod is gone, from every read.

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
import math
import threading
from collections.abc import Callable
from typing import Any

from moto_capacity.core.clock import CLOCK
from moto_capacity.core.locks import SERVICE_LOCKS

# The SenderId of the SendMessage being served (`responses` sets it), for the message it stores.
CALLER = threading.local()


def on_the_clock(original: Callable[..., float]) -> Callable[..., float]:
    """moto's `unix_time`/`unix_time_millis` as SQS reads them, on the emulator's clock."""

    @functools.wraps(original)
    def now(dt: Any = None) -> float:
        return original(dt if dt is not None else CLOCK.now().replace(tzinfo=None))

    return now


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


def stamping_sender(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps SQSBackend.send_message: the message carries the caller's SenderId, if any."""

    @functools.wraps(original)
    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        message = original(self, *args, **kwargs)
        sender = getattr(CALLER, "sender_id", None)
        if sender:
            message.sender_id = sender
        return message

    return send_message


def waiting_aside(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's Queue.wait_for_messages, where a long-poll ReceiveMessage waits: the SQS
    requests it waits for (a SendMessage) run meanwhile, and it answers as soon as one arrives
    (ReceiveMessage, `WaitTimeSeconds`). A message held back (in flight, or delayed) is available
    again the moment its visibility timeout or delay ends, and the poll answers then, as SQS's
    does: moto would look again only when its one-second wait is over."""

    @functools.wraps(original)
    def wait_for_messages(self: Any, timeout: float) -> Any:
        with SERVICE_LOCKS["sqs"].idle():
            return original(self, min(timeout, seconds_until_one_returns(self)))

    return wait_for_messages


def wake_long_polls() -> None:
    """Have every waiting long poll look again, now: called when the clock moves, so a message
    whose delay or visibility timeout the move ended answers the poll at once, as it would on
    AWS that much later (moto would look again only when its one-second wait is over)."""
    from moto.sqs.models import sqs_backends

    for account_backends in list(dict.values(sqs_backends)):
        for backend in list(dict.values(account_backends)):
            for queue in list(backend.queues.values()):
                with queue._messages_lock:
                    queue._messages_lock.notify_all()


def seconds_until_one_returns(queue: Any) -> float:
    """Seconds until the first message `queue` holds back is available (inf: none held)."""
    now_ms = CLOCK.now().timestamp() * 1000
    returns = [
        max(m.visible_at, m.delayed_until)
        for m in list(queue._messages)
        if not m.visible or m.delayed
    ]
    if not returns:
        return math.inf
    # moto's `visible` is strictly after visible_at: a millisecond past it.
    return max(min(returns) - now_ms + 1, 1) / 1000
