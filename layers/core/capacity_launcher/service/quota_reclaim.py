"""Reclaim: a lender whose nominal quota is lent out asks the borrowers for it back.

The launcher, refusing a request with QuotaExceeded whose ``reclaim`` is set, asks
`ReclaimRequests.request`: it chooses the borrowed instances (``Cohort.reclaim_plan``: lowest
priority first, then newest, never within a member's own nominal quota), records one open
reclaim per lender and NodePool, and publishes `Capacity Reclaim Requested`. The request itself
still fails, its message naming the reclaim; the lender asks again once the quota is back.

The sync runs `ReclaimEnforcement.run` every minute: a reclaim whose instances are all released
is closed; one whose grace period has passed is closed too, after terminating what still runs
when it is ``enforced`` and the quotas of now still allow it: the decision is taken again
(``reclaim_decision.redecide``) on the quotas read then and the cohort's usage read then, so a
policy changed to Never, a borrower now of no lower priority, a lender deleted or an owner that
no longer borrows spares the instances. Every close is announced (Capacity Reclaim Closed: its
outcome, the reason, what was terminated and what was spared, and why). A terminated instance is
released through the same gated path as its termination event (`InstanceEvents.state_changed`):
the instance item's conditional release and the member's conditional delete each happen once,
so the pool's and the quota's usage are released exactly once, whichever comes first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance
from capacity_launcher.domain.accounting.reclaim_decision import (
    ReclaimDecision,
    ReclaimOutcome,
    Spared,
    redecide,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota, format_amount
from capacity_launcher.domain.errors import CapacityLauncherError, QuotaExceeded
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.reclaims import (
    ReclaimClosed,
    ReclaimedInstance,
    ReclaimRequested,
    ResourceAmount,
    SparedInstance,
)
from capacity_launcher.domain.records.status import (
    RECLAIM_CLOSED,
    RECLAIM_REQUESTED,
    Event,
    format_timestamp,
)
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import PoolMembers, QuotaUsage, ReclaimStore
from capacity_launcher.service.ports import FleetLauncher, InstanceItems

# What the instance's own termination event would say; the real event is then a duplicate.
RECLAIMED_STATE = "shutting-down"
# An enforced reclaim found this long after its releaseBy is closed without terminating.
STALE_AFTER = timedelta(minutes=15)
# Why a reclaim the sync does not enforce is closed (Capacity Reclaim Closed's reason).
RELEASED = "its owners released every instance it names"
NOT_ENFORCED = "only asked (not enforced): its grace period passed, nothing terminated"
FOUND_LATE = (
    f"found more than {int(STALE_AFTER.total_seconds()) // 60} minutes after releaseBy: "
    "nothing terminated; the lender asks again"
)

Quotas = Callable[[], Sequence[CapacityQuota]]


def reclaim_id(quota: str, pool: str, request_id: str) -> str:
    """One id per lender, pool and refused request: a retry of the request finds its own."""
    digest = hashlib.sha256(f"{quota}\0{pool}\0{request_id}".encode()).hexdigest()
    return f"reclaim-{digest[:20]}"


class ReclaimRequests:
    """The launcher's side: ask for lent quota back when a request is refused for lack of it."""

    def __init__(
        self,
        quotas: Quotas,
        members: PoolMembers,
        quota_usage: QuotaUsage,
        items: InstanceItems,
        reclaims: ReclaimStore,
        publish: Callable[..., None],
        now: Callable[[], datetime],
    ) -> None:
        self._quotas = quotas
        self._members = members
        self._quota_usage = quota_usage
        self._items = items
        self._reclaims = reclaims
        self._publish = publish
        self._now = now

    def request(self, refused: QuotaExceeded, request_id: str, requester: str | None) -> str:
        """Ask for ``refused.reclaim``; what the refusal's message adds (it starts with '; ')."""
        lender = next((q for q in self._quotas() if q.name == refused.quota), None)
        if lender is None or not refused.reclaim:
            return ""
        pool = refused.flavor
        current = self._reclaims.get(lender.name, pool)
        if current is None:
            reclaim = self._plan(lender, pool, refused, request_id, requester)
            if reclaim is None:
                return (
                    "; nothing can be reclaimed: releasing any borrowed instance would cut into "
                    "its owner's own nominal quota"
                )
            if self._reclaims.open(reclaim):
                current = reclaim
            else:  # another refusal of this lender opened one first
                current = self._reclaims.get(lender.name, pool)
                if current is None:
                    return ""  # and the sync closed it meanwhile: the lender asks again
        if current.request_id != request_id:
            return f"; reclaim {current.reclaim_id} (requested by {current.request_id}) is open"
        # Published after the record that it is open: a retry of this request publishes again.
        self._publish(Event(RECLAIM_REQUESTED, current.to_dict()))
        logger.info(
            "reclaim requested",
            extra={
                "reclaimId": current.reclaim_id,
                "quota": current.quota,
                "nodePool": pool,
                "instances": [i.instance_id for i in current.instances],
                "enforced": current.enforced,
            },
        )
        return _requested(current)

    def _plan(
        self,
        lender: CapacityQuota,
        pool: str,
        refused: QuotaExceeded,
        request_id: str,
        requester: str | None,
    ) -> ReclaimRequested | None:
        quotas = list(self._quotas())
        usage_item = lender.usage_item(pool)
        usage = self._quota_usage.quota_usage(usage_item, pool)
        members = {
            m.instance_id: m
            for m in self._members.members(pool)
            if m.quota_usage == usage_item and m.requester
        }
        self._set_aside_named_by_others(lender, pool, quotas, members, usage)
        cohort = Cohort.of(lender, quotas, usage)
        records = self._items.many(sorted(members))
        launched = {i: _launched_at(members[i], records.get(i)) for i in members}
        candidates = [
            QuotaInstance(i, str(m.requester), pool, m.amount, launched[i].isoformat())
            for i, m in members.items()
        ]
        plan = cohort.reclaim_plan(lender.name, pool, refused.reclaim, candidates)
        if plan is None:
            return None
        now = self._now()
        preemption = lender.spec.preemption
        return ReclaimRequested(
            reclaim_id=reclaim_id(lender.name, pool, request_id),
            quota=lender.name,
            cohort=lender.spec.cohort,
            node_pool=pool,
            request_id=request_id,
            requester=requester,
            amount=[
                ResourceAmount(name=r, total=format_amount(r, a))
                for r, a in sorted(refused.reclaim.items())
            ],
            reclaim_within_cohort=preemption.reclaim_within_cohort.value,
            grace_period=preemption.grace_period,
            enforced=plan.enforced,
            requested_at=now,
            release_by=now + timedelta(seconds=preemption.grace_seconds),
            instances=[
                ReclaimedInstance(
                    instance_id=i.instance_id,
                    requester=i.requester,
                    quota=cohort.owner(i.requester, pool) or "",
                    node_pool=pool,
                    launched_at=launched[i.instance_id],
                    resources=_amounts(cohort.quotas[cohort.owner(i.requester, pool) or ""], i),
                )
                for i in plan.instances
            ],
        )

    def _set_aside_named_by_others(
        self,
        lender: CapacityQuota,
        pool: str,
        quotas: list[CapacityQuota],
        members: dict[str, Member],
        usage: dict[tuple[str, str], Resources],
    ) -> None:
        """Instances other lenders' open reclaims name are as good as released: never named
        twice, and what their owners keep must stay within their nominal quota without them
        (taken out of `members` and `usage`)."""
        others = [(q.name, pool) for q in quotas if q.cohort_key == lender.cohort_key]
        for reclaim in self._reclaims.many(others):
            for named in reclaim.instances:
                member = members.pop(named.instance_id, None)
                if member is not None:
                    where = (str(member.requester), pool)
                    usage[where] = usage.get(where, Resources.ZERO) - member.amount


