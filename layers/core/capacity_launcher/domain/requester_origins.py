"""Who is the requester? A launch request's ``requester`` bound to where the request came from.

A request says which requester it is for; only facts AWS sets, never the producer, decide
whether it may say so (docs/quotas.md "Who is the requester?"):

- a message sent straight to the launch queue: its SQS ``SenderId`` (an IAM user's unique id,
  or a role's unique id and session, ``AROA...:session``);
- an event delivered by the launch bus's rule: the event's ``account`` (set by EventBridge) and
  ``source`` (chosen by the caller, pinned by the bus policy's ``events:source`` condition).

A CapacityQuota's ``spec.requesterOrigins`` lists, per requester, the origins that may claim it.
A requester no quota binds is served for whoever claims it, as before bindings existed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, Field, field_validator, model_validator

from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, _Document, no_repeats
from capacity_launcher.domain.errors import RequesterNotAllowed
from capacity_launcher.domain.records.status import EVENT_SOURCE

# A requester's name, in a launch request and in a CapacityQuota's requesters.
MAX_REQUESTER_LENGTH = 128
MAX_ORIGINS = 20
MAX_SOURCE_LENGTH = 256
ACCOUNT_PATTERN = re.compile(r"^\d{12}$")
# An IAM user's (AIDA) or role's (AROA) unique id, optionally one role session: what SenderId says.
SENDER_PATTERN = re.compile(r"^(AIDA|AROA)[A-Z0-9]{12,124}(:[\w+=,.@-]{2,64})?$")
SENDER_RULE = (
    "must be an IAM unique id as SQS's SenderId carries it: AIDA... for a user, AROA... for a "
    "role (any session) or AROA...:session for one session; not an ARN "
    "(aws iam get-role --role-name NAME --query Role.RoleId)"
)


def _event_source(value: str) -> str:
    if not value or len(value) > MAX_SOURCE_LENGTH or not value.isprintable():
        raise ValueError(f"must be 1 to {MAX_SOURCE_LENGTH} printable characters")
    if value == EVENT_SOURCE:
        raise ValueError(f"{EVENT_SOURCE!r} is the service's own source, for status events")
    if value.startswith("aws."):
        raise ValueError("aws.* sources are AWS services'; PutEvents refuses them")
    return value


def _account(value: str) -> str:
    if not ACCOUNT_PATTERN.match(value):
        raise ValueError("must be a 12-digit AWS account id, as a string")
    return value


def _sender(value: str) -> str:
    if not SENDER_PATTERN.match(value):
        raise ValueError(SENDER_RULE)
    return value


EventSource = Annotated[str, AfterValidator(_event_source)]
Account = Annotated[str, AfterValidator(_account)]
Sender = Annotated[str, AfterValidator(_sender)]


class RequesterOrigins(_Document):
    """Where requests for one requester may come from. Through the bus: an event whose source is
    one of ``eventSources`` (any, if none are listed) and whose account is one of ``accounts``
    (any, if none are listed). Straight to the queue: a message whose SenderId is one of
    ``queueSenders`` (a role id matches every session of the role)."""

    model_config = BUILT_ON_FIRST_USE  # only CapacityQuota holds them

    event_sources: list[EventSource] = Field(default=[], max_length=MAX_ORIGINS)
    accounts: list[Account] = Field(default=[], max_length=MAX_ORIGINS)
    queue_senders: list[Sender] = Field(default=[], max_length=MAX_ORIGINS)

    @field_validator("event_sources", "accounts", "queue_senders")
    @classmethod
    def _no_repeats(cls, values: list[str]) -> list[str]:
        return no_repeats(values)

    @model_validator(mode="after")
    def _something(self) -> RequesterOrigins:
        if not (self.event_sources or self.accounts or self.queue_senders):
            raise ValueError("must list at least one of eventSources, accounts or queueSenders")
        return self

    def sends(self, sender_id: str) -> bool:
        return any(_same_sender(bound, sender_id) for bound in self.queue_senders)

    def publishes(self, source: str | None, account: str | None) -> bool:
        if not (self.event_sources or self.accounts):
            return False
        return (not self.event_sources or source in self.event_sources) and (
            not self.accounts or account in self.accounts
        )

    def describe(self) -> str:
        parts = []
        if self.event_sources or self.accounts:
            sources = ", ".join(self.event_sources) or "any source"
            accounts = ", ".join(self.accounts) or "any account"
            parts.append(f"bus events from {sources} in {accounts}")
        if self.queue_senders:
            parts.append(f"queue senders {', '.join(self.queue_senders)}")
        return " or ".join(parts)


def _same_sender(bound: str, sender_id: str) -> bool:
    """A bound role id (no session) matches each of its sessions; anything else, itself only."""
    if ":" in bound:
        return sender_id == bound
    return sender_id == bound or sender_id.startswith(bound + ":")


@dataclass(frozen=True)
class Origin:
    """What AWS says about where one message came from: the SQS SenderId (None when the function
    was invoked with the event itself) and, when the body is a whole EventBridge event, its
    ``source`` and ``account``."""

    sender_id: str | None = None
    event_source: str | None = None
    event_account: str | None = None

    @property
    def is_event(self) -> bool:
        return self.event_source is not None or self.event_account is not None


def origin_of(sender_id: str | None, body: str | bytes | Mapping[str, Any]) -> Origin:
    """The origin of a message: its SenderId, and the envelope of a whole EventBridge event."""
    envelope: Any = body
    if isinstance(body, str | bytes | bytearray):
        try:
            envelope = json.loads(body)
        except (ValueError, RecursionError):
            envelope = None
    if not (isinstance(envelope, Mapping) and "detail-type" in envelope and "detail" in envelope):
        return Origin(sender_id)
    source, account = envelope.get("source"), envelope.get("account")
    return Origin(
        sender_id,
        source if isinstance(source, str) else "",
        account if isinstance(account, str) else "",
    )


class _BindingSpec(Protocol):
    @property
    def requester_origins(self) -> Mapping[str, RequesterOrigins]: ...


class BindsRequesters(Protocol):
    """What binds requesters to origins (a CapacityQuota), as far as the bindings need it."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> _BindingSpec: ...


