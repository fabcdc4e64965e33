"""Whether a lender's ``reclaimWithinCohort`` lets it take its nominal quota back from a borrower.

One judgement, read where a reclaim is chosen (`quota_admission`, `cohort_tree`) and where it is
decided again at enforcement (`reclaim_decision`). Pure: no I/O (docs/quotas.md, Reclaim).
"""

from __future__ import annotations

from capacity_launcher.domain.apis.quota_preemption import ReclaimPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota


def reclaim_refusal(
    lender: CapacityQuota, borrower: CapacityQuota, policy: ReclaimPolicy | None = None
) -> str | None:
    """Why ``policy`` (by default ``lender``'s reclaimWithinCohort) does not let ``lender``
    reclaim from ``borrower``; None when it does."""
    policy = policy or lender.spec.preemption.reclaim_within_cohort
    if policy is ReclaimPolicy.NEVER:
        return f"CapacityQuota {lender.name}'s reclaimWithinCohort is Never now"
    mine, theirs = lender.spec.priority, borrower.spec.priority
    if policy is ReclaimPolicy.LOWER_PRIORITY and theirs >= mine:
        return (
            f"CapacityQuota {borrower.name}'s priority {theirs} is not lower than "
            f"{lender.name}'s {mine} (reclaimWithinCohort LowerPriority)"
        )
    return None
