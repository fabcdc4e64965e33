"""Status and reservation events on the service's EventBridge bus (source `capacity-launcher`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.dynamodb import raise_for
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.status import EVENT_SOURCE

_PUT_EVENTS_LIMIT = 10


class PublishFailed(CapacityLauncherError):
    """EventBridge refused some entries; the caller retries the whole unit of work."""


@dataclass(frozen=True)
class Event:
    detail_type: str
    detail: Mapping[str, Any]
    resources: Sequence[str] = field(default_factory=tuple)


class Publisher:
    def __init__(self, bus_name: str, events: Any | None = None) -> None:
        self._bus = bus_name
        self._events = events or client("events")

    def publish(self, *events: Event) -> None:
        entries = [
            {
                "Source": EVENT_SOURCE,
                "DetailType": e.detail_type,
                "Detail": json.dumps(e.detail, sort_keys=True, default=str),
                "EventBusName": self._bus,
                "Resources": list(e.resources),
            }
            for e in events
        ]
        for start in range(0, len(entries), _PUT_EVENTS_LIMIT):
            chunk = entries[start : start + _PUT_EVENTS_LIMIT]
            try:
                response = self._events.put_events(Entries=chunk)
            except ClientError as error:
                raise_for("PutEvents", error)
            if response.get("FailedEntryCount", 0):
                codes = sorted(
                    {str(e.get("ErrorCode")) for e in response["Entries"] if e.get("ErrorCode")}
                )
                raise PublishFailed(
                    f"PutEvents refused {response['FailedEntryCount']} entries: {codes}"
                )
