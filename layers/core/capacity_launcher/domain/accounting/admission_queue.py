"""Queue, don't refuse (issue 37): what a request that may wait (`waitForCapacityUntil`) waits for
instead of failing, and the order in which waiting requests are woken. Pure: the launch path
(service/launch/wait.py, settle.py) and the wake loop (service/admission_queue.py) decide here.

A request whose deadline is ahead, refused with nothing launched for room that may appear (its
team's quota, its pool's limits or unready limit, every offering it may use known dry), waits:
its record is Waiting, naming each refusal as a `waitingFor` entry of an additive kind (Quota,
Limit, Capacity) beside the scheduled reservations' entries. A refusal waiting cannot cure (no
quota covers the requester, the demand exceeds the quota's bound on its own) fails as before.

Waiting requests are entries of one queue per NodePool (the partition), ordered by priority,
highest first, then arrival, then requestId (the sort key): its head is one Query with Limit.
Room appearing in a pool wakes its head. Kueue's BestEffortFIFO, bounded: a woken head that is
refused again passes the wake on to the entry behind it, at most WAKE_WINDOW entries per room
event; a head passed over MAX_PASSES times blocks the queue behind it (StrictFIFO for that
queue) until it is admitted or its deadline passes, so a large request is never starved by a
stream of smaller ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from capacity_launcher.domain.apis.quotas import format_amount
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.records.status import (
    AWAITS_CAPACITY,
    AWAITS_LIMIT,
    AWAITS_QUOTA,
    AWAITS_RESERVATION,
    AwaitedReservation,
    ErrorDetail,
    RequestRecord,
    UnavailableOffering,
    format_timestamp,
)

# The error a request that waited for room ends with at its deadline, beside the refusal.
NOT_ADMITTED_BY_DEADLINE = "NotAdmittedByDeadline"
# How many entries one room event may try, the head first (Kueue's BestEffortFIFO, bounded).
WAKE_WINDOW = 4
# How many times an entry may be passed over by those behind it before it blocks them.
MAX_PASSES = 8
# A held copy of a queue wait (the deadline backstop) comes back after at most this long.
QUEUE_CHECK_SECONDS = 900
MIN_QUEUE_CHECK_SECONDS = 60
# Priorities run from PriorityClass's lowest (-2^31) to its highest (2 * 10^9): the sort key
# holds OFFSET - priority, zero-padded, so the highest priority sorts first.
_PRIORITY_OFFSET = 4_000_000_000
_PRIORITY_DIGITS = 10
QUEUE_PREFIX = "AdmissionQueue#"


def quota_awaited(refused: QuotaExceeded) -> AwaitedReservation | None:
    """The Quota entry a quota refusal waits for; None when waiting cannot cure it (no quota
    covers the requester here, or the demand alone exceeds the quota's bound)."""
    if refused.quota is None or refused.resource is None or not refused.ever:
        return None
    needed = refused.needed
    return AwaitedReservation(
        kind=AWAITS_QUOTA,
        node_pool=refused.flavor,
        quota=refused.quota,
        resource=refused.resource,
        needed=format_amount(refused.resource, needed) if needed is not None else None,
        reason=str(refused),
    )


def limit_awaited(pool: str, reason: str) -> AwaitedReservation:
    """The Limit entry: room in the pool's limits (or under its unready limit)."""
    return AwaitedReservation(kind=AWAITS_LIMIT, node_pool=pool, reason=reason)


def capacity_awaited(
    pool: str, reason: str, dry: Iterable[UnavailableOffering]
) -> AwaitedReservation:
    """The Capacity entry: every offering the request may use in the pool is dry."""
    offerings = sorted({f"{o.instance_type or '*'}/{o.zone or '*'}/{o.capacity_type}" for o in dry})
    return AwaitedReservation(
        kind=AWAITS_CAPACITY, node_pool=pool, reason=reason, offerings=offerings[:20]
    )


def queued_kinds(awaited: Iterable[AwaitedReservation]) -> list[AwaitedReservation]:
    """The entries a queue answers (not scheduled reservations)."""
    return [a for a in awaited if a.kind != AWAITS_RESERVATION]


def waits_instead(
    deadline: datetime | None, now: datetime, launched: int, awaited: Sequence[AwaitedReservation]
) -> bool:
    """Whether a request refused now waits instead of failing: it set a deadline still ahead,
    nothing was launched for it, and what refused it is room that may appear."""
    return deadline is not None and now < deadline and launched == 0 and bool(awaited)


def missed_deadline(deadline: datetime, awaited: Sequence[AwaitedReservation]) -> ErrorDetail:
    """The error a request that waited for room ends with at its deadline (its refusals kept
    beside it): what it waited for, in a few words."""
    what = "; ".join(a.named for a in awaited) or "room"
    return ErrorDetail(
        code=NOT_ADMITTED_BY_DEADLINE,
        message=f"waitForCapacityUntil: {format_timestamp(deadline)} passed while the request "
        f"waited for {what}",
    )


def queue_check_seconds(now: datetime, deadline: datetime) -> int:
    """When a queue wait's held copy comes back (the deadline backstop): at the deadline, within
    SQS's largest delay; never sooner than a minute."""
    until = int((deadline - now).total_seconds()) + 1
    return max(MIN_QUEUE_CHECK_SECONDS, min(QUEUE_CHECK_SECONDS, until))


# -- the queue's order --------------------------------------------------------------------------


def priority_of(class_value: int | None, quota_priority: int | None) -> int:
    """A request's place in its queue: the value of the PriorityClass it names, else its quota's
    priority, else 0 (as a Pod's priority is its class's, else the global default's)."""
    if class_value is not None:
        return class_value
    return quota_priority if quota_priority is not None else 0


def queue_partition(pool: str) -> str:
    """The partition of a pool's queue: one per NodePool, so room appearing in a pool (an
    instance ended, a lease expired, a pool or quota applied) names the one queue to wake."""
    return f"{QUEUE_PREFIX}{pool}"


def entry_key(priority: int, arrival: datetime, request_id: str) -> str:
    """The sort key: priority (highest first), arrival (earliest first), then requestId."""
    inverted = _PRIORITY_OFFSET - priority
    return f"{inverted:0{_PRIORITY_DIGITS}d}#{format_timestamp(arrival)}#{request_id}"


@dataclass(frozen=True)
class QueueEntry:
    """A waiting request in its pool's queue. `wake`: its place in the chain of the room event
    that woke it (0: not woken); `passes`: how many times entries behind it were woken after it
    was refused again."""

    pool: str
    key: str
    request_id: str
    priority: int
    arrival: datetime
    deadline: datetime
    body: str
    queue_arn: str
    wake: int = 0
    passes: int = 0
    # Whose request (its `requester`): the quota whose share orders it among its priority
    # (domain/accounting/fair_sharing.py); None for an entry written before it was recorded.
    requester: str | None = None

    @classmethod
    def of(
        cls,
        pool: str,
        request_id: str,
        priority: int,
        arrival: datetime,
        deadline: datetime,
        body: str,
        queue_arn: str,
        requester: str | None = None,
    ) -> QueueEntry:
        key = entry_key(priority, arrival, request_id)
        return cls(
            pool, key, request_id, priority, arrival, deadline, body, queue_arn, requester=requester
        )

    @property
    def blocks(self) -> bool:
        """Passed over often enough: nothing behind it is woken before it (anti-starvation)."""
        return self.passes >= MAX_PASSES


def pass_wake_on(refused: QueueEntry) -> int | None:
    """A woken entry refused again: the chain number of the wake it passes to the entry behind
    it, or None (not woken by a room event, the event's window spent, or it blocks)."""
    if refused.wake <= 0 or refused.wake >= WAKE_WINDOW or refused.blocks:
        return None
    return refused.wake + 1


def in_order(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    """Entries as the queue holds them (what a Query returns): by sort key."""
    return sorted(entries, key=lambda e: e.key)


def queue_pool(awaited: Iterable[AwaitedReservation]) -> str | None:
    """The pool whose queue a Waiting request waits in: where its last refusal for room was
    (None: it waits only for scheduled reservations)."""
    queued = queued_kinds(awaited)
    return queued[-1].node_pool if queued else None


@dataclass(frozen=True)
class QueuedRequest:
    """A waiting request as an operator sees its queue (Kueue's pending workload): its place
    (1: the head), its entry, and its record (None: the entry outlived it, removed at the next
    wake)."""

    position: int
    entry: QueueEntry
    record: RequestRecord | None


def positions(
    entries: Iterable[QueueEntry], records: Mapping[str, RequestRecord]
) -> list[QueuedRequest]:
    """The queue's entries in order, numbered from its head, each with its record."""
    return [
        QueuedRequest(place, entry, records.get(entry.request_id))
        for place, entry in enumerate(in_order(entries), start=1)
    ]
