"""The shared ICE cache: one DynamoDB item per offering that EC2 said it cannot serve, for a while.

DynamoDB's TTL deletes expired items lazily (up to days later), so every read drops items whose
`expiresAt` has passed. A warm container keeps its own copy for a few seconds so that a burst of
requests costs one Scan, not one per request.

Single flight: before asking EC2 about an on-demand or spot offering with evidence that it may be
dry, a launcher claims it in the same table (a conditional put of an item keyed by the offering,
reason `BeingTried`, a short `expiresAt`, and `claimedBy`). Others that meet the claim leave the
offering alone until the claim ends: an ICE entry replaces it, a launch clears it, or it expires
(a crashed claimer). Which offerings are claimed, and what a claim met means, are the domain's
(domain/capacity/single_flight.py); the rounds and the waits are the service's
(service/single_flight.py). This adapter reads and writes: `evidence()` (what the container has
seen, no call), `take_turn(keys)` (one claim write), `standing(keys)` (one read), `end_turn`
(one delete).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client, in_chunks
from capacity_launcher.adapters.dynamodb import (
    batch_get,
    batch_write,
    from_item,
    to_item,
)
from capacity_launcher.domain.capacity.offerings import Turn

# Re-exported: where it was defined before the domain had it (other modules import it here).
from capacity_launcher.domain.capacity.offerings import UnavailableEntry as UnavailableEntry
from capacity_launcher.domain.capacity.single_flight import (
    BEING_TRIED,
    RECENTLY_DRY_SECONDS,
    Evidence,
    Standing,
)
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.observability import logger

# Re-exported: the reason a claim item carries (domain/capacity/single_flight.py names it).
__all__ = ["BEING_TRIED", "UnavailableEntry", "UnavailableOfferings"]
# A TransactWriteItems takes at most 100 items.
_TRANSACTION_ITEMS = 100


class UnavailableOfferings:
    def __init__(
        self,
        table_name: str,
        ttl_seconds: int,
        *,
        local_copy_seconds: float = 0.0,
        dynamodb: Any | None = None,
        clock: Callable[[], float],
        claim_seconds: int = 20,
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
        self.claim_seconds = claim_seconds
        # Claims seen by the last read (key → expiresAt), and offerings launched here lately.
        self._claims: dict[str, int] = {}
        self._launched_until: dict[str, float] = {}
        # ICE entries seen, live or expired within RECENTLY_DRY_SECONDS (the single flight's
        # evidence): kept here as well, since DynamoDB may delete an expired item at any time.
        self._seen: dict[str, Standing] = {}

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
        entries, claims = self._scan(now)
        with self._lock:
            self._copy = entries
            self._claims = claims
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
            for key, entry in entries.items():
                self._claims.pop(key, None)
                self._seen[key] = Standing(entry.reason, entry.expires_at)
        return items

    def clear(self, offering: str) -> None:
        self.round_trips += 1
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key={"offering": {"S": offering}})
        with self._lock:
            self._copy.pop(offering, None)
            self._seen.pop(offering, None)

    def _scan(self, now: float) -> tuple[dict[str, UnavailableEntry], dict[str, int]]:
        """Live entries and claims; entries that expired lately are remembered as evidence.
        (A Scan reads, and is billed for, every item whatever the filter: asking for the recently
        expired too costs nothing more.)"""
        entries: dict[str, UnavailableEntry] = {}
        claims: dict[str, int] = {}
        seen: dict[str, Standing] = {}
        since = int(now) - RECENTLY_DRY_SECONDS
        with aws_call("Scan"):
            pages = all_pages(
                self._db.scan,
                TableName=self._table,
                FilterExpression="expiresAt > :since",
                ExpressionAttributeValues={":since": {"N": str(since)}},
            )
            for page in pages:
                self.round_trips += 1
                for raw in page["Items"]:
                    item = from_item(raw)
                    entry = _entry(item)
                    if "claimedBy" in item:
                        if entry.expires_at > now:
                            claims[entry.offering] = entry.expires_at
                        continue
                    seen[entry.offering] = Standing(entry.reason, entry.expires_at)
                    if entry.expires_at > now:
                        entries[entry.offering] = entry
        with self._lock:
            self._seen.update(seen)
        return entries, claims

    # -- single flight: reads and writes (the decisions: domain/capacity/single_flight.py) --------

    def evidence(self) -> Evidence:
        """What this container knows of offerings' recent past: its copy of the table (read
        again when older than its lifetime, as `current`), the entries it saw expire lately, the
        claims it saw, where it launched."""
        self.current()
        now = self._clock()
        floor = now - RECENTLY_DRY_SECONDS
        with self._lock:
            self._seen = {k: s for k, s in self._seen.items() if s.expires_at > floor}
            return Evidence(
                now,
                dict(self._seen),
                {k: t for k, t in self._claims.items() if t > now},
                {k: t for k, t in self._launched_until.items() if t > now},
            )

    def take_turn(self, keys: Sequence[str], token: str | None = None) -> Turn:
        """Claim exactly `keys`, in one TransactWriteItems (per 100): each a put conditioned on
        no unexpired item standing there. The turn holds (`mine`) those whose condition held; the
        others are claimed elsewhere (`elsewhere`: until when) or dry (`unavailable`: reason),
        as the items standing there say. A transaction cancelled by some of its items is sent
        again without them. No wait and no choice here: service/single_flight.py's."""
        token = token or uuid.uuid4().hex
        now = self._clock()
        mine: set[str] = set()
        elsewhere: dict[str, int] = {}
        unavailable: dict[str, str] = {}
        for chunk in in_chunks(dict.fromkeys(keys), _TRANSACTION_ITEMS):
            pending = chunk
            while pending:
                standing = self._claim(pending, token, now)
                if not standing:
                    mine.update(pending)
                    break
                for key, item in standing.items():
                    self._remember(item, now)
                    if "claimedBy" in item:
                        elsewhere[key] = int(item.get("expiresAt", 0))
                    else:
                        unavailable[key] = str(item.get("reason", ""))
                pending = [k for k in pending if k not in standing]
        return Turn(token, frozenset(mine), frozenset(), unavailable, elsewhere)

    def _claim(self, keys: Sequence[str], token: str, now: float) -> dict[str, dict[str, Any]]:
        """One transaction claiming `keys`: {} when written, else the items whose condition
        failed (key -> the unexpired item standing there)."""
        cached_at = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
        puts = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "offering": key,
                            "reason": BEING_TRIED,
                            "message": "a launcher is asking EC2 for this offering now",
                            "cachedAt": cached_at,
                            "expiresAt": int(now) + self.claim_seconds,
                            "claimedBy": token,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(offering) OR expiresAt <= :now",
                    "ExpressionAttributeValues": {":now": {"N": str(int(now))}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            for key in keys
        ]
        try:
            self.round_trips += 1
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=puts)
        except ConditionFailed as failed:
            # The items standing there come back with the ClientError (ALL_OLD above); without
            # them (not returned), a claim of the usual lifetime is assumed.
            reasons = getattr(failed.__cause__, "response", {}).get("CancellationReasons") or []
            held = {"claimedBy": "", "expiresAt": int(now) + self.claim_seconds}
            standing = {
                key: from_item(reasons[at].get("Item") or {}) or {"offering": key, **held}
                for at, key in enumerate(keys)
                if failed.failed_at(at)
            }
            return standing or {key: {"offering": key, **held} for key in keys}
        return {}

    def standing(self, keys: Sequence[str]) -> dict[str, Standing | None]:
        """What stands on each of `keys` now (one consistent BatchGetItem per 100): an entry, a
        claim, or nothing (None)."""
        now = self._clock()
        self.round_trips += 1
        found = {
            str(i["offering"]): i
            for i in batch_get(self._db, self._table, [{"offering": {"S": k}} for k in keys])
        }
        read: dict[str, Standing | None] = {}
        for key in keys:
            item = found.get(key)
            if item is None:
                read[key] = None
                continue
            read[key] = Standing(
                str(item.get("reason", "")), int(item.get("expiresAt", 0)), "claimedBy" in item
            )
            if int(item.get("expiresAt", 0)) <= now:
                with self._lock:
                    self._claims.pop(key, None)
            else:
                self._remember(item, now)
        return read

    def end_turn(self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()) -> None:
        """Clear this turn's claims that no ICE entry replaced (one TransactWriteItems per 100,
        each delete conditioned on the claim being this turn's); remember where it launched."""
        launched, dry = set(launched), set(dry)
        until = self._clock() + self._local_copy_seconds
        with self._lock:
            for key in launched:
                self._launched_until[key] = until
                self._seen.pop(key, None)  # a launch there: no longer evidence of dryness
        for chunk in in_chunks(sorted(turn.mine - dry), _TRANSACTION_ITEMS):
            try:
                self._release(chunk, turn.token)
            except Exception as error:
                # An uncleared claim only holds others back until it expires.
                logger.warning(
                    "claims not cleared", extra={"offerings": chunk, "error": str(error)}
                )

    def _release(self, keys: list[str], token: str) -> None:
        """Delete `keys`' claims held by `token`; one an ICE entry (or another claim, once this
        one expired) replaced stays, and the rest are deleted without it."""
        while keys:
            deletes = [
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": {"offering": {"S": key}},
                        "ConditionExpression": "claimedBy = :me",
                        "ExpressionAttributeValues": {":me": {"S": token}},
                    }
                }
                for key in keys
            ]
            try:
                self.round_trips += 1
                with aws_call("TransactWriteItems"):
                    self._db.transact_write_items(TransactItems=deletes)
                return
            except ConditionFailed as failed:
                replaced = [k for i, k in enumerate(keys) if failed.failed_at(i)]
                if not replaced:
                    raise
                keys = [k for k in keys if k not in replaced]

    def _remember(self, item: dict[str, Any], now: float) -> None:
        """Keep what a claim or a read found in the container's copy."""
        if not item or int(item.get("expiresAt", 0)) <= now:
            return
        entry = _entry(item)
        with self._lock:
            if "claimedBy" in item:
                self._claims[entry.offering] = entry.expires_at
            else:
                self._copy[entry.offering] = entry
                self._seen[entry.offering] = Standing(entry.reason, entry.expires_at)
                self._claims.pop(entry.offering, None)


def _entry(item: dict[str, Any]) -> UnavailableEntry:
    return UnavailableEntry(
        offering=str(item["offering"]),
        reason=str(item.get("reason", "")),
        message=str(item.get("message", "")),
        cached_at=str(item.get("cachedAt", "")),
        expires_at=int(item.get("expiresAt", 0)),
    )
