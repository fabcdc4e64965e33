"""The shared ICE cache: one DynamoDB item per offering that EC2 said it cannot serve, for a while.

DynamoDB's TTL deletes expired items lazily (up to days later), so every read drops items whose
`expiresAt` has passed. A warm container keeps its own copy for a few seconds so that a burst of
requests costs one Scan, not one per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import batch_write, from_item, to_item


@dataclass(frozen=True)
class UnavailableEntry:
    offering: str
    reason: str
    message: str
    cached_at: str
    expires_at: int

    def to_dict(self) -> dict[str, Any]:
        """The item as README.md's ICE cache contract names it (also what `get -o json` prints)."""
        return {
            "offering": self.offering,
            "reason": self.reason,
            "message": self.message,
            "cachedAt": self.cached_at,
            "expiresAt": self.expires_at,
        }


class UnavailableOfferings:
    def __init__(
        self,
        table_name: str,
        ttl_seconds: int,
        *,
        local_copy_seconds: float = 0.0,
        dynamodb: Any | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._table = table_name
        self._ttl = ttl_seconds
        self._local_copy_seconds = local_copy_seconds
        self._db = dynamodb or client("dynamodb")
        self._clock = clock
        self._copy: dict[str, UnavailableEntry] = {}
        self._copy_read_at: float | None = None
        self._lock = threading.Lock()
        self.round_trips = 0

    def current(self) -> dict[str, UnavailableEntry]:
        """Every unexpired entry by offering key: one Scan, or the container's fresh copy."""
        now = self._clock()
        with self._lock:
            fresh = (
                self._copy_read_at is not None
                and now - self._copy_read_at < self._local_copy_seconds
            )
            if fresh:
                return {k: e for k, e in self._copy.items() if e.expires_at > now}
        entries = self._scan(now)
        with self._lock:
            self._copy = entries
            self._copy_read_at = now
        return dict(entries)

    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> list[UnavailableEntry]:
        """Cache (offering key, EC2 error code, message) triples for the configured lifetime."""
        now = self._clock()
        cached_at = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
        entries = {
            k: UnavailableEntry(k, reason, message[:1024], cached_at, int(now) + self._ttl)
            for k, reason, message in offerings
        }
        items = list(entries.values())
        requests = [{"PutRequest": {"Item": to_item(e.to_dict())}} for e in items]
        self.round_trips += batch_write(self._db, self._table, requests)
        with self._lock:
            self._copy.update(entries)
        return items

    def clear(self, offering: str) -> None:
        self.round_trips += 1
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key={"offering": {"S": offering}})
        with self._lock:
            self._copy.pop(offering, None)

    def _scan(self, now: float) -> dict[str, UnavailableEntry]:
        entries: dict[str, UnavailableEntry] = {}
        with aws_call("Scan"):
            pages = self._db.get_paginator("scan").paginate(
                TableName=self._table,
                FilterExpression="expiresAt > :now",
                ExpressionAttributeValues={":now": {"N": str(int(now))}},
            )
            for page in pages:
                self.round_trips += 1
                for raw in page["Items"]:
                    item = from_item(raw)
                    entry = UnavailableEntry(
                        offering=str(item["offering"]),
                        reason=str(item.get("reason", "")),
                        message=str(item.get("message", "")),
                        cached_at=str(item.get("cachedAt", "")),
                        expires_at=int(item.get("expiresAt", 0)),
                    )
                    if entry.expires_at > now:
                        entries[entry.offering] = entry
        return entries
