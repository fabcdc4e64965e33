"""The SQS hooks: delays, visibility timeouts and retention on the emulator's clock, the caller
of SendMessage as the message's SenderId, and long polls that let other requests run while they
wait."""

from moto.sqs import models as sqs_models
from moto.sqs.models import Queue, SQSBackend
from moto.sqs.responses import SQSResponse

from moto_capacity.core.patching import hook

from .models import on_the_clock, stamping_sender, waiting_aside, without_expired
from .responses import sending_as_caller


def install() -> None:
    hook(sqs_models, "unix_time", on_the_clock)
    hook(sqs_models, "unix_time_millis", on_the_clock)
    hook(SQSBackend, "get_queue", without_expired)
    hook(SQSResponse, "send_message", sending_as_caller)
    hook(SQSResponse, "send_message_batch", sending_as_caller)
    hook(SQSBackend, "send_message", stamping_sender)
    hook(Queue, "wait_for_messages", waiting_aside)
