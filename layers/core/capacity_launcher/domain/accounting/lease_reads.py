"""What a lease's write is conditioned on, item by item: the reads its decision was made from
(service/admission.py reads them through the lease port and decides with `fit_quota_lease`),
and the conflict a write raises when one of them moved, naming the item.

A lease is written in one transaction of named items, each conditioned on what was read:

- `POOL_USAGE`: the pool's usage, added to under each limited dimension's headroom (and, when
  `limits.unready` gated it, at the usage version the gate counted at);
- `LEASE`: the lease, put only if absent;
- `LIMITS`: the pool, stored with the limits (and revision) the lease was sized by;
- `NODE_CLASS`: its NodeClass, stored at the revision the request was resolved with;
- `POOLS_GENERATION`: the NodePools' generation the request chose its pool from (it named none);
- `QUOTA_GENERATION`: the pool's quota generation the quotas were read at;
- `QUOTA_USAGE`: the quota usage items the admission read (the one it holds updated, the others
  checked), each at the version read.

A take-up extends an open lease instead of putting one (`OPEN_LEASE`: open and unexpired),
beside the same configuration checks (`LIMITS`, `NODE_CLASS`, `POOLS_GENERATION`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from capacity_launcher.domain.accounting.pool_usage import Readiness
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.quantities import PoolLimits, Resources

# What one quota usage item says: its version (None: never written) and use by
# (requester, NodePool).
QuotaReading = tuple[int | None, Mapping[UsageKey, Resources]]
# A pool's instances for `limits.unready`, and the usage version they were counted at.
UnreadyReading = tuple[Readiness, int | None]


class LeaseItem(StrEnum):
    """The named items of a lease's transaction (see the module's docstring)."""

    POOL_USAGE = "PoolUsage"
    LEASE = "Lease"
    LIMITS = "Limits"
    NODE_CLASS = "NodeClass"
    POOLS_GENERATION = "PoolsGeneration"
    QUOTA_GENERATION = "QuotaGeneration"
    QUOTA_USAGE = "QuotaUsage"
    OPEN_LEASE = "OpenLease"


class LeaseConflict(ConditionFailed):
    """A lease's write (or take-up) was cancelled: `moved` names the items whose condition no
    longer held (empty when the store did not say)."""

    def __init__(self, moved: Iterable[LeaseItem], reasons: Sequence[str] = ()) -> None:
        super().__init__("TransactWriteItems", reasons)
        self.moved = frozenset(moved)

    def __str__(self) -> str:
        names = ", ".join(sorted(self.moved)) or "an item"
        return f"the lease's write was cancelled: {names} moved"


@dataclass(frozen=True)
class ConfigReads:
    """The configuration a lease was sized and a request resolved with: the pool's limits as
    read (the container's copy or the stored ones), and the revisions of the pool, its class and
    the NodePools' listing (None: only the limits are checked)."""

    limits: PoolLimits | None
    seen: Revisions | None = None


@dataclass(frozen=True)
class LeaseReads:
    """Everything a new lease's decision read, as its write conditions on it."""

    config: ConfigReads
    # The pool's quota generation the quotas were read at (None: not from a store: unchecked).
    quota_generation: int | None = None
    # (item key, version read) of each quota usage item the admission read; the first is the one
    # the lease holds (its use is added there), the others are checked. Empty: no quota governs.
    quota_usage: tuple[tuple[str, int | None], ...] = ()
    # `limits.unready` gated the lease: the pool usage's version its count was read at.
    unready_gated: bool = False
    usage_version: int | None = None

    def quota_hold(self, requester: str | None) -> tuple[str, str] | None:
        """(quota usage item, requester) where the lease also counts; None: nowhere."""
        if not self.quota_usage or requester is None:
            return None
        return self.quota_usage[0][0], requester
