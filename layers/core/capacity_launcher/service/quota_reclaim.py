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
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.accounting import preemption
from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.preemption import Preemptor, Running
from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance
from capacity_launcher.domain.accounting.reclaim_decision import (
    ReclaimDecision,
    ReclaimOutcome,
    Spared,
    redecide,
    redecide_preemption,
)
from capacity_launcher.domain.apis.quotas import (
    BorrowPolicy,
    CapacityQuota,
    WithinQuotaPolicy,
    format_amount,
    parse_amount,
)
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
        return self._announce(current, request_id)

    def _announce(self, current: ReclaimRequested, request_id: str) -> str:
        """Publish the open reclaim if it is this request's; what its message adds."""
        if current.request_id != request_id:
            return _named(current)
        # Published after the record that it is open: a retry of this request publishes again.
        self._publish(Event(RECLAIM_REQUESTED, current.to_dict()))
        logger.info(
            "reclaim requested",
            extra={
                "reclaimId": current.reclaim_id,
                "quota": current.quota,
                "nodePool": current.node_pool,
                "instances": [i.instance_id for i in current.instances],
                "enforced": current.enforced,
                "preempts": current.preempts,
            },
        )
        return _requested(current)

    def preempt(
        self,
        refused: QuotaExceeded,
        request_id: str,
        requester: str | None,
        priority: int,
        arrived_at: datetime,
    ) -> str:
        """A waiting request refused by its quota's bounds or its cohort's idle quota (not for
        its own quota lent out: that is `request`): ask for the instances its quota's
        withinClusterQueue and borrowWithinCohort let it preempt so that it fits
        (``preemption.plan``), through the same open reclaim, event and sync. '' when its
        policies are Never, or nothing they allow makes it fit (docs/quotas.md)."""
        quota = next((q for q in self._quotas() if q.name == refused.quota), None)
        if quota is None or refused.reclaim or refused.demand is None or not _preempts(quota):
            return ""
        pool = refused.flavor
        current = self._reclaims.get(quota.name, pool)
        if current is None:
            ask = Preemptor(quota.name, pool, refused.demand, priority, arrived_at.isoformat())
            reclaim = self._preemption(quota, ask, request_id, requester, arrived_at)
            if reclaim is None:
                return ""
            if not self._reclaims.open(reclaim):
                return self._open_now(quota.name, pool)
            current = reclaim
        return self._announce(current, request_id)

    def _open_now(self, quota: str, pool: str) -> str:
        current = self._reclaims.get(quota, pool)
        return "" if current is None else _named(current)

    def _preemption(
        self,
        quota: CapacityQuota,
        ask: Preemptor,
        request_id: str,
        requester: str | None,
        arrived_at: datetime,
    ) -> ReclaimRequested | None:
        pool = ask.flavor
        quotas, usage, members, records = self._candidates(quota, pool)
        launched = {i: _launched_at(members[i], records.get(i)) for i in members}
        running = [
            Running(
                QuotaInstance(i, str(m.requester), pool, m.amount, launched[i].isoformat()),
                records[i].priority if i in records else None,
            )
            for i, m in members.items()
        ]
        victims = preemption.plan(ask, quotas, usage, running)
        if not victims:
            return None
        cohort = Cohort.of(quota, quotas, usage)
        covered = [r for r in _covered(quota, pool) if ask.demand.amount(r) > 0]
        return self._reclaim(
            quota,
            pool,
            request_id,
            requester,
            {r: ask.demand.amount(r) for r in covered},
            enforced=True,
            instances=[
                ReclaimedInstance(
                    instance_id=v.instance.instance_id,
                    requester=v.instance.requester,
                    quota=v.owner,
                    node_pool=pool,
                    launched_at=launched[v.instance.instance_id],
                    resources=_amounts(cohort.quotas[v.owner], v.instance),
                    preemption=v.scope.value,
                    priority=v.priority,
                )
                for v in victims
            ],
            priority=ask.priority,
            arrived_at=arrived_at,
        )

    def _candidates(
        self, quota: CapacityQuota, pool: str
    ) -> tuple[
        list[CapacityQuota],
        dict[tuple[str, str], Resources],
        dict[str, Member],
        dict[str, InstanceRecord],
    ]:
        """The quotas, the cohort's usage in ``pool``, its counted instances and their records,
        less what other open reclaims of the cohort name already."""
        quotas = list(self._quotas())
        usage_item = quota.usage_item(pool)
        usage = self._quota_usage.quota_usage(usage_item, pool)
        members = {
            m.instance_id: m
            for m in self._members.members(pool)
            if m.quota_usage == usage_item and m.requester
        }
        self._set_aside_named_by_others(quota, pool, quotas, members, usage)
        return quotas, usage, members, self._items.many(sorted(members))

    def _plan(
        self,
        lender: CapacityQuota,
        pool: str,
        refused: QuotaExceeded,
        request_id: str,
        requester: str | None,
    ) -> ReclaimRequested | None:
        quotas, usage, members, records = self._candidates(lender, pool)
        cohort = Cohort.of(lender, quotas, usage)
        launched = {i: _launched_at(members[i], records.get(i)) for i in members}
        candidates = [
            QuotaInstance(i, str(m.requester), pool, m.amount, launched[i].isoformat())
            for i, m in members.items()
        ]
        plan = cohort.reclaim_plan(lender.name, pool, refused.reclaim, candidates)
        if plan is None:
            return None
        return self._reclaim(
            lender,
            pool,
            request_id,
            requester,
            dict(sorted(refused.reclaim.items())),
            enforced=plan.enforced,
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

    def _reclaim(
        self,
        quota: CapacityQuota,
        pool: str,
        request_id: str,
        requester: str | None,
        amount: Mapping[str, Decimal],
        **rest: Any,
    ) -> ReclaimRequested:
        """The open reclaim ``quota`` asks for in ``pool`` for the request, from now for its grace
        period (``rest``: enforced, the instances, and a preemption's priority and arrival)."""
        now = self._now()
        rules = quota.spec.preemption
        return ReclaimRequested(
            reclaim_id=reclaim_id(quota.name, pool, request_id),
            quota=quota.name,
            cohort=quota.spec.cohort,
            node_pool=pool,
            request_id=request_id,
            requester=requester,
            amount=[ResourceAmount(name=r, total=format_amount(r, a)) for r, a in amount.items()],
            reclaim_within_cohort=rules.reclaim_within_cohort.value,
            grace_period=rules.grace_period,
            requested_at=now,
            release_by=now + timedelta(seconds=rules.grace_seconds),
            **rest,
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
        waiting: Callable[[str], bool] = lambda _request_id: True,
    ) -> None:
        self._quotas = quotas
        self._members = members
        self._quota_usage = quota_usage
        self._reclaims = reclaims
        self._fleet = fleet
        self._release = release
        self._publish = publish
        self._now = now
        # Whether a preempting request still waits (its record): one admitted, ended or gone
        # meanwhile preempts nothing (read only for a preemption due).
        self._waiting = waiting

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
        if reclaim.preempts and not self._waiting(reclaim.request_id):
            why = f"request {reclaim.request_id} no longer waits: nothing is preempted in vain"
            return ReclaimDecision([], [Spared(i.instance_id, why) for i in left], refused=True)
        quotas = list(self._quotas())
        lender = next((q for q in quotas if q.name == reclaim.quota), None)
        usage = {}
        if lender is not None and lender.flavor(pool) is not None:
            usage = self._quota_usage.quota_usage(lender.usage_item(pool), pool)
        if reclaim.preempts:
            return redecide_preemption(_preemptor(reclaim), _running(left, members), quotas, usage)
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


def _preemptor(reclaim: ReclaimRequested) -> Preemptor:
    """The waiting request a preemption was asked for, as the reclaim recorded it."""
    demand = {a.name: parse_amount(a.name, a.total) for a in reclaim.amount}
    arrived = reclaim.arrived_at or reclaim.requested_at
    return Preemptor(
        reclaim.quota,
        reclaim.node_pool,
        Resources.from_amounts(demand),
        reclaim.priority or 0,
        arrived.isoformat(),
    )


def _running(left: Sequence[ReclaimedInstance], members: Mapping[str, Member]) -> list[Running]:
    return [
        Running(
            QuotaInstance(
                i.instance_id,
                i.requester,
                i.node_pool,
                members[i.instance_id].amount,
                i.launched_at.isoformat(),
            ),
            i.priority,
        )
        for i in left
    ]


def _named(reclaim: ReclaimRequested) -> str:
    return f"; reclaim {reclaim.reclaim_id} (requested by {reclaim.request_id}) is open"


def _preempts(quota: CapacityQuota) -> bool:
    """Whether a policy lets the quota's waiting requests preempt at all (default: no)."""
    rules = quota.spec.preemption
    return (
        rules.within_cluster_queue is not WithinQuotaPolicy.NEVER
        or rules.borrow_within_cohort.policy is not BorrowPolicy.NEVER
    )


def _covered(quota: CapacityQuota, pool: str) -> list[str]:
    flavor = quota.flavor(pool)
    return [t.name for t in flavor.resources] if flavor else []


def _requested(reclaim: ReclaimRequested) -> str:
    ids = ", ".join(i.instance_id for i in reclaim.instances)
    by = format_timestamp(reclaim.release_by)
    if reclaim.preempts:
        return (
            f"; preemption {reclaim.reclaim_id} requested: {ids} to be released by {by} "
            "(terminated then, if the policies still allow it)"
        )
    then = "terminated then" if reclaim.enforced else "not terminated: reclaimWithinCohort "
    if not reclaim.enforced:
        then += f"{reclaim.reclaim_within_cohort} does not allow it"
    return f"; reclaim {reclaim.reclaim_id} requested: {ids} to be released by {by} ({then})"
