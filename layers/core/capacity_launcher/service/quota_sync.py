"""The quotas' share of the sync, every minute, after reconciliation has fixed pool membership:

1. reclaims: close those done; once an enforced one's grace period passed, terminate what it
   names that the quotas and usage of now still allow (decided again), and say how each ended;
2. recount each cohort-and-flavor quota usage item from the pool's unsettled leases and members
   (the way pool usage is recomputed), so instances adopted or started again count right;
3. compute every quota's status from those items and store it for `capacity-launcher get quotas`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_status import quota_status
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import format_timestamp
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import QuotaStatusStore, QuotaUsage
from capacity_launcher.service.quota_metrics import emit_quota_usage
from capacity_launcher.service.reclaim_enforcement import ReclaimEnforcement, ReclaimReport
from capacity_launcher.service.sync_parts import contained
from capacity_launcher.service.usage_recount import recount_quotas


@dataclass
class QuotaSyncReport:
    reclaims: ReclaimReport = field(default_factory=ReclaimReport)
    # quota usage items rewritten because they did not match their leases and members
    recounted: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    # Its parts that failed (service/sync_parts.py): reclaims, usage (recount and statuses).
    failed: list[str] = field(default_factory=list)


class QuotaSync:
    def __init__(
        self,
        quotas: Callable[[], Sequence[CapacityQuota]],
        pools: Callable[[], Sequence[str]],
        quota_usage: QuotaUsage,
        statuses: QuotaStatusStore,
        enforcement: ReclaimEnforcement,
        now: Callable[[], datetime],
    ) -> None:
        self._quotas = quotas
        self._pools = pools
        self._quota_usage = quota_usage
        self._statuses = statuses
        self._enforcement = enforcement
        self._now = now

    def run(self) -> QuotaSyncReport:
        """Reclaims, then usage and statuses, each contained: a reclaim EC2 refuses does not
        leave every quota's status a minute older."""
        report = QuotaSyncReport()
        quotas = list(self._quotas())
        # Also with no quota left: a deleted lender's open reclaim is closed, never enforced.
        report.reclaims = contained(
            report.failed,
            "quota-reclaims",
            lambda: self._enforcement.run(quotas),
            ReclaimReport(),
        )
        contained(report.failed, "quota-usage", lambda: self._usage(report, quotas), None)
        return report

    def _usage(self, report: QuotaSyncReport, quotas: Sequence[CapacityQuota]) -> None:
        """Recount each quota usage item, then store every quota's status."""
        stale = set(self._statuses.read()) - {q.name for q in quotas}
        self._statuses.forget(stale)
        if not quotas:
            return
        usage: dict[UsageKey, Resources] = {}
        items: dict[str, set[str]] = {}
        for quota in quotas:
            for flavor in quota.flavors():
                items.setdefault(flavor.name, set()).add(quota.usage_item(flavor.name))
        # One read of a pool's leases and members recounts every quota usage item of the pool.
        recounts = {
            (pk, pool): recount
            for pool, pks in sorted(items.items())
            for pk, recount in recount_quotas(self._quota_usage, pool, sorted(pks)).items()
        }
        for (pk, pool), recount in sorted(recounts.items()):
            found = (
                self._quota_usage.quota_usage(pk, pool) if recount is None else recount.recounted
            )
            if recount is not None and recount.repaired:
                report.recounted.append(pk)
                logger.warning(
                    "quota usage repaired",
                    extra={
                        "quotaUsage": pk,
                        "stored": {f"{r}/{p}": str(a) for (r, p), a in recount.stored.items()},
                        "recounted": {
                            f"{r}/{p}": str(a) for (r, p), a in recount.recounted.items()
                        },
                    },
                )
            for where, amount in found.items():
                usage[where] = usage.get(where, Resources.ZERO) + amount
        pools = set(self._pools())
        statuses = {q.name: quota_status(q, quotas, usage, pools) for q in quotas}
        self._statuses.save(statuses, format_timestamp(self._now()))
        emit_quota_usage(statuses)
        report.statuses = sorted(statuses)
