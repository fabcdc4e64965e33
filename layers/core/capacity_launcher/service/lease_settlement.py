"""Settling a lease: the loop around `lease_settlement.settle_step`, through the leases port.

A try reads the lease (the one this container took first, then strongly consistent), asks the
domain what to do, and has the store write the members and the settlement conditioned on that
read. A write that fails (a reclaim, a redelivery or reconciliation got there first) re-reads
the pool's members and tries again with those left to count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from capacity_launcher.domain.accounting.lease_settlement import (
    SettleStep,
    left_to_count,
    settle_step,
)
from capacity_launcher.domain.errors import LeaseReclaimed
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion
from capacity_launcher.service.accounting_ports import SettlingLeases

SETTLE_TRIES = 3


class LeaseNotSettled(RuntimeError):
    """The lease kept moving under its settle: the delivery goes back and its replay settles."""

    def __init__(self, pool: str, lease_id: str) -> None:
        super().__init__(f"lease {lease_id} in pool {pool} could not be settled; retry")


def settle(
    leases: SettlingLeases,
    pool: str,
    lease_id: str,
    members: Mapping[str, Resources],
    records: Mapping[str, InstanceRecord] | None = None,
    completions: Sequence[IntentCompletion] = (),
) -> tuple[frozenset[str], bool]:
    """Turn the lease into one member per instance launched (id -> amount), exactly once;
    `records` (id -> its instance's record) are written with the members they go with, and
    the intents' `completions` with the settlement. Returns the ids whose records this settle
    wrote (the caller writes the others: those counted already, a lease settled already), and
    whether it wrote the completions (not when the lease was settled already: the caller
    writes them).

    LeaseReclaimed when the lease is neither open nor settled and instances not yet counted are
    left: they count only under a lease taken for them again, through the same admission
    (service/admission.py), which the caller then settles (issue 34). A reclaimed lease with
    nothing left to count settles to its marker alone."""
    pending = dict(members)
    lease = leases.taken(pool, lease_id)
    for _ in range(SETTLE_TRIES):
        lease = lease or leases.lease(pool, lease_id)
        step = settle_step(lease, pending)
        if step is SettleStep.ALREADY_SETTLED:
            return frozenset(), False
        if step is SettleStep.RECLAIMED:
            raise LeaseReclaimed(pool, lease_id)
        if leases.write_settlement(
            pool, lease_id, lease, pending, len(members), records, completions
        ):
            return frozenset(i for i in pending if records and i in records), True
        lease = None  # a try that failed reads it again
        pending = left_to_count(members, leases.counted(pool))
    raise LeaseNotSettled(pool, lease_id)
