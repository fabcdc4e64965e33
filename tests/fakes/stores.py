"""In-memory stores behind the launcher's ports: request records and intents, instance records,
the ICE cache (pool leases: tests/fakes/leases.py). Each keeps its items in dicts, so a phase
test reads the outcome back from them instead of from DynamoDB."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from capacity_launcher.domain.capacity.offerings import Turn
from capacity_launcher.domain.capacity.single_flight import BEING_TRIED, Evidence, Standing
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus

Clock = Callable[[], float]  # epoch seconds, as the adapters read the composition root's clock


class SlotSink(Protocol):
    """The reservation snapshots an intent's claim and its give-back write into, as the
    adapter's transactions do (tests/fakes/ec2.py `FakeReservations`)."""

    def take_claimable(self, reservation_id: str, count: int) -> bool: ...
    def give_back(self, reservation_id: str, count: int) -> None: ...
    def note_launched(self, launched: Mapping[str, int]) -> None: ...


class FakeRecords:
    """`Records`: request records, body bindings and launch intents, by request id and token;
    an intent's claimed slots taken from `slots` with it, and given back with its completion
    while it is pending."""

    def __init__(self) -> None:
        self.slots: SlotSink | None = None
        self.records: dict[str, RequestRecord] = {}
        self.held_by: dict[str, str | None] = {}
        self.bodies: dict[str, str] = {}
        self.intents: dict[str, LaunchIntent] = {}
        self._pointers: dict[str, list[str]] = {}

    def load(self, request_id: str) -> tuple[RequestRecord | None, list[LaunchIntent]]:
        intents = [self.intents[t] for t in self._pointers.get(request_id, [])]
        return self.records.get(request_id), sorted(intents, key=lambda i: i.attempt)

    def put_record(self, record: RequestRecord, held_by: str | None = None) -> None:
        self.records[record.request_id] = record
        self.held_by[record.request_id] = held_by

    def put_records(self, records: Sequence[RequestRecord]) -> None:
        for record in records:
            self.put_record(record)

    def waiting(self, request_id: str) -> tuple[RequestRecord, str | None] | None:
        record = self.records.get(request_id)
        if record is None or record.status is not RequestStatus.WAITING:
            return None
        return record, self.held_by.get(request_id)

    def take_wait(self, request_id: str, held_by: str) -> bool:
        found = self.waiting(request_id)
        return found is not None and found[1] == held_by

    def put_record_if_absent(self, record: RequestRecord) -> bool:
        if record.request_id in self.records:
            return False
        self.put_record(record)
        return True

    def get_record(self, request_id: str) -> RequestRecord | None:
        return self.records.get(request_id)

    def get_records(self, request_ids: Sequence[str]) -> dict[str, RequestRecord]:
        return {r: self.records[r] for r in request_ids if r in self.records}

    def bind_body(self, request_id: str, body_hash: str) -> str:
        return self.bind_first_body(request_id, body_hash)[0]

    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]:
        if request_id in self.bodies:
            return self.bodies[request_id], False
        self.bodies[request_id] = body_hash
        return body_hash, True

    def bound_body(self, request_id: str) -> str | None:
        return self.bodies.get(request_id)

    def write_intent(self, intent: LaunchIntent) -> bool:
        if intent.token in self.intents:
            return False
        claimed, target = intent.claimed, intent.reservation_id
        if claimed and target and self.slots and not self.slots.take_claimable(target, claimed):
            raise ConditionFailed("TransactWriteItems", ("None", "None", "ConditionalCheckFailed"))
        # Stored as the adapter stores it: pending, whatever the caller's copy says.
        self.intents[intent.token] = replace(intent, state="pending", instance_ids=(), errors=())
        for request_id in intent.request_ids:
            self._pointers.setdefault(request_id, []).append(intent.token)
        return True

    def release_claim(self, intent: LaunchIntent) -> None:
        stored = self.intents.get(intent.token)
        if stored is None or stored.state != "pending" or stored.claimed != intent.claimed:
            return
        self.intents[intent.token] = replace(stored, claimed=0)
        if self.slots is not None and stored.claimed and stored.reservation_id:
            self.slots.give_back(stored.reservation_id, stored.claimed)

    def complete_intent(self, done: IntentCompletion) -> None:
        token, pending = done.token, self.intents[done.token].state == "pending"
        if done.slots_back is not None and pending and self.slots is not None:
            self.slots.give_back(done.slots_back.reservation_id, done.slots_back.count)
        if done.noted and pending and self.slots is not None:
            self.slots.note_launched(done.noted)
        self.intents[token] = replace(
            self.intents[token],
            state="done",
            instance_ids=done.instance_ids,
            errors=tuple(dict(e) for e in done.errors),
        )


