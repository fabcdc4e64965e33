"""The shared ICE cache: one DynamoDB item per offering that EC2 said it cannot serve, for a while.

DynamoDB's TTL deletes expired items lazily (up to days later), so every read drops items whose
`expiresAt` has passed. A warm container keeps its own copy for a few seconds so that a burst of
requests costs one Scan, not one per request.

Single flight: before asking EC2 about an on-demand or spot offering, a launcher claims it in the
same table (a conditional put of an item keyed by the offering, reason `BeingTried`, a short
`expiresAt`, and `claimedBy`). Others that meet the claim leave the offering alone until the
claim ends: an ICE entry replaces it, a launch clears it, or it expires (a crashed claimer).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.dynamodb import (
    batch_get,
    batch_write,
    from_item,
    to_item,
)
from capacity_launcher.domain.capacity.offerings import Turn

# Re-exported: where it was defined before the domain had it (other modules import it here).
from capacity_launcher.domain.capacity.offerings import UnavailableEntry as UnavailableEntry
from capacity_launcher.domain.errors import ConditionFailed, Transient
from capacity_launcher.observability import logger

# The reason a claim item carries: to any reader of the table it is a short-lived entry.
BEING_TRIED = "BeingTried"
# Polls of claims held elsewhere: short first (a CreateFleet answers in about a second), then 1 s.
_CLAIM_POLL_SECONDS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
# Claim rounds before handing the message back (each round ends in a claim, an entry or a wait).
_MAX_CLAIM_ROUNDS = 5
# What a poll reports for a claim whose lifetime ran out before its claimer ended it.
_EXPIRED = "ClaimExpired"


def pause(seconds: float) -> None:
    """How the adapter waits on claims (the simulation replaces it to move its clock instead)."""
    time.sleep(seconds)


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
        sleep: Callable[[float], None] | None = None,
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
        self._claim_seconds = claim_seconds
        self._sleep = sleep
        # Claims seen by the last read (key → expiresAt), and offerings launched here lately.
        self._claims: dict[str, int] = {}
        self._launched_until: dict[str, float] = {}

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
            for key in entries:
                self._claims.pop(key, None)
        return items

    def clear(self, offering: str) -> None:
        self.round_trips += 1
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key={"offering": {"S": offering}})
        with self._lock:
            self._copy.pop(offering, None)

    def _scan(self, now: float) -> tuple[dict[str, UnavailableEntry], dict[str, int]]:
        entries: dict[str, UnavailableEntry] = {}
        claims: dict[str, int] = {}
        with aws_call("Scan"):
            pages = all_pages(
                self._db.scan,
                TableName=self._table,
                FilterExpression="expiresAt > :now",
                ExpressionAttributeValues={":now": {"N": str(int(now))}},
            )
            for page in pages:
                self.round_trips += 1
                for raw in page["Items"]:
                    item = from_item(raw)
                    entry = _entry(item)
                    if entry.expires_at <= now:
                        continue
                    if "claimedBy" in item:
                        claims[entry.offering] = entry.expires_at
                    else:
                        entries[entry.offering] = entry
        return entries, claims

    # -- single flight ---------------------------------------------------------------------------

    def take_turn(self, keys: Sequence[str]) -> Turn:
        """Claim the offerings no one is asking EC2 about. When every one is claimed elsewhere,
        wait until those claims end (ICE entry, cleared, or expired), then decide again."""
        token = uuid.uuid4().hex
        free: set[str] = set()
        unavailable: dict[str, str] = {}
        for _ in range(_MAX_CLAIM_ROUNDS):
            mine, elsewhere = self._claim_round(keys, token, free, unavailable)
            if mine or free or not elsewhere:
                return Turn(token, frozenset(mine), frozenset(free), unavailable)
            self._settle_awaited(elsewhere, free, unavailable)
            if free:
                return Turn(token, frozenset(), frozenset(free), unavailable)
        raise Transient("PutItem", BEING_TRIED)

    def _claim_round(
        self, keys: Sequence[str], token: str, free: set[str], unavailable: dict[str, str]
    ) -> tuple[set[str], dict[str, int]]:
        """One round over the keys not yet decided: (claimed by this turn, claimed elsewhere ->
        until when). Adds to `free` the ones launched here lately and to `unavailable` the dry."""
        now = self._clock()
        mine: set[str] = set()
        elsewhere: dict[str, int] = {}
        with self._lock:
            known = {k: e.reason for k, e in self._copy.items() if e.expires_at > now}
            claims = {k: t for k, t in self._claims.items() if t > now}
            launched = {k for k, t in self._launched_until.items() if t > now}
        for key in keys:
            if key in unavailable or key in free:
                continue
            if key in known:
                unavailable[key] = known[key]
            elif key in launched:
                free.add(key)
            elif key in claims:
                elsewhere[key] = claims[key]
            else:
                found = self._claim(key, token, now)
                if found is None:
                    mine.add(key)
                elif "claimedBy" in found:
                    elsewhere[key] = int(found.get("expiresAt", 0))
                else:
                    unavailable[key] = str(found.get("reason", ""))
        return mine, elsewhere

    def _settle_awaited(
        self, elsewhere: dict[str, int], free: set[str], unavailable: dict[str, str]
    ) -> None:
        """Wait for the claims held elsewhere to end and record how each ended."""
        for key, reason in self._await(elsewhere).items():
            if reason is None:
                free.add(key)  # the claimer's attempt ended without finding it dry
            elif reason not in (BEING_TRIED, _EXPIRED):
                unavailable[key] = reason
            # an expired claim (its claimer died) is claimed again in the next round

    def end_turn(self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()) -> None:
        """Clear this turn's claims that no ICE entry replaced; remember where it launched."""
        launched, dry = set(launched), set(dry)
        until = self._clock() + self._local_copy_seconds
        with self._lock:
            for key in launched:
                self._launched_until[key] = until
        for key in sorted(turn.mine - dry):
            try:
                self.round_trips += 1
                with aws_call("DeleteItem"):
                    self._db.delete_item(
                        TableName=self._table,
                        Key={"offering": {"S": key}},
                        ConditionExpression="claimedBy = :me",
                        ExpressionAttributeValues={":me": {"S": turn.token}},
                    )
            except ConditionFailed:
                pass  # an ICE entry replaced the claim: nothing to clear
            except Exception as error:
                # An uncleared claim only holds others back until it expires.
                logger.warning("claim not cleared", extra={"offering": key, "error": str(error)})

    def _claim(self, key: str, token: str, now: float) -> dict[str, Any] | None:
        """None when this turn now holds the claim, else the unexpired item that stands there."""
        cached_at = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
        item = {
            "offering": key,
            "reason": BEING_TRIED,
            "message": "a launcher is asking EC2 for this offering now",
            "cachedAt": cached_at,
            "expiresAt": int(now) + self._claim_seconds,
            "claimedBy": token,
        }
        try:
            self.round_trips += 1
            with aws_call("PutItem"):
                self._db.put_item(
                    TableName=self._table,
                    Item=to_item(item),
                    ConditionExpression="attribute_not_exists(offering) OR expiresAt <= :now",
                    ExpressionAttributeValues={":now": {"N": str(int(now))}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ConditionFailed as failed:
            # The item standing there comes back with the ClientError (ALL_OLD above).
            old: Any = getattr(failed.__cause__, "response", {}).get("Item") or {}
            found = from_item(old)
            self._remember(found, now)
            # Without the old item (not returned), assume a claim of the usual lifetime.
            return found or {
                "offering": key,
                "claimedBy": "",
                "expiresAt": int(now) + self._claim_seconds,
            }
        return None

    def _await(self, claims: dict[str, int]) -> dict[str, str | None]:
        """Poll claimed offerings until none is claimed any more, or their claims expire; key →
        reason now there (None: cleared, _EXPIRED, BEING_TRIED: still claimed)."""
        deadline = max(claims.values())
        state: dict[str, str | None] = dict.fromkeys(claims, BEING_TRIED)
        polls = len(_CLAIM_POLL_SECONDS) + self._claim_seconds + 1  # ~ the claims' lifetime
        for delay in _poll_delays(polls):
            (self._sleep or pause)(delay)
            now = self._clock()
            keys = [{"offering": {"S": k}} for k in claims]
            self.round_trips += 1
            items = {str(i["offering"]): i for i in batch_get(self._db, self._table, keys)}
            state = {}
            for key in claims:
                item = items.get(key)
                if item is None:
                    state[key] = None
                elif int(item.get("expiresAt", 0)) <= now:
                    state[key] = _EXPIRED if "claimedBy" in item else None
                    with self._lock:
                        self._claims.pop(key, None)
                else:
                    self._remember(item, now)
                    state[key] = BEING_TRIED if "claimedBy" in item else str(item.get("reason"))
            if BEING_TRIED not in state.values() or now > deadline:
                return state
        return state

    def _remember(self, item: dict[str, Any], now: float) -> None:
        """Keep what a claim or a poll read in the container's copy."""
        if not item or int(item.get("expiresAt", 0)) <= now:
            return
        entry = _entry(item)
        with self._lock:
            if "claimedBy" in item:
                self._claims[entry.offering] = entry.expires_at
            else:
                self._copy[entry.offering] = entry
                self._claims.pop(entry.offering, None)


def _entry(item: dict[str, Any]) -> UnavailableEntry:
    return UnavailableEntry(
        offering=str(item["offering"]),
        reason=str(item.get("reason", "")),
        message=str(item.get("message", "")),
        cached_at=str(item.get("cachedAt", "")),
        expires_at=int(item.get("expiresAt", 0)),
    )


def _poll_delays(count: int) -> Iterable[float]:
    for n in range(count):
        yield _CLAIM_POLL_SECONDS[min(n, len(_CLAIM_POLL_SECONDS) - 1)]
