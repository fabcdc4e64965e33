"""Fair sharing among the waiting requests of one priority (issue 37): which of them a wake tries
first. Pure: the wake loop (service/admission_queue.py) reads the window and the usage items and
asks here.

A quota's **dominant resource share** in a NodePool is Kueue's (ClusterQueue, one cohort level):
for each resource the quota covers there, what it uses above its nominal quota, divided by what
the cohort may lend of that resource (the sum of its members' lendable parts: `lendingLimit`, or
the nominal quota without one); the largest of those ratios, divided by `spec.fairSharing.weight`.
0 while the quota uses no more than its nominal quota, or has no cohort; a weight of 0 makes a
borrowing quota's share infinite (every other member's requests go first). Kueue sums a
resource over every flavor and rounds to thousandths; here the share is of the one pool whose
queue is woken (one usage item per cohort and pool is what a wake reads), exactly.

A wake reads the first FAIR_WINDOW entries of the pool's queue (one Query). Among them, the
order it tries is: priority (highest first), then an entry that blocks (passed over MAX_PASSES
times: anti-starvation outranks fairness), then the lowest share of its requester's quota, then
the queue's order (arrival, requestId). Entries beyond the window wait for it to reach them:
fairness is among the first FAIR_WINDOW waiting, and the queue's own order beyond.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from capacity_launcher.domain.accounting.admission_queue import QueueEntry
from capacity_launcher.domain.accounting.quota_admission import ZERO, Cohort, UsageKey
from capacity_launcher.domain.apis.quota_sets import quota_for
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.quantities import Resources

# How many entries from a queue's head one wake reads and orders by share (one Query, Limit).
FAIR_WINDOW = 8
# A weight-0 quota that borrows: after every finite share.
INFINITE = Decimal("Infinity")


def dominant_share(
    quota: CapacityQuota,
    quotas: Iterable[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    pool: str,
) -> Decimal:
    """The quota's dominant resource share in `pool`, weighted (module docstring)."""
    terms = quota.flavor(pool)
    if quota.spec.cohort is None or terms is None:
        return ZERO
    cohort = Cohort.of(quota, quotas, usage)
    share = ZERO
    borrowing = False
    for term in terms.resources:
        ledger = cohort.ledger(pool, term.name)
        borrowed = ledger.borrowed(quota.name)
        if borrowed <= 0:
            continue
        borrowing = True
        if ledger.pool > 0:
            share = max(share, borrowed / ledger.pool)
    if not borrowing:
        return ZERO
    weight = quota.spec.fair_weight
    return INFINITE if weight == 0 else share / weight


def governing(
    entries: Iterable[QueueEntry], pool: str, quotas: Sequence[CapacityQuota]
) -> dict[str, CapacityQuota]:
    """Each entry's quota in the pool (by requestId): the one covering its requester there.
    Entries no quota governs (no requester recorded, or the pool names no quota) are left out."""
    found: dict[str, CapacityQuota] = {}
    for entry in entries:
        quota, _ = quota_for(quotas, entry.requester, pool)
        if quota is not None:
            found[entry.request_id] = quota
    return found


def usage_items(teams: Mapping[str, CapacityQuota], pool: str) -> list[str]:
    """The usage items a wake reads to order its window: one per cohort of the teams present, and
    none when fewer than two quotas wait in it (the queue's order is then the fair one)."""
    if len({q.name for q in teams.values()}) < 2:
        return []
    return sorted({q.usage_item(pool) for q in teams.values() if q.spec.cohort is not None})


def shares(
    teams: Mapping[str, CapacityQuota],
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    pool: str,
) -> dict[str, Decimal]:
    """Each governed entry's share (by requestId), from one reading of the cohorts' usage."""
    by_quota = {
        q.name: dominant_share(q, quotas, usage, pool)
        for q in {q.name: q for q in teams.values()}.values()
    }
    return {request_id: by_quota[q.name] for request_id, q in teams.items()}


def fair_order(window: Iterable[QueueEntry], share: Mapping[str, Decimal]) -> list[QueueEntry]:
    """The window in the order a wake tries it: priority, a blocking entry, the lowest share,
    then the queue's order. An entry without a share (no quota governs it) counts as 0."""
    return sorted(
        window,
        key=lambda e: (-e.priority, not e.blocks, share.get(e.request_id, ZERO), e.key),
    )


def after(order: Sequence[QueueEntry], refused: str) -> list[QueueEntry]:
    """What a wake passed on from the entry keyed `refused` tries: the entries after it in the
    fair order; when it is no longer in the window, those the queue holds behind it."""
    keys = [e.key for e in order]
    if refused in keys:
        return list(order[keys.index(refused) + 1 :])
    return [e for e in order if e.key > refused]
