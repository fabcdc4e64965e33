"""What an apply or a delete of a Kueue Cohort decides, from what it read: the tree's rules
(`cohorts.check_tree`) against the stored cohorts, and the NodePools whose admissions the change
governs, apart from the loop that retries it (service/configuration.py) and the store that reads
and writes the items (adapters/cohort_store.py).

Every apply or delete reads the cohorts' version, then the quota set's version, then the stored
cohorts and quotas (`CohortsRead`), and writes conditioned on both versions, bumping the
cohorts': two applies fine alone but a cycle together cannot both succeed, and a quota applied
meanwhile (joining a cohort of the tree) sends the write back to be decided again. The write
bumps the quota generation of every NodePool an admission through the cohort's tree (before and
after the change) decides in: the pools the tree's quotas name and those the cohort documents
name. A lease in such a pool conditions on its pool's generation, so a lease decided on the tree
as it was cannot be written after the change (docs/quotas.md, "Hierarchical cohorts"). A cohort
applied as it is stored bumps no pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from capacity_launcher.domain.accounting.cohort_paths import tree_cohorts
from capacity_launcher.domain.apis.kueue.cohorts import COHORT, Cohort, check_tree
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import ConfigConflict, NotFound

# One transaction holds 100 items: the document's write, the two version items, the pool bumps.
MAX_POOL_BUMPS = 97


@dataclass(frozen=True)
class CohortsRead:
    """The cohorts' version and the quota set's, read first, then every stored cohort that
    parses and every stored quota."""

    version: int
    quota_version: int
    cohorts: tuple[Cohort, ...] = ()
    quotas: tuple[CapacityQuota, ...] = ()

    def stored(self, name: str) -> Cohort | None:
        return next((c for c in self.cohorts if c.name == name), None)


@dataclass(frozen=True)
class CohortPut:
    """The write of an apply: the cohort, conditioned on both versions as read, bumping the
    quota generations of `pools`."""

    applied: Cohort
    seen: int
    quota_version: int
    pools: tuple[str, ...]


@dataclass(frozen=True)
class CohortDelete:
    """The write of a delete: the cohort gone, conditioned and bumping as an apply's."""

    name: str
    seen: int
    quota_version: int
    pools: tuple[str, ...]


def governed_pools(
    before: Mapping[str, Cohort],
    after: Mapping[str, Cohort],
    quotas: Iterable[CapacityQuota],
    name: str,
) -> tuple[str, ...]:
    """The NodePools whose admissions a change of cohort ``name`` from ``before`` to ``after``
    may decide otherwise: those named by the quotas of its tree, before or after, and by the
    cohort documents of those trees."""
    cohorts = tree_cohorts(before, name) | tree_cohorts(after, name)
    pools = {
        flavor.name
        for quota in quotas
        if quota.spec.cohort in cohorts
        for flavor in quota.flavors()
    }
    for documents in (before, after):
        for cohort in cohorts:
            found = documents.get(cohort)
            if found is not None:
                pools |= {f.name for g in found.spec.resource_groups for f in g.flavors}
    if len(pools) > MAX_POOL_BUMPS:
        raise ConfigConflict(
            f"Cohort {name}: its tree's quotas and cohorts name {len(pools)} NodePools; a change "
            f"to a cohort governs at most {MAX_POOL_BUMPS} at once"
        )
    return tuple(sorted(pools))


def plan_apply(applied: Cohort, read: CohortsRead) -> CohortPut:
    """The write of ``applied``, or ConfigConflict naming ``spec.parentName`` when the tree it
    makes with the stored cohorts is no tree within bounds (a parent not applied is no error)."""
    check_tree(read.cohorts, applied)
    if read.stored(applied.name) == applied:
        # Stored as it is: no admission decides otherwise, so no lease need decide again (a
        # GitOps loop re-applying its cohorts costs no lease a retry, as for quotas).
        return CohortPut(applied, read.version, read.quota_version, ())
    before = {c.name: c for c in read.cohorts}
    after = {**before, applied.name: applied}
    pools = governed_pools(before, after, read.quotas, applied.name)
    return CohortPut(applied, read.version, read.quota_version, pools)


def plan_delete(name: str, read: CohortsRead) -> CohortDelete:
    """The write of cohort ``name``'s delete (NotFound when it is not stored). Its children stay,
    their parent missing (their status says so): borrowing then stays within each of them."""
    if read.stored(name) is None:
        raise NotFound(COHORT, name)
    before = {c.name: c for c in read.cohorts}
    after = {k: v for k, v in before.items() if k != name}
    pools = governed_pools(before, after, read.quotas, name)
    return CohortDelete(name, read.version, read.quota_version, pools)
