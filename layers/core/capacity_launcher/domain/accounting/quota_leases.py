"""A lease admitted against the CapacityQuotas: which quota governs a request (`governing`), the
usage items its admission depends on (`usage_items`), how many instances of a `LeaseAsk` the
cohort admits (`admit_lease`, `most_admitted`) and the lease that fits both the pool's room and
the quota's (`fit_quota_lease`). The cohort's arithmetic: domain/accounting/quota_admission.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting.cohort_paths import tree_cohorts
from capacity_launcher.domain.accounting.cohort_tree import CohortTree, in_tree
from capacity_launcher.domain.accounting.pool_usage import LeaseFit, Room, fit_lease, smallest_first
from capacity_launcher.domain.accounting.quota_admission import Cohort, UsageKey
from capacity_launcher.domain.apis.quota_sets import quota_for
from capacity_launcher.domain.apis.quotas import CapacityQuota, usage_item_key
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import Resources

if TYPE_CHECKING:
    # The Kueue document is a type here only: its module (and the versioned documents it
    # loads) stays out of a handler's init (tests/unit/test_handler_imports.py).
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort as CohortDocument

# Applied Cohort documents by name; none: every cohort is flat, as before the kind.
NO_COHORTS: Mapping[str, CohortDocument] = {}


def most_admitted(
    cohort: Cohort | CohortTree,
    quota: str,
    flavor: str,
    per_instance: Resources,
    wanted: int,
    least: int,
) -> int:
    """The most instances, between ``least`` and ``wanted``, that ``quota`` admits now.

    Raises the QuotaExceeded of ``least`` instances (at least one) when even those do not fit.
    Admission is monotone in the demand, so a binary search finds the most.
    """
    least = max(least, 1)
    cohort.admit(quota, flavor, per_instance * least)
    low, high = least, max(wanted, least)
    while low < high:
        middle = (low + high + 1) // 2
        try:
            cohort.admit(quota, flavor, per_instance * middle)
            low = middle
        except QuotaExceeded:
            high = middle - 1
    return low


def governing(
    quotas: Iterable[CapacityQuota], requester: str | None, node_pool: str
) -> CapacityQuota | None:
    """The quota whose admission a request in ``node_pool`` goes through; None when no quota
    names the pool. Raises QuotaExceeded when quotas name the pool but none covers the requester
    (pools that quotas cover are for their teams: docs/quotas.md, rule 3)."""
    quota, naming = quota_for(quotas, requester, node_pool)
    if quota is None and naming:
        who = f"requester {requester!r}" if requester else "a request without a requester"
        names = ", ".join(sorted(q.name for q in naming))
        raise QuotaExceeded(
            None,
            node_pool,
            None,
            f"{who} is covered by none of the quotas naming this NodePool ({names}); "
            "it may use only NodePools no quota names",
        )
    return quota


@dataclass(frozen=True)
class LeaseAsk:
    """A lease asked for: up to ``count`` instances of ``per_instance``, at least ``least``.

    ``sizes``: what one instance of each candidate type uses (type -> amount); when given, a
    lease the room left cannot hold at ``per_instance`` is narrowed to the types that fit
    (``fit_lease``). Empty: every instance is sized ``per_instance``."""

    pool: str
    requester: str | None
    per_instance: Resources
    count: int
    least: int
    sizes: Mapping[str, Resources] = field(default_factory=dict)
    # `sizes` are some of the candidates only (those the leases before it cover): the lease
    # names the types it covers even when all of them fit.
    partial: bool = False
    # Instances the requests launched with it still ask for (`fit_lease`'s `beside`).
    beside: int = 0

    def candidate_sizes(self) -> Mapping[str, Resources]:
        """``sizes``, or one anonymous size of ``per_instance`` when none is given."""
        return self.sizes or {"": self.per_instance}


def usage_items(quota: CapacityQuota, pool: str) -> list[UsageKey]:
    """The quota usage items (key, NodePool) an admission of ``quota`` in ``pool`` depends on.

    The cohort's item for ``pool`` comes first: it holds every member's use there (nominal,
    borrowing, the cohort's pool). When the group naming ``pool`` has ``limits``, the cohort's
    item for each other pool of the group follows, in the group's order: the limit bounds the
    quota's use summed over all of them."""
    items = [(quota.usage_item(pool), pool)]
    for group in quota.spec.resource_groups:
        names = [f.name for f in group.flavors]
        if group.limits is not None and pool in names:
            items += [(quota.usage_item(name), name) for name in names if name != pool]
    return items


def tree_usage_items(
    quota: CapacityQuota, cohorts: Mapping[str, CohortDocument], pool: str
) -> list[UsageKey]:
    """The quota usage items (key, NodePool) a tree admission of ``quota`` in ``pool`` reads and
    conditions its write on: the flat cohort's (`quota_leases.usage_items`: its own item first,
    where the lease is held, then its group's other pools when the group has ``limits``), then
    each other cohort of the tree in ``pool``, by name: at most MAX_TREE_COHORTS - 1 more."""
    own = quota.cohort_key
    if not in_tree(cohorts, quota):
        return usage_items(quota, pool)
    names = tree_cohorts(cohorts, own)
    return usage_items(quota, pool) + [
        (usage_item_key(name, pool), pool) for name in sorted(names - {own})
    ]


def deciding(
    quota: CapacityQuota,
    quotas: Sequence[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    cohorts: Mapping[str, CohortDocument],
) -> Cohort | CohortTree:
    """What decides ``quota``'s admissions: its cohort's tree when a Cohort document gives the
    cohort a parent or a quota of its own (`cohort_tree.in_tree`), else the flat cohort."""
    if in_tree(cohorts, quota):
        return CohortTree(quotas, cohorts, usage)
    return Cohort.of(quota, quotas, usage)


def admit_lease(
    quotas: Sequence[CapacityQuota],
    ask: LeaseAsk,
    usage: Mapping[UsageKey, Resources],
    cohorts: Mapping[str, CohortDocument] = NO_COHORTS,
) -> int:
    """How many of ``ask``'s instances the quotas admit now, given the cohort's ``usage`` in
    every pool ``usage_items`` names (by requester and pool; what is absent counts as 0).

    ``ask.count`` when no quota names the pool. Raises QuotaExceeded when even ``ask.least``
    (at least one) does not fit, or when quotas name the pool but none covers the requester.
    Pure: the caller reads the items and conditions its write on what it read."""
    quota = governing(quotas, ask.requester, ask.pool)
    if quota is None:
        return ask.count
    cohort = deciding(quota, quotas, usage, cohorts)
    return most_admitted(cohort, quota.name, ask.pool, ask.per_instance, ask.count, ask.least)


def fit_quota_lease(
    quotas: Sequence[CapacityQuota],
    ask: LeaseAsk,
    usage: Mapping[UsageKey, Resources],
    room: Room,
    cohorts: Mapping[str, CohortDocument] = NO_COHORTS,
) -> LeaseFit | None:
    """The lease ``ask`` gets in both ``room`` (the pool's limits beside its usage) and the room
    the quotas leave its requester, given the cohort's ``usage`` (as ``admit_lease`` reads it):
    narrowed, when needed, to the candidate types that fit both (``fit_lease``).

    None when the pool's room holds fewer than ``ask.least`` of any type. Raises QuotaExceeded
    when the pool's room would hold them but the quota does not (its refusal of ``ask.least``
    of the smallest type the pool holds), or when quotas name the pool but none covers the
    requester. Pure: the caller reads the items and conditions its write on what it read."""
    fit = _fit_in_quota(quotas, ask, usage, room, cohorts)
    if fit is None or fit.instance_types is not None or not ask.partial:
        return fit
    return replace(fit, instance_types=frozenset(ask.sizes))


def _fit_in_quota(
    quotas: Sequence[CapacityQuota],
    ask: LeaseAsk,
    usage: Mapping[UsageKey, Resources],
    room: Room,
    cohorts: Mapping[str, CohortDocument],
) -> LeaseFit | None:
    sizes = ask.candidate_sizes()
    quota = governing(quotas, ask.requester, ask.pool)
    if quota is None or ask.requester is None:
        return fit_lease(sizes, ask.count, ask.least, room, ask.beside)
    cohort = deciding(quota, quotas, usage, cohorts)

    def both(amount: Resources) -> bool:
        """The pool's room and the quota's both hold `amount`."""
        if not room(amount):
            return False
        try:
            cohort.admit(quota.name, ask.pool, amount)
        except QuotaExceeded:
            return False
        return True

    fit = fit_lease(sizes, ask.count, ask.least, both, ask.beside)
    if fit is not None or fit_lease(sizes, ask.count, ask.least, room) is None:
        return fit
    least = max(ask.least, 1)
    smallest = min((s for s in sizes.values() if room(s * least)), key=smallest_first)
    try:
        cohort.admit(quota.name, ask.pool, smallest * least)
    except QuotaExceeded as refused:  # the quota's reason, and what preemption must make fit
        refused.demand = smallest * least
        raise
    return None  # pragma: no cover - the quota refused every type the room holds
