"""Launch intents: what is about to be asked of EC2, written down before asking.

A retry after a crash replays an intent (same input, same ClientToken, so EC2 answers with the same
instances) instead of composing a new one: neither crashes nor batch coalescing launch twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from capacity_launcher.domain.capacity.offerings import RESERVED
from capacity_launcher.domain.records.tags import NODE_POOL

IntentState = Literal["pending", "done"]


def client_token(request_ids: Sequence[str], attempt: int) -> str:
    """Deterministic per (requests served, attempt number); EC2 allows 64 ASCII characters."""
    digest = hashlib.sha256(("\n".join(request_ids) + f"\n#{attempt}").encode()).hexdigest()
    return f"cl-{digest[:40]}"


@dataclass(frozen=True)
class Share:
    """How many of an intent's instances one request gets, in the order the shares are listed."""

    request_id: str
    count: int


def allocate(count: int, wanted: Sequence[tuple[str, int]]) -> tuple[Share, ...]:
    """Split an attempt's `count` over requests in order: earlier requests are filled first."""
    shares = []
    left = count
    for request_id, want in wanted:
        take = min(want, left)
        if take > 0:
            shares.append(Share(request_id, take))
            left -= take
    return tuple(shares)


@dataclass(frozen=True)
class SlotsBack:
    """Slots an intent claimed in its reservation's snapshot that none of its instances took:
    given back in the write that marks the intent done, only if it was pending (once)."""

    reservation_id: str
    count: int


@dataclass(frozen=True)
class IntentCompletion:
    """A CreateFleet's answer, to be stored on its intent (`state` done): the instances it
    launched and the errors it reported, each `{"code", "message"}`; `slots_back`, the slots
    it claimed that no instance took; `noted`, the slots its instances took in reservations it
    did not claim (reservation id -> count), noted with it: both written only while the intent
    is pending, so once."""

    token: str
    instance_ids: tuple[str, ...]
    errors: tuple[Mapping[str, str], ...] = ()
    slots_back: SlotsBack | None = None
    noted: Mapping[str, int] = field(default_factory=dict)

    @property
    def moves_slots(self) -> bool:
        return self.slots_back is not None or bool(self.noted)


@dataclass(frozen=True)
class LaunchIntent:
    token: str
    attempt: int
    capacity_type: str
    shares: tuple[Share, ...]
    fleet_input: Mapping[str, Any]
    # What each override means, so errors and landings map back to offerings on replay.
    offerings: tuple[str, ...] = ()
    state: IntentState = "pending"
    instance_ids: tuple[str, ...] = ()
    errors: tuple[Mapping[str, str], ...] = field(default_factory=tuple)
    # Slots of `reservation_id` claimed in its snapshot by the transaction that wrote the intent
    # (issue 38): a replay of it claims none again, and its completion gives back the unused.
    claimed: int = 0

    @property
    def request_ids(self) -> tuple[str, ...]:
        return tuple(s.request_id for s in self.shares)

    @property
    def reservation_id(self) -> str | None:
        """The one reservation a reserved intent targets (`capacity-reservations-only`), when its
        offerings name a single one: its instances were launched in it, even once EC2 stops
        naming it on them (a reservation that ended leaves them running as On-Demand)."""
        if self.capacity_type != RESERVED:
            return None
        named = {key.removeprefix(f"{RESERVED}:") for key in self.offerings}
        return named.pop() if len(named) == 1 else None

    @property
    def node_pool(self) -> str | None:
        """The pool the intent launches for, as its instance tags say."""
        for spec in self.fleet_input.get("TagSpecifications", ()):
            for tag in spec.get("Tags", ()):
                if tag.get("Key") == NODE_POOL:
                    return str(tag["Value"])
        return None

    def completion(
        self, instance_ids: Sequence[str], errors: Sequence[Mapping[str, str]] = ()
    ) -> IntentCompletion:
        """Its answer as stored on it: a claimed intent's instances all landed in the one
        reservation it targets, so the slots they did not take go back with it."""
        unused = self.claimed - len(instance_ids)
        back = None
        if unused > 0 and self.reservation_id is not None:
            back = SlotsBack(self.reservation_id, unused)
        return IntentCompletion(self.token, tuple(instance_ids), tuple(errors), back)

    def split(self, instance_ids: Sequence[str]) -> dict[str, list[str]]:
        """Instances per request: sorted ids, handed out in share order (same answer on replay)."""
        ordered = sorted(instance_ids)
        result: dict[str, list[str]] = {}
        start = 0
        for share in self.shares:
            result[share.request_id] = ordered[start : start + share.count]
            start += share.count
        return result
