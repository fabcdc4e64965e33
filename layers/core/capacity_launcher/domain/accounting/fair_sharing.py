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

**Through a cohort tree** (Kueue's hierarchical fair sharing, its tournament): before the quota's
own share, the order compares, level by level from the root down, the shares of the subtrees the
entries come from. An entry's **share path** holds, for each cohort on the path from just below
its tree's root down to its quota's cohort, that cohort's share within its parent
(`CohortTree.dominant_share`, weighted by the Cohort's ``spec.fairSharing.weight``), then its
quota's share as above. Paths compare as tuples: two entries under one cohort compare equal down
to where they part, and there the two siblings' shares decide (a quota and a child cohort of one
cohort are siblings too). Shares are static within one wake, so the subtree furthest below its
share goes first with all it has in the window, as Kueue's tournament picks its winner; equal
shares of two siblings go on to the next level, then to the queue's order. Without a tree (no
Cohort document gives the cohort a parent or a quota of its own) the path is the quota's share
alone: the flat order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting.admission_queue import QueueEntry
from capacity_launcher.domain.accounting.cohort_paths import tree_cohorts, tree_path
from capacity_launcher.domain.accounting.cohort_tree import CohortTree, in_tree
from capacity_launcher.domain.accounting.quota_admission import ZERO, Cohort, UsageKey
from capacity_launcher.domain.apis.quota_sets import quota_for
from capacity_launcher.domain.apis.quotas import CapacityQuota, usage_item_key
from capacity_launcher.domain.quantities import Resources

if TYPE_CHECKING:  # a type only: the Kueue document's module stays out of a handler's init
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort as CohortDocument

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


def usage_items(
    teams: Mapping[str, CapacityQuota],
    pool: str,
    cohorts: Mapping[str, CohortDocument] | None = None,
) -> list[str]:
    """The usage items a wake reads to order its window: one per cohort of the teams present
    (through a tree, every cohort of the tree: a subtree's use is its cohorts'), and none when
    fewer than two quotas wait in it (the queue's order is then the fair one). At most
    FAIR_WINDOW trees of MAX_TREE_COHORTS cohorts: bounded whatever the number waiting."""
    if len({q.name for q in teams.values()}) < 2:
        return []
    found = {q.usage_item(pool) for q in teams.values() if q.spec.cohort is not None}
    for quota in teams.values():
        if cohorts and in_tree(cohorts, quota):
            names = tree_cohorts(cohorts, quota.cohort_key)
            found |= {usage_item_key(name, pool) for name in names}
    return sorted(found)


def shares(
    teams: Mapping[str, CapacityQuota],
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    pool: str,
    cohorts: Mapping[str, CohortDocument] | None = None,
) -> dict[str, tuple[Decimal, ...]]:
    """Each governed entry's share path (by requestId; module docstring), from one reading of
    the cohorts' usage: its subtrees' shares from below its tree's root down, then its quota's."""
    distinct = {q.name: q for q in teams.values()}
    tree = CohortTree(quotas, cohorts, usage) if cohorts else None
    by_quota = {
        name: _share_path(tree, cohorts or {}, q, quotas, usage, pool)
        for name, q in distinct.items()
    }
    return {request_id: by_quota[q.name] for request_id, q in teams.items()}


def _share_path(
    tree: CohortTree | None,
    cohorts: Mapping[str, CohortDocument],
    quota: CapacityQuota,
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    pool: str,
) -> tuple[Decimal, ...]:
    """``quota``'s share path: the shares within their parents of the cohorts on its path, from
    just below its tree's root down to its own cohort, then its own (without a tree: its own
    share in its flat cohort alone)."""
    if tree is None or not in_tree(cohorts, quota):
        return (dominant_share(quota, quotas, usage, pool),)
    path = tree_path(cohorts, quota.cohort_key)[:-1]  # its cohort up to below the root
    above = tuple(tree.dominant_share(("cohort", c), pool) for c in reversed(path))
    return (*above, tree.dominant_share(("quota", quota.name), pool))


def fair_order(
    window: Iterable[QueueEntry], share: Mapping[str, Decimal | tuple[Decimal, ...]]
) -> list[QueueEntry]:
    """The window in the order a wake tries it: priority, a blocking entry, the lowest share
    (a share path through a tree: level by level from the root down), then the queue's order.
    An entry without a share (no quota governs it) counts as 0."""

    def path(entry: QueueEntry) -> tuple[Decimal, ...]:
        found = share.get(entry.request_id, ZERO)
        return found if isinstance(found, tuple) else (found,)

    return sorted(window, key=lambda e: (-e.priority, not e.blocks, path(e), e.key))


def after(order: Sequence[QueueEntry], refused: str) -> list[QueueEntry]:
    """What a wake passed on from the entry keyed `refused` tries: the entries after it in the
    fair order; when it is no longer in the window, those the queue holds behind it."""
    keys = [e.key for e in order]
    if refused in keys:
        return list(order[keys.index(refused) + 1 :])
    return [e for e in order if e.key > refused]
