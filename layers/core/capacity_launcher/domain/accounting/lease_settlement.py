"""What one try at settling a lease does, from the lease as read and the instances left to count.

A lease is settled into one member per instance launched, exactly once (adapters/pool_leases.py
writes it; service/lease_settlement.py loops). Each try reads the lease and decides:

- settled already (by an earlier try or delivery): nothing to do;
- gone (reclaimed: it expired under the launch and the sync gave its room back) with instances
  left to count: they may count only under a lease taken for them again (LeaseReclaimed);
- otherwise: write the members and the settlement, conditioned on the lease as read. A write
  that fails re-reads the members, so those an earlier chunk or reconciliation counted are not
  counted twice.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import Enum

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.quantities import Resources


class SettleStep(Enum):
    ALREADY_SETTLED = "AlreadySettled"
    RECLAIMED = "Reclaimed"
    WRITE = "Write"


def settle_step(lease: Lease | None, pending: Mapping[str, Resources]) -> SettleStep:
    """The step of a try, for the lease as read (None: reclaimed, or never leased)."""
    if lease is not None and lease.settled:
        return SettleStep.ALREADY_SETTLED
    if lease is None and pending:
        return SettleStep.RECLAIMED
    return SettleStep.WRITE


def left_to_count(
    members: Mapping[str, Resources], counted: Collection[str]
) -> dict[str, Resources]:
    """The instances of `members` that are not yet counted in the pool."""
    return {i: amount for i, amount in members.items() if i not in counted}
