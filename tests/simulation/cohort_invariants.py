"""The cohort levels' bounds (issue 37's hierarchical cohorts; docs/simulation.md): at every step,
in each quota pool and resource, no level of the team quotas' tree uses more than its nominal
quotas plus what its limits and its parent allow, at any depth.

Each cohort on the path from `sim` (the team quotas' cohort) up its applied parents to its root
(a parent not applied ends the path, as it ends borrowing) is bounded by:

- its subtree's nominal quotas: its own (a Cohort document's), those of every cohort stored
  under it (a sibling branch lends up at most its own), and for `sim` its members' sum;
- plus, while its parent is applied, what it may take from above: its parent's bound less its
  own subtree's nominal quotas, cut to its borrowingLimit.

What `sim`'s members use counts at every level (no other quota is in the tree). Without a tree
this is the flat cohort's bound (the sum of nominal quotas). Computed here from the stored
documents, not with the domain's arithmetic (lending limits only make it smaller: not counted).
A tree made smaller (a parent deleted, a borrowing limit lowered) does not take back what runs:
the bound a level had stays for what it held then (the quota usage items, leases in flight
included), and shrinks as that ends, never below the bound of now (as a pool's lowered limit,
invariants.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.apis.quotas import parse_amount

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

LEVEL = "no cohort level uses more than its nominal quota + what it may borrow"
DEEP = "seen: a tree of three or more levels lending to its child (steps)"
COHORT_PREFIX = "Cohort#"
CYCLE = "a cycle of parents is refused, and nothing stored changes"


def stored_cohorts(world: Any) -> dict[str, dict[str, Any]]:
    """name → each stored Kueue Cohort document (beside the quotas' generations,
    adapters/cohort_store.py), as moto stores it (no call, no fault)."""
    return {
        sk.removeprefix(COHORT_PREFIX): json.loads(str(item["document"]))
        for sk, item in world.partition("CapacityQuotas").items()
        if sk.startswith(COHORT_PREFIX)
    }


def _term(document: Mapping[str, Any] | None, pool: str, resource: str) -> dict[str, Any]:
    for group in (document or {}).get("spec", {}).get("resourceGroups", []):
        for flavor in group["flavors"]:
            if flavor["name"] == pool:
                for term in flavor["resources"]:
                    if term["name"] == resource:
                        return dict(term)
    return {}


def _amount(resource: str, value: Any) -> int:
    return 0 if value is None else int(parse_amount(resource, value))


class CohortInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        # (level, pool, resource) -> the bound what it held was admitted under
        self._grace: dict[tuple[str, str, str], int] = {}
        self._over: set[tuple[str, str, str]] = set()

    def bounds(self, pool: str, resource: str, nominal: int) -> dict[str, int]:
        """Each level's bound now, given `sim`'s members' sum of nominal quotas."""
        from tests.simulation.operations import COHORT

        stored = stored_cohorts(self.world)
        path = [COHORT]
        while True:
            parent = (stored.get(path[-1]) or {}).get("spec", {}).get("parentName")
            if parent is None or parent not in stored or parent in path:
                break
            path.append(parent)

        def subtree(name: str, seen: frozenset[str] = frozenset()) -> int:
            total = _amount(resource, _term(stored.get(name), pool, resource).get("nominalQuota"))
            total += nominal if name == COHORT else 0
            for child, document in sorted(stored.items()):
                if document.get("spec", {}).get("parentName") == name and child not in seen:
                    total += subtree(child, seen | {name})
            return total

        bounds: dict[str, int] = {}
        above: int | None = None  # the parent's bound; None at the root
        for level in reversed(path):
            own = subtree(level)
            if above is None:
                bounds[level] = own
            else:
                limit = _term(stored.get(level), pool, resource).get("borrowingLimit")
                borrow = max(0, above - own)
                if limit is not None:
                    borrow = min(borrow, _amount(resource, limit))
                bounds[level] = own + borrow
            above = bounds[level]
        if len(path) > 1 and bounds[COHORT] > subtree(COHORT):
            depth = "a two-level tree" if len(path) == 2 else "a tree of three or more levels"
            self.checks[f"seen: {depth} lending to its child (steps)"] += 1
        return bounds

    def judge(
        self, pool: str, resource: str, nominal: int, used: int, held: Decimal | None
    ) -> None:
        """`used`: what the cohort's members run in `pool` (EC2); `held`: what its quota usage
        item holds for them (leases in flight too)."""
        bounds = self.bounds(pool, resource, nominal)
        for key in [k for k in self._grace if k[1:] == (pool, resource) and k[0] not in bounds]:
            del self._grace[key]  # a level gone: judged afresh when it comes back
        for level, bound in bounds.items():
            key = (level, pool, resource)
            grace = max(bound, self._grace.get(key, bound))
            self.checks[LEVEL] += 1
            if used > nominal:
                self.checks["seen: a cohort level over its members' nominal quotas (steps)"] += 1
            if used > grace:
                if key not in self._over:
                    self.base._violate(
                        LEVEL,
                        f"cohort {level}: NodePool {pool}: {resource} used {used}, bound "
                        f"{bound} (held under {grace}); stored: {stored_cohorts(self.world)}",
                    )
                self._over.add(key)
                continue
            self._over.discard(key)
            holding = max(used, int(held or 0))
            self._grace[key] = max(bound, min(grace, holding))

    def cycle_refused(
        self, outcome: str, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> None:
        self.checks[CYCLE] += 1
        if outcome == "applied":
            self.base._violate(CYCLE, f"a cycle of parents was {outcome}: {after}")
        elif outcome == "ConfigConflict" and before != after:
            self.base._violate(CYCLE, f"refused, but the stored cohorts moved: {before} -> {after}")
        elif outcome == "ConfigConflict":
            self.checks["seen: a cycle of parents refused"] += 1
