"""A CapacityQuota's preemption rules (``spec.preemption``): whom its quota may take lent quota
back from (reclaimWithinCohort), which instances its waiting requests may preempt
(withinClusterQueue, borrowWithinCohort) and the grace period before either terminates anything.

The names and values follow Kueue's ClusterQueue preemption (docs/quotas.md); the decisions on
them are domain/accounting/preemption.py's and reclaim_decision.py's.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, StrictInt, field_validator

from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, _Document

# Kubernetes PriorityClass values: int32 up to a billion (an OME reservation's priority is one).
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 1_000_000_000
MAX_GRACE_SECONDS = 24 * 3600
DEFAULT_GRACE_PERIOD = "10m"
DURATION_PATTERN = re.compile(r"^(?:(\d{1,5})h)?(?:(\d{1,5})m)?(?:(\d{1,6})s)?$")
DURATION_RULE = "must be a duration such as '30s', '10m' or '1h30m', at most 24h"


class ReclaimPolicy(StrEnum):
    """Which borrowers a quota may take lent quota back from (Kueue's reclaimWithinCohort)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class WithinQuotaPolicy(StrEnum):
    """Which of its own quota's instances a waiting request may preempt (Kueue's
    withinClusterQueue): lower priority, or also equal priority launched after it arrived."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class BorrowPolicy(StrEnum):
    """Whether a waiting request that must borrow may preempt other members' borrowing instances
    of lower priority (Kueue's borrowWithinCohort.policy)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


def parse_duration_seconds(value: str) -> int:
    match = DURATION_PATTERN.match(value) if isinstance(value, str) and value else None
    if match is None or not any(match.groups()):
        raise ValueError(DURATION_RULE)
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total > MAX_GRACE_SECONDS:
        raise ValueError(DURATION_RULE)
    return total


class BorrowWithinCohort(_Document):
    """Kueue's borrowWithinCohort: ``maxPriorityThreshold`` bounds the victims' priority (only
    instances of that priority or lower may be preempted by a borrower; absent: any lower)."""

    model_config = BUILT_ON_FIRST_USE

    policy: BorrowPolicy = BorrowPolicy.NEVER
    max_priority_threshold: StrictInt | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)


class Preemption(_Document):
    model_config = BUILT_ON_FIRST_USE

    reclaim_within_cohort: ReclaimPolicy = ReclaimPolicy.NEVER
    # Issue 37: a waiting request preempting its own quota's instances, or, when it must borrow,
    # other members' borrowing ones (domain/accounting/preemption.py). Default: never.
    within_cluster_queue: WithinQuotaPolicy = WithinQuotaPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort = Field(default_factory=BorrowWithinCohort)
    grace_period: str = DEFAULT_GRACE_PERIOD

    @field_validator("grace_period")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration_seconds(value)
        return value

    @property
    def grace_seconds(self) -> int:
        return parse_duration_seconds(self.grace_period)
