"""Taking a lease as the launcher does (service/admission.py's loop over a lease port), with the
request's numbers written out: the tests that lease on the table or a fake directly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.service.accounting_ports import PoolLeases
from capacity_launcher.service.admission import take_lease


def take(
    leases: PoolLeases,
    pool: str,
    lease_id: str,
    per_instance: Resources,
    count: int,
    least: int,
    limits: PoolLimits | None,
    requester: str | None = None,
    *,
    unleased: bool = False,
    sizes: Mapping[str, Resources] | None = None,
    seen: Revisions | None = None,
) -> Lease | None:
    """The lease taken for up to `count` instances of `per_instance`, at least `least`."""
    ask = LeaseAsk(pool, requester, per_instance, count, least, dict(sizes or {}))
    return take_lease(leases, ask, lease_id, limits, seen, unleased=unleased)


def reserve_room(leases: PoolLeases, *args: Any, **kwargs: Any) -> int:
    """How many instances `take` (the same arguments) leases room for (0: not even `least` fits
    now)."""
    lease = take(leases, *args, **kwargs)
    return 0 if lease is None else lease.count
