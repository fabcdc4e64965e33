"""What `capacity-launcher web` shows, as the JSON its page polls: each NodePool's usage against
its limits, the reservations (used, free, idle), the requests (in flight, waiting, the newest
ones by status, recent failures with their reasons) and the ICE cache.

`observe` reads it all through the service's query use cases (service/queries.py), one pass a
refresh; `view_json` lays it out (pure: tests render it). Values are plain data: the page puts
each one in the document as text, never as markup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot
from capacity_launcher.domain.quantities import DIMENSIONS, PoolLimits
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_cli import views
from capacity_launcher_cli.top import WAITS_WITHIN, duration, live_reservations, time_left

if TYPE_CHECKING:
    from capacity_launcher.service.queries import Queries

# The newest records read a refresh: their statuses are counted, the first RECENT_ROWS shown,
# and the failures among them listed with their reasons.
RECENT_RECORDS = 100
RECENT_ROWS = 20
FAILURE_ROWS = 10


@dataclass(frozen=True)
class Observed:
    """Everything one refresh shows, as the service's queries answer it."""

    observed_at: datetime
    where: str
    pools: Sequence[NodePool] = ()
    pool_statuses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    leases: Sequence[Lease] = ()
    waits: Sequence[RequestRecord] = ()  # Waiting requests (the sparse WaitingRequests index)
    recent: Sequence[RequestRecord] = ()  # the newest records, newest first
    reservations: Sequence[ReservationSnapshot] = ()
    dry: Sequence[UnavailableEntry] = ()


def observe(asked: Queries, where: str) -> Observed:
    """One pass over the service's read-only views, observed on its clock."""
    pools, statuses = asked.pool_statuses()
    return Observed(
        observed_at=asked.now(),
        where=where,
        pools=pools,
        pool_statuses=statuses,
        leases=asked.open_leases(),
        waits=asked.live_waits(WAITS_WITHIN),
        recent=asked.recent_requests(RECENT_RECORDS),
        reservations=asked.reservation_snapshots(),
        dry=asked.unavailable_offerings(),
    )


def view_json(observed: Observed, refresh_seconds: float) -> dict[str, Any]:
    """The page's data: what `observe` read, laid out section by section."""
    return {
        "observedAt": observed.observed_at.isoformat(),
        "where": observed.where,
        "refreshSeconds": refresh_seconds,
        "pools": pools_json(observed),
        "requests": requests_json(observed),
        "reservations": reservations_json(observed),
        "iceCache": ice_json(observed),
    }


# -- pools --------------------------------------------------------------------------------------


def pools_json(observed: Observed) -> list[dict[str, Any]]:
    """Each pool's usage per resource against its limit (`limit` None: not limited, `fraction`
    of it used), its conditions, and the requests launching in it now."""
    in_flight = Counter(lease.pool for lease in observed.leases if not lease.settled)
    shown = []
    for pool in observed.pools:
        status = observed.pool_statuses.get(pool.name, {})
        used: Mapping[str, str] = status.get("used", {})
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        shown.append(
            {
                "name": pool.name,
                "resources": _resources(pool.spec.limits, used),
                "unready": used.get("unready"),
                "inFlight": in_flight.get(pool.name, 0),
                "ready": _condition(conditions.get("Ready")),
                "sufficient": _condition(conditions.get("ResourcesSufficient")),
            }
        )
    return shown


def _resources(limits: PoolLimits | None, used: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per resource the pool limits or uses, in the documents' spelling ('8Gi')."""
    written = limits.to_document() if limits is not None else {}
    # The used amounts parsed as limits are (cores, MiB, counts), to compare with the limits.
    amounts = PoolLimits.model_validate({k: v for k, v in used.items() if k in DIMENSIONS})
    rows = []
    for dimension in DIMENSIONS:
        if dimension not in written and dimension not in used:
            continue
        bound = limits.limit_for(dimension) if limits is not None else None
        amount = amounts.limit_for(dimension) or 0
        rows.append(
            {
                "name": dimension,
                "used": used.get(dimension, "0"),
                "limit": written.get(dimension),
                "fraction": float(amount / bound) if bound else None,
            }
        )
    return rows


def _condition(condition: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if condition is None:
        return None
    return {
        "status": condition["status"] == "True",
        "reason": condition.get("reason", ""),
        "message": condition.get("message", ""),
    }


# -- requests -----------------------------------------------------------------------------------


def requests_json(observed: Observed) -> dict[str, Any]:
    """Requests launching now (open leases), waiting for scheduled capacity, the newest ones and
    their statuses, and the failures among them with every reason their records give."""
    now = observed.observed_at.timestamp()
    failures = [r for r in observed.recent if r.is_terminal_failure]
    return {
        "counts": dict(Counter(str(r.status) for r in observed.recent)),
        "countedOf": len(observed.recent),
        "launching": [
            {
                "lease": lease.lease_id,
                "pool": lease.pool,
                "requester": lease.requester,
                "upTo": lease.count,
                "leaseEndsIn": duration(lease.expires_at - now),
            }
            for lease in observed.leases
            if not lease.settled
        ],
        "waiting": [_waiting(record, observed.observed_at) for record in observed.waits],
        "recent": [_record(record) for record in observed.recent[:RECENT_ROWS]],
        "failures": [
            {**_record(record), "reasons": [e.to_dict() for e in record.errors]}
            for record in failures[:FAILURE_ROWS]
        ],
        "failuresOf": len(failures),
    }


def _record(record: RequestRecord) -> dict[str, Any]:
    return {
        "requestId": record.request_id,
        "pool": record.node_pool,
        "requester": record.requester,
        "status": str(record.status),
        "launched": record.launched,
        "requested": record.requested,
        "receivedAt": record.received_at.isoformat(),
        "finishedAt": (
            None if record.status is RequestStatus.WAITING else record.finished_at.isoformat()
        ),
    }


def _waiting(record: RequestRecord, now: datetime) -> dict[str, Any]:
    until = record.wait_for_capacity_until
    return {
        **_record(record),
        # Each entry as the record has it, and in words (a queue's wait names no reservation).
        "waitingFor": [{**w.to_dict(), "named": w.named} for w in record.waiting_for],
        "waitEndsIn": duration((until - now).total_seconds()) if until else None,
    }


# -- capacity -----------------------------------------------------------------------------------


def reservations_json(observed: Observed) -> list[dict[str, Any]]:
    """Active and upcoming reservations, the soonest to end first: used and free instances, and
    `idle`, what an active reservation holds unused (EC2 bills it used or not); None while it is
    not active (nothing is billed idle yet)."""
    return [
        {
            "id": r.reservation_id,
            "instanceType": r.instance_type,
            "zone": r.zone,
            "kind": views.reservation_kind(r),
            "state": r.state,
            "exhausted": r.exhausted,
            "total": r.total,
            "used": r.used,
            "free": r.available,
            "idle": r.available if r.state == ACTIVE else None,
            "timeLeft": time_left(r, observed.observed_at),
        }
        for r in live_reservations(observed.reservations, observed.observed_at)
    ]


def ice_json(observed: Observed) -> list[dict[str, Any]]:
    """The ICE cache's unexpired entries, the soonest to clear first."""
    now = observed.observed_at.timestamp()
    return [
        {
            "offering": entry.offering,
            "reason": entry.reason,
            "message": entry.message,
            "cachedAt": entry.cached_at,
            "clearsIn": duration(entry.expires_at - now),
        }
        for entry in sorted(observed.dry, key=lambda e: (e.expires_at, e.offering))
    ]