@dataclass
class ReclaimReport:
    # reclaim id -> what became of it: released (by its owners), expired (asked, not
    # enforced), stale, terminated (by us, after the grace period), withdrawn (the policy of
    # now allows none of it)
    closed: dict[str, str] = field(default_factory=dict)
    terminated: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)


class ReclaimEnforcement:
    """The sync's side: close reclaims that are done, terminate what an enforced one names and
    the quotas of now still allow (``quotas`` reads them fresh, strongly consistent)."""

    def __init__(
        self,
        quotas: Quotas,
        members: PoolMembers,
        quota_usage: QuotaUsage,
        reclaims: ReclaimStore,
        fleet: FleetLauncher,
        release: Callable[[str, str], Any],
        publish: Callable[..., None],
        now: Callable[[], datetime],
    ) -> None:
        self._quotas = quotas
        self._members = members
        self._quota_usage = quota_usage
        self._reclaims = reclaims
        self._fleet = fleet
        self._release = release
        self._publish = publish
        self._now = now

    def run(self, quotas: Sequence[CapacityQuota]) -> ReclaimReport:
        report = ReclaimReport()
        # Every open reclaim: also those of lenders deleted or no longer naming the pool.
        keys = [(q.name, f.name) for q in quotas for f in q.flavors()]
        now = self._now()
        counted: dict[str, dict[str, Member]] = {}
        for reclaim in self._reclaims.every_open(keys):
            pool = reclaim.node_pool
            if pool not in counted:
                counted[pool] = {m.instance_id: m for m in self._members.members(pool)}
            self._settle(reclaim, now, counted[pool], report)
        return report

    def _settle(
        self,
        reclaim: ReclaimRequested,
        now: datetime,
        members: dict[str, Member],
        report: ReclaimReport,
    ) -> None:
        left = [i for i in reclaim.instances if i.instance_id in members]
        if not left:
            self._close(reclaim, _unenforced(ReclaimOutcome.RELEASED, RELEASED, left), report)
        elif now < reclaim.release_by:
            report.pending.append(reclaim.reclaim_id)
        elif not reclaim.enforced:
            self._close(reclaim, _unenforced(ReclaimOutcome.EXPIRED, NOT_ENFORCED, left), report)
        elif now > reclaim.release_by + STALE_AFTER:
            # Not enforced in time (the sync was failing): the lender's need is old news.
            self._close(reclaim, _unenforced(ReclaimOutcome.STALE, FOUND_LATE, left), report)
        else:
            self._enforce(reclaim, left, members, report)

    def _enforce(
        self,
        reclaim: ReclaimRequested,
        left: Sequence[ReclaimedInstance],
        members: dict[str, Member],
        report: ReclaimReport,
    ) -> None:
        """Terminate what the quotas and usage of now still allow; close it saying what."""
        decision = self._decide(reclaim, left, members)
        due = decision.terminate
        if due and not self._terminate(reclaim, due):
            report.pending.append(reclaim.reclaim_id)
            return
        for instance_id in due:
            members.pop(instance_id, None)
        report.terminated += due
        self._close(reclaim, decision, report)

    def _decide(
        self,
        reclaim: ReclaimRequested,
        left: Sequence[ReclaimedInstance],
        members: Mapping[str, Member],
    ) -> ReclaimDecision:
        """Decided again (`redecide`) on the quotas read now and the lender's cohort's quota
        usage read now: an owner that released other instances meanwhile keeps what is within
        its nominal quota, and a policy changed during the grace period governs."""
        pool = reclaim.node_pool
        quotas = list(self._quotas())
        lender = next((q for q in quotas if q.name == reclaim.quota), None)
        usage = {}
        if lender is not None and lender.flavor(pool) is not None:
            usage = self._quota_usage.quota_usage(lender.usage_item(pool), pool)
        named = [
            QuotaInstance(
                i.instance_id,
                i.requester,
                pool,
                members[i.instance_id].amount,
                i.launched_at.isoformat(),
            )
            for i in left
        ]
        resources = [a.name for a in reclaim.amount]
        return redecide(reclaim.quota, pool, resources, named, quotas, usage)

    def _terminate(self, reclaim: ReclaimRequested, instance_ids: list[str]) -> bool:
        """Terminate (managed instances only: the role's condition) and release each once."""
        try:
            self._fleet.terminate(instance_ids)
        except CapacityLauncherError as error:
            logger.warning(
                "reclaimed instances not terminated; the next sync tries again",
                extra={"reclaimId": reclaim.reclaim_id, "instances": instance_ids, "error": error},
            )
            return False
        for instance_id in instance_ids:
            # The termination event's own path: the instance item's release is the gate.
            self._release(instance_id, RECLAIMED_STATE)
            # An instance no item records is not ours to the events path: its member still goes.
            self._members.uncount_instance(reclaim.node_pool, instance_id)
        logger.info(
            "reclaimed instances terminated",
            extra={"reclaimId": reclaim.reclaim_id, "instances": instance_ids},
        )
        return True

    def _close(self, reclaim: ReclaimRequested, decision: Closing, report: ReclaimReport) -> None:
        """Say how it ends (Capacity Reclaim Closed), then close it. Published first: a failed
        put leaves it open, so the next sync decides and says so again (at least once)."""
        closed = ReclaimClosed(
            reclaim_id=reclaim.reclaim_id,
            quota=reclaim.quota,
            cohort=reclaim.cohort,
            node_pool=reclaim.node_pool,
            request_id=reclaim.request_id,
            outcome=decision.outcome.value,
            reason=decision.reason,
            closed_at=self._now(),
            terminated=decision.terminate,
            spared=[
                SparedInstance(instance_id=s.instance_id, reason=s.reason) for s in decision.spared
            ],
        )
        self._publish(Event(RECLAIM_CLOSED, closed.to_dict()))
        if self._reclaims.close(reclaim):
            report.closed[reclaim.reclaim_id] = decision.outcome.value
            logger.info(
                "reclaim closed",
                extra={
                    "reclaimId": reclaim.reclaim_id,
                    "outcome": closed.outcome,
                    "reason": closed.reason,
                    "terminated": closed.terminated,
                    "spared": [s.instance_id for s in decision.spared],
                },
            )


