"""What producers' messages carry when they arrive, as AWS sets it (the launcher binds a request's
`requester` to it, so moto's shortcuts here would hide who sent what).

**SQS's SenderId**: the principal that called SendMessage (moto gives every message one constant
id, which would make every producer look alike).

AWS (Message, ReceiveMessage `SenderId`): "For a user, returns the user ID ... For an IAM role,
returns the IAM role ID" with the session, `AROA...:session`. Credentials that are neither an
IAM user's access key nor an assumed role's (the local cloud's default keys) are the account's
root, whose SenderId is the account id. A message a service delivers (EventBridge's rule target)
keeps moto's constant service id: it is never a caller of SendMessage.

**An EventBridge rule's target gets the whole event** when the target sets no input
transformer, `account` included (https://docs.aws.amazon.com/eventbridge/latest/userguide/
eb-events-structure.html: version, id, detail-type, source, account, time, region, resources,
detail). moto's default template leaves `account` out.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from moto.iam.models import iam_backends
from moto.sts.models import sts_backends

_CALLER = threading.local()


def caller_sender_id(account_id: str, partition: str, access_key_id: str) -> str:
    """The SenderId of a SendMessage signed with `access_key_id`."""
    role = sts_backends[account_id][partition].get_assumed_role_from_access_key(access_key_id)
    if role is not None:
        return str(role.user_id)
    user = iam_backends[account_id][partition].get_user_from_access_key_id(access_key_id)
    if user is not None:
        return str(user.id)
    return account_id


def sending_as_caller(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps SQSResponse.send_message / send_message_batch: the caller is the sender."""

    @functools.wraps(original)
    def send(self: Any) -> Any:
        _CALLER.sender_id = caller_sender_id(
            self.current_account, self.partition, self.get_access_key()
        )
        try:
            return original(self)
        finally:
            _CALLER.sender_id = None

    return send


def stamping_sender(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps SQSBackend.send_message: the message carries the caller's SenderId, if any."""

    @functools.wraps(original)
    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        message = original(self, *args, **kwargs)
        sender = getattr(_CALLER, "sender_id", None)
        if sender:
            message.sender_id = sender
        return message

    return send_message


ENVELOPE = ("version", "id", "detail-type", "source", "account", "time", "region", "resources")


def whole_event(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps EventTemplateParser.parse: without an input template, the event's every field."""

    def parse(input_template: str, input_paths_map: dict[str, Any], event: Any) -> Any:
        if input_template or input_paths_map:
            return original(input_template, input_paths_map, event)
        delivered = {name: event[name] for name in ENVELOPE if name in event}
        delivered["detail"] = event.get("detail", {})
        return delivered

    return parse