class RequesterBindings:
    """Every requester's allowed origins, gathered from the CapacityQuotas that bind them."""

    def __init__(self, by_requester: Mapping[str, RequesterOrigins]) -> None:
        self._by_requester = dict(by_requester)

    @classmethod
    def of(cls, quotas: Iterable[BindsRequesters]) -> RequesterBindings:
        """Apply keeps a requester's binding the same in every quota that gives one
        (quota_sets.conflicts); should stored quotas still differ, the first by name wins."""
        found: dict[str, RequesterOrigins] = {}
        for quota in sorted(quotas, key=lambda q: q.name):
            for requester, origins in quota.spec.requester_origins.items():
                found.setdefault(requester, origins)
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self._by_requester)

    def bound(self, requester: str) -> bool:
        return requester in self._by_requester

    def _from_bound_sender(self, origin: Origin) -> bool:
        sender = origin.sender_id
        return sender is not None and any(o.sends(sender) for o in self._by_requester.values())

    def _allows(self, origins: RequesterOrigins, origin: Origin) -> bool:
        if self._from_bound_sender(origin):
            # A bound sender chose its body, envelope and all: only its SenderId counts.
            return origin.sender_id is not None and origins.sends(origin.sender_id)
        if origin.is_event:
            return origins.publishes(origin.event_source, origin.event_account)
        return False

    def describe(self, origin: Origin) -> str:
        if self._from_bound_sender(origin):
            return f"sent to the launch queue by {origin.sender_id}"
        if origin.is_event:
            return (
                f"a bus event from source {origin.event_source!r} "
                f"in account {origin.event_account!r}"
            )
        if origin.sender_id is None:
            return "a request without a SenderId or an event envelope"
        return f"sent to the launch queue by {origin.sender_id}, a sender no binding lists"

    def requester_for(self, requester: str | None, origin: Origin) -> str | None:
        """The requester a request is served as: its own when its origin may claim it (or no
        quota binds it); when it names none, the one requester its origin is bound to, if
        exactly one. RequesterNotAllowed when it claims a requester bound elsewhere."""
        if requester is None:
            mine = [r for r, o in self._by_requester.items() if self._allows(o, origin)]
            return mine[0] if len(mine) == 1 else None
        origins = self._by_requester.get(requester)
        if origins is None or self._allows(origins, origin):
            return requester
        raise RequesterNotAllowed(
            f"requester: {requester!r} may be claimed only by {origins.describe()} "
            f"(CapacityQuota spec.requesterOrigins); this request is {self.describe(origin)}"
        )
