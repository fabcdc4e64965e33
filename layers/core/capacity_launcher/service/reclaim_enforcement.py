"""Reclaim enforced: the sync's side of a reclaim (`service/quota_reclaim.py` is the launcher's).

The sync runs `ReclaimEnforcement.run` every minute: a reclaim whose instances are all released
is closed; one whose grace period has passed is closed too, after terminating what still runs
when it is ``enforced`` and the quotas of now still allow it: the decision is taken again
(``reclaim_decision.redecide``; ``redecide_preemption`` for a preemption, whose request must
still wait) on the quotas read then and the cohort's usage read then (for a preemption in every
pool its request's admission reads, and its pool's stored limits, usage and count for
`limits.unready`), so a policy changed to Never, a borrower now of no lower priority, a lender
deleted, an owner that no longer borrows, or a request that would still not fit with them gone
spares the instances. Every close is announced (Capacity Reclaim Closed: its outcome, the
reason, what was terminated and what was spared, and why). A terminated instance is released
through the same gated path as its termination event (`InstanceEvents.state_changed`): the
instance item's conditional release and the member's conditional delete each happen once, so
the pool's and the quota's usage are released exactly once, whichever comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.preemption import Running
from capacity_launcher.domain.accounting.quota_admission import QuotaInstance
from capacity_launcher.domain.accounting.reclaim_decision import (
    ReclaimDecision,
    ReclaimOutcome,
    Spared,
    preemptor_of,
    redecide,
    redecide_preemption,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.reclaims import (
    ReclaimClosed,
    ReclaimedInstance,
    ReclaimRequested,
    SparedInstance,
)
from capacity_launcher.domain.records.status import RECLAIM_CLOSED, Event
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import (
    PoolMembers,
    PoolRoomReads,
    QuotaUsage,
    ReclaimStore,
)
from capacity_launcher.service.ports import FleetLauncher
from capacity_launcher.service.preemption_reads import read_room, read_usage
from capacity_launcher.service.quota_reclaim import (
    Cohorts,
    Quotas,
    circle_items,
    no_cohorts,
)

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
        cohorts: Cohorts = no_cohorts,
        pools: PoolRoomReads | None = None,
    ) -> None:
        self._quotas = quotas
        # The applied Cohorts, read when a reclaim is enforced (a lender's tree).
        self._cohorts = cohorts
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
        # The pools' stored limits, usage and readiness a preemption is judged on again.
        self._pools = pools

    def run(self, quotas: Sequence[CapacityQuota]) -> ReclaimReport:
        report = ReclaimReport()
        # Every open reclaim: also those of lenders deleted or no longer naming the pool.
        keys = [(q.name, f.name) for q in quotas for f in q.flavors()]
        now = self._now()
        counted: dict[str, dict[str, Member]] = {}
        for reclaim in self._reclaims.every_open(keys):
            # A preemption's victims may run in its group's other pools: each pool read once.
            pools = dict.fromkeys([reclaim.node_pool, *(i.node_pool for i in reclaim.instances)])
            for pool in pools:
                if pool not in counted:
                    counted[pool] = {m.instance_id: m for m in self._members.members(pool)}
            self._settle(reclaim, now, {p: counted[p] for p in pools}, report)
        return report

    def _settle(
        self,
        reclaim: ReclaimRequested,
        now: datetime,
        counted: dict[str, dict[str, Member]],
        report: ReclaimReport,
    ) -> None:
        left = [i for i in reclaim.instances if i.instance_id in counted[i.node_pool]]
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
            self._enforce(reclaim, left, counted, report)

    def _enforce(
        self,
        reclaim: ReclaimRequested,
        left: Sequence[ReclaimedInstance],
        counted: dict[str, dict[str, Member]],
        report: ReclaimReport,
    ) -> None:
        """Terminate what the quotas and usage of now still allow; close it saying what."""
        members = {i.instance_id: counted[i.node_pool][i.instance_id] for i in left}
        decision = self._decide(reclaim, left, members)
        due = decision.terminate
        if due and not self._terminate(reclaim, due):
            report.pending.append(reclaim.reclaim_id)
            return
        for instance_id in due:
            counted[members[instance_id].pool].pop(instance_id, None)
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
        named_pool = lender is not None and lender.flavor(pool) is not None
        usage: dict[tuple[str, str], Resources] = {}
        if reclaim.preempts:
            # Every item the request's admission reads, and its pool's limits: the full fit.
            if lender is not None and named_pool:
                usage = read_usage(self._quota_usage, lender, pool)
            room = read_room(self._pools, pool)
            victims = _running(left, members)
            return redecide_preemption(preemptor_of(reclaim), victims, quotas, usage, room)
        cohorts = self._cohorts()
        if lender is not None and named_pool:
            # Through a tree, every cohort's usage of the tree (the borrower may be anywhere).
            for item in circle_items(lender, quotas, cohorts, pool)[0]:
                usage |= self._quota_usage.quota_usage(item, pool)
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
        return redecide(reclaim.quota, pool, resources, named, quotas, usage, cohorts)

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
        where = {i.instance_id: i.node_pool for i in reclaim.instances}
        for instance_id in instance_ids:
            # The termination event's own path: the instance item's release is the gate.
            self._release(instance_id, RECLAIMED_STATE)
            # An instance no item records is not ours to the events path: its member still goes
            # (from its own pool: a preemption's victim may run in another pool of its group).
            self._members.uncount_instance(where.get(instance_id, reclaim.node_pool), instance_id)
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
