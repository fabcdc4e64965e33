"""What a preemption reads, asked (`quota_reclaim.ReclaimRequests.preempt`) and decided again at
enforcement (`reclaim_enforcement`): the cohort's quota usage in every pool the request's admission
reads, the pool's stored limits, usage and readiness, when each instance was launched, and whether
a quota's policies let its waiting requests preempt at all (docs/queueing.md, Preemption).
"""

from __future__ import annotations

from datetime import UTC, datetime

from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.preemption import UNLIMITED, PoolRoom
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_leases import usage_items
from capacity_launcher.domain.apis.quota_preemption import BorrowPolicy, WithinQuotaPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.service.accounting_ports import PoolRoomReads, QuotaUsage


def read_usage(
    quota_usage: QuotaUsage, quota: CapacityQuota, pool: str
) -> dict[UsageKey, Resources]:
    """The cohort's quota usage in every pool ``quota``'s admission in ``pool`` reads
    (`quota_leases.usage_items`: the pool's item, then its group's other pools' when the group
    has ``limits``), by requester and pool."""
    usage: dict[UsageKey, Resources] = {}
    for item, name in usage_items(quota, pool):
        usage.update(quota_usage.quota_usage(item, name))
    return usage


def read_room(pools: PoolRoomReads | None, pool: str) -> PoolRoom:
    """The pool's stored limits, its usage and (when ``limits.unready`` is set) its count, as
    its lease's admission reads them; no limits when ``pools`` is None or the pool sets none."""
    limits = None if pools is None else pools.stored_limits(pool)
    if pools is None or limits is None:
        return UNLIMITED
    reading = pools.readiness(pool) if limits.unready is not None else None
    return PoolRoom(limits, pools.usage(pool), None if reading is None else reading[0])


def launched_at(member: Member, record: InstanceRecord | None) -> datetime:
    """When the instance was launched (its record), else when its pool counted it."""
    if record is not None and record.launched_at:
        try:
            moment = datetime.fromisoformat(record.launched_at.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return datetime.fromtimestamp(member.counted_at, UTC)


def preempts(quota: CapacityQuota) -> bool:
    """Whether a policy lets the quota's waiting requests preempt at all (default: no)."""
    rules = quota.spec.preemption
    return (
        rules.within_cluster_queue is not WithinQuotaPolicy.NEVER
        or rules.borrow_within_cohort.policy is not BorrowPolicy.NEVER
    )
