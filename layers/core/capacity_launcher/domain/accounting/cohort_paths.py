"""The shape of a cohort tree (Kueue's Cohort, KEP-79) from the applied cohorts' parents alone:
the parent a cohort borrows through, the path to its root, the cohorts of its tree, and the
cycles of parents nothing borrows through. Pure; apart from the Kueue document's module, which
stays out of a handler's init (tests/unit/test_handler_imports.py): anything with a ``parent``
will do. The arithmetic on the tree: cohort_tree.py; the rules at apply: kueue/cohorts.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Parented(Protocol):
    """An applied cohort, as far as the tree's shape goes."""

    @property
    def parent(self) -> str | None: ...


def in_cycle(cohorts: Mapping[str, Parented], cohort: str) -> bool:
    """Whether ``cohort`` is on a cycle of parents among ``cohorts``. An apply refuses the parent
    that would close one (`cohorts.check_tree`, conditioned on the cohorts' version); a cycle
    stored anyway (an item written by hand) is reported in the cohorts' status and nothing
    borrows through it (Kueue leaves a cohort tree with a cycle out of admission too)."""
    seen = [cohort]
    while True:
        found = cohorts.get(seen[-1])
        if found is None or found.parent is None:
            return False
        if found.parent == cohort:
            return True
        if found.parent in seen:
            return False  # a cycle above, not through `cohort`
        seen.append(found.parent)


def tree_parent(cohorts: Mapping[str, Parented], cohort: str) -> str | None:
    """The parent ``cohort`` borrows through: its applied parent, unless either of them is on a
    cycle of parents. None: ``cohort`` is the root of its tree (a parent not applied yet, or
    one in a cycle, leaves it standing alone with what is below it)."""
    found = cohorts.get(cohort)
    if found is None or found.parent is None or found.parent not in cohorts:
        return None
    if in_cycle(cohorts, cohort) or in_cycle(cohorts, found.parent):
        return None
    return found.parent


def tree_root(cohorts: Mapping[str, Parented], cohort: str) -> str:
    """The root of ``cohort``'s tree, up the path of parents (`tree_parent`)."""
    path = tree_path(cohorts, cohort)
    return path[-1]


def tree_path(cohorts: Mapping[str, Parented], cohort: str) -> list[str]:
    """``cohort`` and the cohorts above it, to its tree's root."""
    path = [cohort]
    while (parent := tree_parent(cohorts, path[-1])) is not None:
        path.append(parent)
    return path


def tree_cohorts(cohorts: Mapping[str, Parented], cohort: str) -> set[str]:
    """The cohorts of ``cohort``'s tree: its root and every cohort below the root."""
    root = tree_root(cohorts, cohort)
    found = {root}
    grown = True
    while grown:
        below = {name for name in cohorts if tree_parent(cohorts, name) in found}
        grown = not below <= found
        found |= below
    return found
