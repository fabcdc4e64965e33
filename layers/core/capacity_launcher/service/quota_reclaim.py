"""Reclaim: a lender whose nominal quota is lent out asks the borrowers for it back.

The launcher, refusing a request with QuotaExceeded whose ``reclaim`` is set, asks
`ReclaimRequests.request`: it chooses the borrowed instances (``Cohort.reclaim_plan``: lowest
priority first, then newest, never within a member's own nominal quota), records one open
reclaim per lender and NodePool, and publishes `Capacity Reclaim Requested`. The request itself
still fails, its message naming the reclaim; the lender asks again once the quota is back.

Through a cohort tree (Kueue's Cohort) the lender's quota may be held by a borrower in another
branch: the choice (`CohortTree.reclaim_plan`) is made among every quota of the tree, on every
cohort's usage in the pool, and goes the same way.

The sync enforces it after its grace period (`service/reclaim_enforcement.py`). A waiting request
its quota's withinClusterQueue or borrowWithinCohort lets preempt asks through the same path
(`ReclaimRequests.preempt`), judged on every item its admission reads: the cohort's quota usage
in the pool and in its group's other pools (group `limits`), and the pool's stored limits, usage
and count for `limits.unready` (`service/preemption_reads.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.accounting import preemption
from capacity_launcher.domain.accounting.cohort_paths import tree_cohorts
from capacity_launcher.domain.accounting.cohort_tree import CohortTree, in_tree
from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.preemption import (
    Preemptor,
    Running,
    group_pools,
)
from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance
from capacity_launcher.domain.accounting.reclaim_decision import preemption_refused_now
from capacity_launcher.domain.apis.quotas import CapacityQuota, format_amount
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import DIMENSIONS, Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.reclaims import (
    ReclaimedInstance,
    ReclaimRequested,
    ResourceAmount,
)
from capacity_launcher.domain.records.status import (
    RECLAIM_REQUESTED,
    Event,
    format_timestamp,
)
from capacity_launcher.observability import logger
from capacity_launcher.service.accounting_ports import (
    PoolMembers,
    PoolRoomReads,
    QuotaUsage,
    ReclaimStore,
)
from capacity_launcher.service.ports import InstanceItems
from capacity_launcher.service.preemption_reads import launched_at, preempts, read_room, read_usage

Quotas = Callable[[], Sequence[CapacityQuota]]
# The applied Kueue Cohorts by name (none: every cohort is flat).
Cohorts = Callable[[], Mapping[str, Any]]


def no_cohorts() -> Mapping[str, Any]:
    return {}


def circle_items(
    quota: CapacityQuota, quotas: Sequence[CapacityQuota], cohorts: Mapping[str, Any], pool: str
) -> tuple[list[str], list[CapacityQuota]]:
    """The quota usage items (in ``pool``) and the quotas a reclaim by ``quota`` reads: its
    cohort's, or through a tree every cohort's of the tree and every quota of it."""
    if not in_tree(cohorts, quota) or quota.spec.cohort is None:
        return [quota.usage_item(pool)], [q for q in quotas if q.cohort_key == quota.cohort_key]
    names = tree_cohorts(cohorts, quota.spec.cohort)
    circle = [q for q in quotas if q.spec.cohort in names]
    return sorted({q.usage_item(pool) for q in circle} | {quota.usage_item(pool)}), circle


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
        cohorts: Cohorts = no_cohorts,
        pools: PoolRoomReads | None = None,
        stored: Quotas | None = None,
    ) -> None:
        self._quotas = quotas
        self._cohorts = cohorts
        self._members = members
        self._quota_usage = quota_usage
        self._items = items
        self._reclaims = reclaims
        self._publish = publish
        self._now = now
        # The pools' stored limits, usage and readiness a preemption is judged on (None: no
        # pool limits are read, as a store without them).
        self._pools = pools
        # The quotas as stored now (strongly consistent), read before a preemption is decided:
        # its policies are those applied now, not the container's copy (None: `quotas`).
        self._stored = stored or quotas

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
        if refused.reclaim or refused.demand is None:
            return ""
        found = self._preempting(refused.quota)
        if found is None:
            return ""
        quotas, quota = found
        pool = refused.flavor
        current = self._reclaims.get(quota.name, pool)
        if current is None:
            ask = Preemptor(quota.name, pool, refused.demand, priority, arrived_at.isoformat())
            reclaim = self._preemption(quotas, quota, ask, request_id, requester, arrived_at)
            if reclaim is None:
                return ""
            if not self._reclaims.open(reclaim):
                return self._open_now(quota.name, pool)
            current = reclaim
        elif current.request_id == request_id and preemption_refused_now(current, quotas):
            # Decided under a policy changed since: not announced again (the sync spares what
            # the policy of now refuses and closes it; the request then asks afresh).
            return ""
        return self._announce(current, request_id)

    def _preempting(self, name: str | None) -> tuple[list[CapacityQuota], CapacityQuota] | None:
        """The quotas as stored and the quota ``name`` when a policy of its lets its waiting
        requests preempt. Who may be taken is decided by the policies applied now (an apply
        governs what follows it): read as stored once the container's copy says one may."""
        if not any(q.name == name and preempts(q) for q in self._quotas()):
            return None
        quotas = list(self._stored())
        quota = next((q for q in quotas if q.name == name), None)
        return None if quota is None or not preempts(quota) else (quotas, quota)

    def _open_now(self, quota: str, pool: str) -> str:
        current = self._reclaims.get(quota, pool)
        return "" if current is None else _named(current)

    def _preemption(
        self,
        stored: Sequence[CapacityQuota],
        quota: CapacityQuota,
        ask: Preemptor,
        request_id: str,
        requester: str | None,
        arrived_at: datetime,
    ) -> ReclaimRequested | None:
        pool = ask.flavor
        where = [pool, *group_pools(quota, pool)]
        quotas, usage, members, records = self._preemption_candidates(quota, where, stored)
        launched = {i: launched_at(members[i], records.get(i)) for i in members}
        running = [
            Running(
                QuotaInstance(i, str(m.requester), m.pool, m.amount, launched[i].isoformat()),
                records[i].priority if i in records else None,
            )
            for i, m in members.items()
        ]
        victims = preemption.plan(ask, quotas, usage, running, read_room(self._pools, pool))
        if not victims:
            return None
        cohort = Cohort.of(quota, quotas, usage)
        return self._reclaim(
            quota,
            pool,
            request_id,
            requester,
            # Every dimension it asks (the pool's limits and group limits bound them all).
            {r: ask.demand.amount(r) for r in DIMENSIONS if ask.demand.amount(r) > 0},
            enforced=True,
            instances=[
                ReclaimedInstance(
                    instance_id=v.instance.instance_id,
                    requester=v.instance.requester,
                    quota=v.owner,
                    node_pool=v.instance.flavor,
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
        self, quota: CapacityQuota, pool: str, cohorts: Mapping[str, Any] | None = None
    ) -> tuple[
        list[CapacityQuota],
        dict[tuple[str, str], Resources],
        dict[str, Member],
        dict[str, InstanceRecord],
    ]:
        """The quotas, the cohort's usage in ``pool`` (through a tree, every cohort's of the
        tree), its counted instances and their records, less what other open reclaims of the
        cohort (of the tree) name already."""
        quotas = list(self._quotas())
        items, circle = circle_items(quota, quotas, cohorts or {}, pool)
        usage: dict[tuple[str, str], Resources] = {}
        for item in items:
            usage |= self._quota_usage.quota_usage(item, pool)
        members = {
            m.instance_id: m
            for m in self._members.members(pool)
            if m.quota_usage in items and m.requester
        }
        self._set_aside_named_by_others(quota, pool, circle, members, usage)
        return quotas, usage, members, self._items.many(sorted(members))

    def _preemption_candidates(
        self, quota: CapacityQuota, pools: Sequence[str], stored: Sequence[CapacityQuota]
    ) -> tuple[
        list[CapacityQuota],
        dict[tuple[str, str], Resources],
        dict[str, Member],
        dict[str, InstanceRecord],
    ]:
        """For a preemption: the quotas ``stored``, the cohort's usage in every pool the
        quota's admission in the first of ``pools`` reads, its counted instances in ``pools``
        and their records, less what other open reclaims of the cohort name already."""
        quotas = list(stored)
        usage = read_usage(self._quota_usage, quota, pools[0])
        members = {
            m.instance_id: m
            for pool in pools
            for m in self._members.members(pool)
            if m.quota_usage == quota.usage_item(pool) and m.requester
        }
        circle = [q for q in quotas if q.cohort_key == quota.cohort_key]
        for pool in pools:
            self._set_aside_named_by_others(quota, pool, circle, members, usage)
        return quotas, usage, members, self._items.many(sorted(members))

    def _plan(
        self,
        lender: CapacityQuota,
        pool: str,
        refused: QuotaExceeded,
        request_id: str,
        requester: str | None,
    ) -> ReclaimRequested | None:
        cohorts = self._cohorts()
        quotas, usage, members, records = self._candidates(lender, pool, cohorts)
        launched = {i: launched_at(members[i], records.get(i)) for i in members}
        candidates = [
            QuotaInstance(i, str(m.requester), pool, m.amount, launched[i].isoformat())
            for i, m in members.items()
        ]
        if in_tree(cohorts, lender):
            tree = CohortTree(quotas, cohorts, usage)
            cohort = tree.lenders_circle(lender.name)
            plan = tree.reclaim_plan(lender.name, pool, refused.reclaim, candidates)
        else:
            cohort = Cohort.of(lender, quotas, usage)
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
        circle: list[CapacityQuota],
        members: dict[str, Member],
        usage: dict[tuple[str, str], Resources],
    ) -> None:
        """Instances other lenders' open reclaims (of ``circle``: the lender's cohort, or its
        tree) name are as good as released: never named twice, and what their owners keep must
        stay within their nominal quota without them (taken out of `members` and `usage`)."""
        others = [(q.name, pool) for q in circle]
        for reclaim in self._reclaims.many(others):
            for named in reclaim.instances:
                member = members.pop(named.instance_id, None)
                if member is not None:
                    where = (str(member.requester), member.pool)
                    usage[where] = usage.get(where, Resources.ZERO) - member.amount


def _amounts(quota: CapacityQuota, instance: QuotaInstance) -> list[ResourceAmount]:
    """What the instance counts in the resources its owner's quota covers there."""
    flavor = quota.flavor(instance.flavor)
    names = [t.name for t in flavor.resources] if flavor else []
    resources: Resources = instance.resources
    return [ResourceAmount(name=n, total=format_amount(n, resources.amount(n))) for n in names]


def _named(reclaim: ReclaimRequested) -> str:
    return f"; reclaim {reclaim.reclaim_id} (requested by {reclaim.request_id}) is open"


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
