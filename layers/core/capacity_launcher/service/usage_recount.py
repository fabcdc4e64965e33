"""Recounts: a pool's usage item, and the quota usage items its instances hold, set to what the
pool's unsettled leases and members say, if no writer moved them meanwhile.

Every usage change bumps the item's `version`. A recount reads the item and the pool's live
range (leases and members). When they agree there is nothing to write, and nothing more is read
(issue 38: the quiet minute's case, one read of the item, not two). When they differ, it reads
the item's version again: a writer in between makes it read again (at most RECOUNT_TRIES times;
None then, and the next sync repairs). The write is conditioned on the version it read, so a
concurrent transaction is never overwritten. The arithmetic is the domain's (`usage_of`,
`quota_use`); the stores only read and write.
"""

from __future__ import annotations

from collections.abc import Sequence

from capacity_launcher.domain.accounting.pool_usage import (
    Member,
    QuotaRecount,
    Recount,
    quota_use,
    same_use,
    usage_of,
)
from capacity_launcher.service.accounting_ports import PoolUsage, QuotaUsage

RECOUNT_TRIES = 3


def recount_pool(store: PoolUsage, pool: str) -> Recount | None:
    """The pool's usage set to its unsettled leases plus its members; the members it read
    come back with it (as of that read, they are the pool's). None: contended."""
    for _ in range(RECOUNT_TRIES):
        stored, version = store.usage_version(pool)
        counted = store.counted(pool)
        members = tuple(c for c in counted if isinstance(c, Member))
        recomputed = usage_of(counted)
        if recomputed == stored:
            # Nothing to write. A writer in between changed both or neither (its transaction
            # moves usage with its lease or members), and each transition the members are
            # checked for is conditioned on what it changes.
            return Recount(stored, recomputed, repaired=False, members=members)
        if store.usage_version(pool)[1] != version:
            continue  # a writer moved it while the live range was read
        if store.replace_usage(pool, recomputed, version):
            return Recount(stored, recomputed, repaired=True, members=members)
    return None


def recount_quotas(
    store: QuotaUsage, pool: str, pks: Sequence[str]
) -> dict[str, QuotaRecount | None]:
    """Each quota usage item of `pks` set to the unsettled leases plus the members of `pool`
    that hold it, per requester; one read of the pool's live range serves every item of a try
    (None: contended)."""
    found: dict[str, QuotaRecount | None] = dict.fromkeys(pks)
    pending = list(pks)
    for _ in range(RECOUNT_TRIES):
        if not pending:
            break
        before = {pk: store.quota_reading(pk, pool) for pk in pending}
        counted = store.counted(pool)
        again = []
        for pk in pending:
            version, stored = before[pk]
            recount: QuotaRecount | None = None
            recounted = quota_use(counted, pk, pool)
            if same_use(stored, recounted):
                recount = QuotaRecount(pk, stored, recounted, repaired=False)  # nothing to write
            elif store.quota_reading(pk, pool)[0] == version and store.replace_quota_usage(
                pk, recounted, version
            ):
                recount = QuotaRecount(pk, stored, recounted, repaired=True)
            if recount is None:
                again.append(pk)
            found[pk] = recount
        pending = again
    return found