@dataclass(frozen=True)
class _Unenforced:
    """How a reclaim the sync does not enforce ends: nothing terminated."""

    outcome: ReclaimOutcome
    reason: str
    spared: list[Spared]
    terminate: list[str] = field(default_factory=list)


Closing = ReclaimDecision | _Unenforced


def _unenforced(
    outcome: ReclaimOutcome, reason: str, left: Sequence[ReclaimedInstance]
) -> _Unenforced:
    return _Unenforced(outcome, reason, [Spared(i.instance_id, reason) for i in left])


def _launched_at(member: Member, record: InstanceRecord | None) -> datetime:
    """When the instance was launched (its record), else when its pool counted it."""
    if record is not None and record.launched_at:
        try:
            moment = datetime.fromisoformat(record.launched_at.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return datetime.fromtimestamp(member.counted_at, UTC)


def _amounts(quota: CapacityQuota, instance: QuotaInstance) -> list[ResourceAmount]:
    """What the instance counts in the resources its owner's quota covers there."""
    flavor = quota.flavor(instance.flavor)
    names = [t.name for t in flavor.resources] if flavor else []
    resources: Resources = instance.resources
    return [ResourceAmount(name=n, total=format_amount(n, resources.amount(n))) for n in names]


def _requested(reclaim: ReclaimRequested) -> str:
    ids = ", ".join(i.instance_id for i in reclaim.instances)
    by = format_timestamp(reclaim.release_by)
    then = "terminated then" if reclaim.enforced else "not terminated: reclaimWithinCohort "
    if not reclaim.enforced:
        then += f"{reclaim.reclaim_within_cohort} does not allow it"
    return f"; reclaim {reclaim.reclaim_id} requested: {ids} to be released by {by} ({then})"
