"""The reclaim records of CapacityQuota's borrowing: a Capacity Reclaim Requested event's detail
(what a lender takes back, from whom) and Capacity Reclaim Closed's (what was spared and why).
Their validators are built on first use, so a cold start without quotas does not pay for them."""

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, field_serializer

from capacity_launcher.domain.records.status import _Record, format_timestamp

_BUILT_ON_FIRST_USE = ConfigDict(defer_build=True)


class ResourceAmount(_Record):
    """An amount of one resource, spelled as documents spell it ('8', '1500m', '1536Gi')."""

    model_config = _BUILT_ON_FIRST_USE

    name: str
    total: str


class ReclaimedInstance(_Record):
    """A borrowed instance a reclaim asks its owner to release."""

    model_config = _BUILT_ON_FIRST_USE

    instance_id: str
    requester: str
    quota: str
    node_pool: str
    launched_at: datetime
    resources: list[ResourceAmount]
    # A waiting request's preemption (issue 37): the policy that lets it be taken, and its
    # request's priority at launch, which the sync checks again before it terminates.
    preemption: Literal["withinClusterQueue", "borrowWithinCohort"] | None = None
    priority: int | None = None

    @field_serializer("launched_at")
    def _timestamp(self, moment: datetime) -> str:
        return format_timestamp(moment)


class _Reclaim(_Record):
    """Which reclaim: its id, its lender quota and cohort, its NodePool, the refused request."""

    model_config = _BUILT_ON_FIRST_USE

    reclaim_id: str
    quota: str
    cohort: str | None
    node_pool: str
    request_id: str


class ReclaimRequested(_Reclaim):
    """The detail of a Capacity Reclaim Requested event (docs/quotas.md, Reclaim).

    The borrowers are asked to release ``instances`` by ``releaseBy`` (the lender's grace
    period after ``requestedAt``). ``enforced``: the lender's ``reclaimWithinCohort`` lets the
    sync terminate those still running then; otherwise nothing is terminated.
    """

    model_config = _BUILT_ON_FIRST_USE

    requester: str | None = None
    amount: list[ResourceAmount]
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"]
    grace_period: str
    enforced: bool
    requested_at: datetime
    release_by: datetime
    instances: list[ReclaimedInstance]
    # Set when the reclaim is a waiting request's preemption (issue 37): its priority and when it
    # arrived (equal-priority instances launched after it are newer); ``amount`` is then what it
    # asks, which the preemption makes fit.
    priority: int | None = None
    arrived_at: datetime | None = None

    @field_serializer("requested_at", "release_by")
    def _timestamp(self, moment: datetime) -> str:
        return format_timestamp(moment)

    @field_serializer("arrived_at")
    def _arrival(self, moment: datetime | None) -> str | None:
        return None if moment is None else format_timestamp(moment)

    @property
    def preempts(self) -> bool:
        """A waiting request's preemption, not a lender's reclaim of its lent quota."""
        return self.priority is not None


class SparedInstance(_Record):
    """An instance a reclaim names that it did not terminate, and why."""

    model_config = _BUILT_ON_FIRST_USE

    instance_id: str
    reason: str


class ReclaimClosed(_Reclaim):
    """The detail of a Capacity Reclaim Closed event: how the sync closed an open reclaim
    (docs/quotas.md, Reclaim). ``outcome``: ``released`` (its owners released what it names,
    or no longer borrow it), ``expired`` (only asked, its grace period passed), ``stale`` (found
    too long after ``releaseBy``), ``terminated`` (what the current policy still allows), or
    ``withdrawn`` (the current policy allows none of it: nothing terminated). ``reason`` says
    why; ``spared`` names each instance not terminated with its own reason."""

    model_config = _BUILT_ON_FIRST_USE

    outcome: Literal["released", "expired", "stale", "terminated", "withdrawn"]
    reason: str
    closed_at: datetime
    terminated: list[str]
    spared: list[SparedInstance]

    @field_serializer("closed_at")
    def _timestamp(self, moment: datetime) -> str:
        return format_timestamp(moment)