class FakeInstances:
    """`InstanceItems`: one record per instance, released once."""

    def __init__(self) -> None:
        self.records: dict[str, InstanceRecord] = {}
        self.released: dict[str, tuple[str, str]] = {}
        self.noted: dict[str, dict[str, str]] = {}

    def put(self, records: Iterable[InstanceRecord]) -> None:
        self.records.update({r.instance_id: r for r in records})

    def get(self, instance_id: str) -> InstanceRecord | None:
        return self.records.get(instance_id)

    def many(self, instance_ids: Sequence[str]) -> dict[str, InstanceRecord]:
        return {i: self.records[i] for i in instance_ids if i in self.records}

    def release(self, instance_id: str, state: str, at: str) -> InstanceRecord | None:
        if instance_id in self.released or instance_id not in self.records:
            return None
        self.released[instance_id] = (state, at)
        return self.records[instance_id]

    def rearm(self, instance_id: str) -> None:
        self.released.pop(instance_id, None)

    def adopt(self, records: Sequence[InstanceRecord]) -> list[str]:
        new = [r for r in records if r.instance_id not in self.records]
        self.put(new)
        return [r.instance_id for r in new]

    def note_on_request(self, request_id: str, instance_id: str, state: str) -> None:
        self.noted.setdefault(request_id, {})[instance_id] = state


@dataclass(frozen=True)
class FakeEntry:
    """One ICE-cache entry (`Entry`), until `expires_at` on the cache's clock."""

    reason: str
    message: str
    expires_at: float


class FakeUnavailable:
    """`UnavailableCache`: offerings EC2 found dry, each for `ttl_seconds` of `clock`, and the
    single flight's claims, each for `claim_seconds` (a claim another worker holds is
    `claim_elsewhere`). Every read is fresh: the evidence is what the table holds now."""

    def __init__(self, clock: Clock, ttl_seconds: int = 180, claim_seconds: int = 20) -> None:
        self._clock = clock
        self._ttl = ttl_seconds
        self.claim_seconds = claim_seconds
        self.entries: dict[str, FakeEntry] = {}
        self.claims: dict[str, tuple[str, float]] = {}  # offering key -> (turn's token, until)
        self.launched: dict[str, float] = {}
        self._tokens = itertools.count(1)

    def current(self) -> dict[str, FakeEntry]:
        now = self._clock()
        return {k: e for k, e in self.entries.items() if e.expires_at > now}

    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> list[str]:
        until = self._clock() + self._ttl
        marked = []
        for key, reason, message in offerings:
            self.entries[key] = FakeEntry(reason, message, until)
            self.claims.pop(key, None)
            marked.append(key)
        return marked

    def clear(self, offering: str) -> None:
        self.entries.pop(offering, None)

    def claim_elsewhere(self, key: str) -> None:
        self.claims[key] = ("elsewhere", self._clock() + self.claim_seconds)

    def evidence(self) -> Evidence:
        now = self._clock()
        return Evidence(
            now,
            {k: Standing(e.reason, e.expires_at) for k, e in self.entries.items()},
            {k: until for k, (_, until) in self.claims.items() if until > now},
            {k: until for k, until in self.launched.items() if until > now},
        )

    def take_turn(self, keys: Sequence[str], token: str | None = None) -> Turn:
        token = token or f"turn-{next(self._tokens)}"
        now = self._clock()
        known = self.current()
        unavailable = {k: known[k].reason for k in keys if k in known}
        held = {k: until for k, (_, until) in self.claims.items() if until > now}
        elsewhere = {k: held[k] for k in keys if k in held and k not in unavailable}
        mine = frozenset(k for k in keys if k not in unavailable and k not in elsewhere)
        for key in mine:
            self.claims[key] = (token, now + self.claim_seconds)
        return Turn(token, mine, frozenset(), unavailable, elsewhere)

    def standing(self, keys: Sequence[str]) -> dict[str, Standing | None]:
        read: dict[str, Standing | None] = {}
        for key in keys:
            if key in self.claims:
                read[key] = Standing(BEING_TRIED, self.claims[key][1], claimed=True)
            elif key in self.entries:
                read[key] = Standing(self.entries[key].reason, self.entries[key].expires_at)
            else:
                read[key] = None
        return read

    def end_turn(self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()) -> None:
        for key in launched:
            self.launched[key] = self._clock() + 5
        for key in turn.mine - set(dry):
            if self.claims.get(key, ("", 0.0))[0] == turn.token:
                del self.claims[key]


def epoch(moment: datetime) -> float:
    return moment.astimezone(UTC).timestamp()
