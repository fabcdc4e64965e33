"""SQS's SenderId is the principal that called SendMessage (moto gives every message one
constant id, which would make every producer look alike); the launcher binds a request's
`requester` to it.

AWS (Message, ReceiveMessage `SenderId`): "For a user, returns the user ID ... For an IAM role,
returns the IAM role ID" with the session, `AROA...:session`. Credentials that are neither an
IAM user's access key nor an assumed role's (the local cloud's default keys) are the account's
root, whose SenderId is the account id. A message a service delivers (EventBridge's rule target)
keeps moto's constant service id: it is never a caller of SendMessage. `models` stamps it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from moto.iam.models import iam_backends
from moto.sts.models import sts_backends

from .models import CALLER


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
        CALLER.sender_id = caller_sender_id(
            self.current_account, self.partition, self.get_access_key()
        )
        try:
            return original(self)
        finally:
            CALLER.sender_id = None

    return send
