"""Admission through a cohort tree (Kueue's hierarchical cohorts, KEP-79): a quota's borrowing
reaches past its own cohort, up the path of parents to the root, to each level's unused
capacity, within each level's borrowingLimit and lendingLimit. A tree holds at most
`cohorts.MAX_TREE_COHORTS` cohorts, at any depth. Pure arithmetic, no I/O: docs/quotas.md.

Per NodePool and resource every node of the tree (a quota, a cohort) has a nominal quota N, a
borrowingLimit B and a lendingLimit L (a cohort without a quota of its own there: N = 0, no
limits). Bottom up:

- a quota's subtree quota is its N; a cohort's is its own N plus, of each child, the part the
  child lends up: the child's subtree quota less its guaranteed part;
- a node's guaranteed part, kept for itself, is its subtree quota less L (0 without L);
- a quota's usage is what its requesters use; a cohort's is what its children use above their
  guaranteed parts.

Top down, what a node may still take: at the root, its subtree quota less its usage; below,
what is left of its guaranteed part, plus what its parent may take (the same rule, one level
up, to the root), cut (with B) to what the node may hold in its parent: subtree quota -
guaranteed - (usage above guaranteed) + B. Only the
quota's final answer is cut at 0 (a level over-committed by a shrunk quota takes from those
below it). A quota that does not allow borrowing may take no more than its nominal quota.

With a single cohort (no parent, no quota of its own) this is the flat cohort's arithmetic
(quota_admission.Ledger.allocatable); a test holds them equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting.cohort_paths import in_cycle, tree_cohorts, tree_parent
from capacity_launcher.domain.accounting.quota_admission import (
    Admission,
    AdmissionKind,
    Cohort,
    QuotaInstance,
    ReclaimPlan,
    UsageKey,
    lent_out,
)
from capacity_launcher.domain.apis.quota_preemption import ReclaimPolicy
from capacity_launcher.domain.apis.quotas import CapacityQuota, format_amount
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import Resources

if TYPE_CHECKING:
    # The Kueue document is a type here only: its module (and the versioned documents it
    # loads) stays out of a handler's init (tests/unit/test_handler_imports.py).
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort as CohortDocument

ZERO = Decimal(0)


@dataclass(frozen=True)
class _Terms:
    nominal: Decimal
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None


class CohortTree:
    """The tree a quota's cohort belongs to: the quotas, the applied Cohort documents, and the
    use by requester and NodePool of every cohort in the tree (`tree_usage_items`)."""

    def __init__(
        self,
        quotas: Sequence[CapacityQuota],
        cohorts: Mapping[str, CohortDocument],
        usage: Mapping[UsageKey, Resources],
    ) -> None:
        self._quotas = {q.name: q for q in quotas}
        self._cohorts = cohorts
        self._raw = usage
        self._usage = Cohort(list(quotas), usage)
        self._parents = {name: tree_parent(cohorts, name) for name in cohorts}
        # Each node's subtree quota and usage, once per decision (a deep tree asks them often).
        self._known: dict[tuple[str, tuple[str, str], str, str], Decimal] = {}

    def parent(self, cohort: str) -> str | None:
        """``cohort``'s parent in the tree: None at a root, and when the parent is not applied
        or either is in a cycle of parents (`tree_parent`)."""
        return self._parents.get(cohort)

    def children(self, cohort: str) -> list[str]:
        return sorted(name for name, parent in self._parents.items() if parent == cohort)

    def members(self, cohort: str) -> list[str]:
        return sorted(q.name for q in self._quotas.values() if q.spec.cohort == cohort)

    # Bottom up -----------------------------------------------------------------------------
    def _quota_terms(self, quota: str, flavor: str, resource: str) -> _Terms | None:
        own = self._quotas[quota]
        spec = own.flavor(flavor)
        term = None if spec is None else spec.resource(resource)
        if term is None:
            return None
        borrowing = term.borrowing_limit if own.spec.allow_borrowing else ZERO
        return _Terms(term.nominal_quota, borrowing, term.lending_limit)

    def _cohort_terms(self, cohort: str, flavor: str, resource: str) -> _Terms:
        document = self._cohorts.get(cohort)
        term = None if document is None else document.term(flavor, resource)
        if term is None:
            return _Terms(ZERO, None, None)
        return _Terms(term.nominal_quota, term.borrowing_limit, term.lending_limit)

    def _subtree(self, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        return self._once("subtree", node, flavor, resource)

    def _used(self, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        return self._once("used", node, flavor, resource)

    def _once(self, what: str, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        key = (what, node, flavor, resource)
        if key not in self._known:
            count = self._count_subtree if what == "subtree" else self._count_used
            self._known[key] = count(node, flavor, resource)
        return self._known[key]

    def _count_subtree(self, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        kind, name = node
        if kind == "quota":
            terms = self._quota_terms(name, flavor, resource)
            return ZERO if terms is None else terms.nominal
        total = self._cohort_terms(name, flavor, resource).nominal
        for child in self._nodes_under(name):
            total += self._subtree(child, flavor, resource) - self._guaranteed(
                child, flavor, resource
            )
        return total

    def _terms(self, node: tuple[str, str], flavor: str, resource: str) -> _Terms | None:
        kind, name = node
        if kind == "quota":
            return self._quota_terms(name, flavor, resource)
        return self._cohort_terms(name, flavor, resource)

    def _guaranteed(self, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        terms = self._terms(node, flavor, resource)
        if terms is None or terms.lending_limit is None:
            return ZERO
        return max(ZERO, self._subtree(node, flavor, resource) - terms.lending_limit)

    def _count_used(self, node: tuple[str, str], flavor: str, resource: str) -> Decimal:
        kind, name = node
        if kind == "quota":
            if self._quota_terms(name, flavor, resource) is None:
                return ZERO
            return self._usage.used(name, flavor).amount(resource)
        total = ZERO
        for child in self._nodes_under(name):
            above = self._used(child, flavor, resource) - self._guaranteed(child, flavor, resource)
            total += max(ZERO, above)
        return total

    def _nodes_under(self, cohort: str) -> list[tuple[str, str]]:
        return [("quota", q) for q in self.members(cohort)] + [
            ("cohort", c) for c in self.children(cohort)
        ]

    # Fair sharing between cohorts ----------------------------------------------------------
    def dominant_share(self, node: tuple[str, str], flavor: str) -> Decimal:
        """A node's dominant resource share within its parent in ``flavor`` (Kueue's; a node is
        ("cohort", name) or ("quota", name)): for each resource, what it uses above its subtree
        quota (a quota's: its nominal quota) over what its parent could hold (`potential`); the
        largest, divided by its ``fairSharing.weight``. 0 at a root and while it borrows
        nothing; a weight of 0 makes a borrowing node's share infinite."""
        kind, name = node
        if kind == "quota":
            parent = self._quotas[name].spec.cohort
            weight = self._quotas[name].spec.fair_weight
        else:
            parent = self.parent(name)
            document = self._cohorts.get(name)
            weight = Decimal(1) if document is None else document.fair_weight
        if parent is None:
            return ZERO
        share, borrowing = ZERO, False
        for resource in self._resources(flavor):
            if kind == "quota" and self._quota_terms(name, flavor, resource) is None:
                continue
            above = self._used(node, flavor, resource) - self._subtree(node, flavor, resource)
            if above <= 0:
                continue
            borrowing = True
            lendable = self.potential(parent, flavor, resource)
            if lendable > 0:
                share = max(share, above / lendable)
        if not borrowing:
            return ZERO
        return Decimal("Infinity") if weight == 0 else share / weight

    def potential(self, cohort: str, flavor: str, resource: str) -> Decimal:
        """What ``cohort`` could hold of ``resource`` were nothing used: its subtree quota at a
        root; below, its guaranteed part plus what its parent could hold, cut by its
        borrowingLimit (`_available` with no use)."""
        node = ("cohort", cohort)
        subtree = self._subtree(node, flavor, resource)
        parent = self.parent(cohort)
        if parent is None:
            return subtree
        guaranteed = self._guaranteed(node, flavor, resource)
        above = self.potential(parent, flavor, resource)
        limit = self._cohort_terms(cohort, flavor, resource).borrowing_limit
        if limit is not None:
            above = min(above, subtree - guaranteed + limit)
        return guaranteed + above

    def _resources(self, flavor: str) -> set[str]:
        """Every resource a quota or a cohort of the tree has a quota of in ``flavor``."""
        names = {
            term.name
            for quota in self._quotas.values()
            if (spec := quota.flavor(flavor)) is not None
            for term in spec.resources
        }
        for document in self._cohorts.values():
            for group in document.spec.resource_groups:
                for listed in group.flavors:
                    if listed.name == flavor:
                        names |= {term.name for term in listed.resources}
        return names

    # Top down ------------------------------------------------------------------------------
    def available(self, quota: str, flavor: str, resource: str) -> Decimal:
        """How much more of ``resource`` in ``flavor`` ``quota`` may take now, through the tree."""
        cohort = self._quotas[quota].spec.cohort
        node = ("quota", quota)
        terms = self._quota_terms(quota, flavor, resource)
        if terms is None:
            return ZERO
        if cohort is None:
            return max(ZERO, terms.nominal - self._used(node, flavor, resource))
        return max(ZERO, self._available(node, ("cohort", cohort), flavor, resource))

    def _available(
        self,
        node: tuple[str, str],
        parent: tuple[str, str] | None,
        flavor: str,
        resource: str,
    ) -> Decimal:
        subtree = self._subtree(node, flavor, resource)
        used = self._used(node, flavor, resource)
        if parent is None:
            return subtree - used  # negative when over-committed (a quota shrunk by an apply)
        guaranteed = self._guaranteed(node, flavor, resource)
        local = max(ZERO, guaranteed - used)
        grand = self.parent(parent[1])
        above = self._available(
            parent, None if grand is None else ("cohort", grand), flavor, resource
        )
        terms = self._terms(node, flavor, resource)
        if terms is not None and terms.borrowing_limit is not None:
            held = subtree - guaranteed - max(ZERO, used - guaranteed)
            above = min(above, held + terms.borrowing_limit)
        return local + above

    def admit(self, quota: str, flavor: str, demand: Resources) -> Admission:
        """Admit ``demand`` for ``quota`` in ``flavor`` through the tree, or raise QuotaExceeded
        naming the resource and how much is missing. A demand within the quota's own nominal
        quota that the tree cannot hold now finds that quota lent out, held by borrowers
        somewhere in the tree: QuotaExceeded carries ``reclaim``, what `reclaim_plan` must free
        (Kueue's reclaimWithinCohort, across the tree: docs/quotas.md)."""
        own = self._quotas[quota]
        spec = own.flavor(flavor)
        if spec is None:
            raise QuotaExceeded(quota, flavor, None, f"has no quota in NodePool {flavor}")
        self._usage.check_group_limits(own, flavor, demand)
        borrowed: dict[str, Decimal] = {}
        reclaim: dict[str, Decimal] = {}
        for term in spec.resources:
            need = demand.amount(term.name)
            if need <= 0:
                continue
            room = self.available(quota, flavor, term.name)
            used = self._usage.used(quota, flavor).amount(term.name)
            if need > room and used + need <= term.nominal_quota:
                reclaim[term.name] = need - room
                continue
            if need > room:
                shown = format_amount(term.name, need - room)
                raise QuotaExceeded(
                    quota,
                    flavor,
                    term.name,
                    f"short by {shown} in cohort {own.spec.cohort} and the cohorts above it "
                    f"(may take {format_amount(term.name, room)} more, "
                    f"asking {format_amount(term.name, need)})",
                    needed=need - room,
                )
            if used + need > term.nominal_quota:
                borrowed[term.name] = used + need - max(used, term.nominal_quota)
        if reclaim:
            raise lent_out(quota, flavor, f"the tree of cohort {own.spec.cohort}", reclaim)
        kind = AdmissionKind.BORROWING if borrowed else AdmissionKind.WITHIN_NOMINAL
        return Admission(quota, flavor, kind, borrowed)

    # Reclaim across the tree ---------------------------------------------------------------
    def lenders_circle(self, quota: str) -> Cohort:
        """Every quota of ``quota``'s tree, with their use: whom its reclaim may name."""
        cohort = self._quotas[quota].spec.cohort
        names = set() if cohort is None else tree_cohorts(self._cohorts, cohort)
        circle = [q for q in self._quotas.values() if q.spec.cohort in names]
        return Cohort(circle or [self._quotas[quota]], self._raw)

    def reclaim_plan(
        self,
        quota: str,
        flavor: str,
        short: Mapping[str, Decimal],
        instances: Sequence[QuotaInstance],
    ) -> ReclaimPlan | None:
        """What to ask back for ``quota`` (``short``, from QuotaExceeded.reclaim) anywhere in its
        tree, as `Cohort.reclaim_plan` does within one cohort: the choice its
        reclaimWithinCohort allows (enforced), else the choice among every borrower of the tree
        (only asked). Lowest priority first, then newest; never within an owner's own nominal
        quota; an instance is chosen only if releasing it gives ``quota`` more room through the
        tree, until it has ``short`` more. None when no choice frees enough."""
        chosen = self._reclaim(quota, flavor, short, instances, None)
        if chosen is not None:
            return ReclaimPlan(chosen, enforced=True)
        asked = self._reclaim(quota, flavor, short, instances, ReclaimPolicy.ANY)
        return None if asked is None else ReclaimPlan(asked, enforced=False)

    def _reclaim(
        self,
        quota: str,
        flavor: str,
        short: Mapping[str, Decimal],
        instances: Sequence[QuotaInstance],
        policy: ReclaimPolicy | None,
    ) -> list[QuotaInstance] | None:
        own = self._quotas[quota]
        policy = policy or own.spec.preemption.reclaim_within_cohort
        if policy is ReclaimPolicy.NEVER:
            return None
        circle = self.lenders_circle(quota)
        wanted = {r: self.available(quota, flavor, r) + a for r, a in short.items() if a > 0}
        ledgers = {r: circle.ledger(flavor, r) for r in wanted}
        usage = dict(self._raw)
        released: dict[tuple[str, str], Decimal] = {}
        chosen: list[QuotaInstance] = []
        room = self._rooms(usage, quota, flavor, wanted)
        for borrower, instance in circle._reclaim_candidates(quota, flavor, instances, policy):
            if all(room[r] >= wanted[r] for r in wanted):
                break
            gives = {
                r: instance.resources.amount(r) if borrower in ledgers[r].terms else ZERO
                for r in wanted
            }
            if any(
                released.get((borrower, r), ZERO) + amount > ledgers[r].borrowed(borrower)
                for r, amount in gives.items()
                if amount > 0
            ):
                continue  # releasing it would cut into the borrower's own nominal quota
            where = (instance.requester, flavor)
            trial = {**usage, where: usage.get(where, Resources.ZERO) - instance.resources}
            after = self._rooms(trial, quota, flavor, wanted)
            if not any(after[r] > room[r] for r in wanted if room[r] < wanted[r]):
                continue  # frees nothing this quota could take
            usage, room = trial, after
            chosen.append(instance)
            for r, amount in gives.items():
                released[(borrower, r)] = released.get((borrower, r), ZERO) + amount
        return chosen if all(room[r] >= wanted[r] for r in wanted) else None

    def _rooms(
        self,
        usage: Mapping[UsageKey, Resources],
        quota: str,
        flavor: str,
        wanted: Mapping[str, Decimal],
    ) -> dict[str, Decimal]:
        tree = CohortTree(list(self._quotas.values()), self._cohorts, usage)
        return {r: tree.available(quota, flavor, r) for r in wanted}


def in_tree(cohorts: Mapping[str, CohortDocument], quota: CapacityQuota) -> bool:
    """Whether ``quota``'s admission goes through a tree: its cohort's tree has more than one
    cohort, or a Cohort document there has a quota of its own. Otherwise the flat cohort
    decides, as before (a cohort is just a name)."""
    cohort = quota.spec.cohort
    if cohort is None or in_cycle(cohorts, cohort):
        return False  # a cohort on a cycle of parents lends and borrows only within itself
    names = tree_cohorts(cohorts, cohort)
    return len(names) > 1 or any(
        cohorts[name].spec.resource_groups for name in names if name in cohorts
    )


def lenders_circle(
    lender: CapacityQuota,
    quotas: Sequence[CapacityQuota],
    cohorts: Mapping[str, CohortDocument],
    usage: Mapping[UsageKey, Resources],
) -> Cohort:
    """The quotas ``lender``'s reclaim may name, with their ``usage``: its cohort's members, or
    through a tree (`in_tree`) every quota of the tree."""
    if not in_tree(cohorts, lender):
        return Cohort.of(lender, quotas, usage)
    return CohortTree(quotas, cohorts, usage).lenders_circle(lender.name)
