"""The sync's usage roll-up: each run adds the window since the last one to the day items of usage
by team (domain/accounting/team_usage.py says what counts; adapters/usage_store.py stores it).

It reads nothing of its own but the watermark: reconciliation has just listed our instances (live
ones and those EC2 still lists after they stopped or terminated) and read the records of the live
ones; the records of the others are read here (one BatchGetItem per 100), for their `releasedAt`.
Each reservation counts at what the sync's previous look saw (held until this look, as the idle
accounting holds them), its kind from the same snapshot.
A window is written once: its hours and the new watermark in one transaction conditioned on the
watermark read, or, a window of more buckets than one transaction holds, in parts
(adapters/usage_store.py), each bucket marked with the window's end; a run that finds a window
begun in parts and not finished finishes that window. The first run after an upgrade only sets
the watermark: usage counts from then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from capacity_launcher.domain.accounting.team_usage import (
    Lifetime,
    ReservationHours,
    RollupMark,
    UsageBucket,
    capacity_kind,
    reservation_window,
    window_usage,
)
from capacity_launcher.domain.capacity.fleet import ManagedInstance
from capacity_launcher.domain.capacity.reservation_state import StoredReservation
from capacity_launcher.domain.capacity.reservations import ACTIVE
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.tags import NODE_POOL, REQUESTER
from capacity_launcher.service.ports import InstanceItems

LIVE = ("pending", "running")


class UsageLedger(Protocol):
    """Where the roll-up adds its windows (adapters/usage_store.py)."""

    def mark(self) -> RollupMark: ...

    def add(
        self,
        since: datetime | None,
        until: datetime,
        usage: Mapping[UsageBucket, float],
        reservations: Iterable[ReservationHours],
    ) -> bool: ...


@dataclass
class UsageRollupReport:
    since: datetime | None = None
    until: datetime | None = None
    instance_hours: float = 0.0
    buckets: int = 0
    written: bool = False
    lifetimes: list[Lifetime] = field(default_factory=list)


class UsageRollup:
    def __init__(
        self, ledger: UsageLedger, items: InstanceItems, now: Callable[[], datetime]
    ) -> None:
        self._ledger = ledger
        self._items = items
        self._now = now

    def run(
        self,
        described: Sequence[ManagedInstance],
        records: Mapping[str, InstanceRecord],
        reservations: Mapping[str, StoredReservation],
    ) -> UsageRollupReport:
        mark = self._ledger.mark()
        since = mark.counted_until
        until = mark.writing_until or self._now()
        report = UsageRollupReport(since=since, until=until)
        if since is not None and until <= since:
            return report
        if since is None:
            report.written = self._ledger.add(None, until, {}, ())
            return report
        gone = [i.instance_id for i in described if i.state not in LIVE]
        known = {**self._items.many(gone), **records} if gone else dict(records)
        kinds = {k: s.snapshot.reservation_type for k, s in reservations.items()}
        lifetimes = [
            life
            for instance in described
            if (life := _lifetime(instance, known.get(instance.instance_id), kinds, since))
        ]
        usage = window_usage(lifetimes, since, until)
        paid = [
            reservation_window(
                k,
                s.snapshot.reservation_type,
                s.snapshot.instance_type,
                s.idle.total,
                s.idle.available,
                since,
                until,
            )
            for k, s in sorted(reservations.items())
            if s.idle is not None and s.snapshot.state == ACTIVE and s.idle.total > 0
        ]
        report.lifetimes = lifetimes
        report.instance_hours = sum(usage.values())
        report.buckets = len(usage)
        report.written = self._ledger.add(since, until, usage, paid)
        return report


def _lifetime(
    instance: ManagedInstance,
    record: InstanceRecord | None,
    kinds: Mapping[str, str],
    since: datetime,
) -> Lifetime | None:
    """How long `instance` ran, as its record says (the service's clock: `launchedAt`,
    `releasedAt`). One no longer live without a release in its record counts nothing more: its
    release is not known yet (the instance event has not landed), and the next run counts up to
    it once it has, if it came after this window's start."""
    live = instance.state in LIVE
    released = _moment(record.released_at) if record else None
    if not live and released is None:
        return None
    said = _said(instance, record)
    if said.start is None:
        return None
    end = released if (released is not None and not live) else None
    if end is not None and end <= since:
        return None
    return Lifetime(
        instance_id=instance.instance_id,
        requester=said.requester,
        node_pool=said.node_pool,
        capacity_kind=capacity_kind(said.capacity_type, kinds.get(said.reservation or "")),
        instance_type=said.instance_type,
        reservation_id=said.reservation if said.capacity_type == "reserved" else None,
        start=said.start,
        end=end,
    )


@dataclass(frozen=True, slots=True)
class _Said:
    start: datetime | None
    requester: str | None
    node_pool: str | None
    reservation: str | None
    capacity_type: str
    instance_type: str


def _said(instance: ManagedInstance, record: InstanceRecord | None) -> _Said:
    """What the record says of `instance`, else what EC2 and its tags say."""
    if record is None:
        return _Said(
            start=instance.launched_at,
            requester=instance.tags.get(REQUESTER),
            node_pool=instance.tags.get(NODE_POOL),
            reservation=instance.capacity_reservation_id,
            capacity_type=instance.capacity_type,
            instance_type=instance.instance_type,
        )
    return _Said(
        start=_moment(record.launched_at) or instance.launched_at,
        requester=record.requester or instance.tags.get(REQUESTER),
        node_pool=record.node_pool or instance.tags.get(NODE_POOL),
        reservation=record.capacity_reservation_id or instance.capacity_reservation_id,
        capacity_type=record.capacity_type,
        instance_type=record.instance_type,
    )


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
