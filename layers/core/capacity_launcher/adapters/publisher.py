"""Status and reservation events on the service's EventBridge bus (source `capacity-launcher`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.records.detail_limits import fit_detail
from capacity_launcher.domain.records.status import EVENT_SOURCE, Event

# PutEvents: at most 10 entries and 256 KB per call, sized as EventBridge documents ("Calculating
# PutEvents event entry size": Source, DetailType, Detail and each Resources entry, in UTF-8).
_PUT_EVENTS_LIMIT = 10
MAX_REQUEST_BYTES = 256 * 1024


class PublishFailed(CapacityLauncherError):
    """EventBridge refused some entries; the caller retries the whole unit of work."""


class Publisher:
    def __init__(self, bus_name: str, events: Any | None = None) -> None:
        self._bus = bus_name
        self._events = events or client("events")

    def publish(self, *events: Event) -> None:
        entries = [
            {
                "Source": EVENT_SOURCE,
                "DetailType": e.detail_type,
                "Detail": json.dumps(_fitted(e), sort_keys=True, default=str),
                "EventBusName": self._bus,
                "Resources": list(e.resources),
            }
            for e in events
        ]
        for chunk in _batches(entries):
            with aws_call("PutEvents"):
                response = self._events.put_events(Entries=chunk)
            if response.get("FailedEntryCount", 0):
                codes = sorted(
                    {str(e.get("ErrorCode")) for e in response["Entries"] if e.get("ErrorCode")}
                )
                raise PublishFailed(
                    f"PutEvents refused {response['FailedEntryCount']} entries: {codes}"
                )


def entry_size(entry: Mapping[str, Any]) -> int:
    """An entry's size as EventBridge counts it against the 256 KB limit."""
    parts = [entry["Source"], entry["DetailType"], entry["Detail"], *entry.get("Resources", ())]
    return sum(len(str(part).encode()) for part in parts)


def _batches(entries: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Consecutive groups of at most 10 entries and 256 KB each."""
    batches: list[list[Mapping[str, Any]]] = []
    size = 0
    for entry in entries:
        grown = size + entry_size(entry)
        if not batches or len(batches[-1]) == _PUT_EVENTS_LIMIT or grown > MAX_REQUEST_BYTES:
            batches.append([])
            grown = entry_size(entry)
        batches[-1].append(entry)
        size = grown
    return batches


def _fitted(event: Event) -> Mapping[str, Any]:
    """The detail within the one size policy of records (domain/records/detail_limits.py): a status
    record is within it already; any other detail is held to it the same way."""
    return fit_detail(event.detail)
