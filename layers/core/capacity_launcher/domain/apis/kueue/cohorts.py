"""Kueue's kueue.x-k8s.io/v1beta1 Cohort: a named cohort of CapacityQuotas that may have a parent
cohort and a quota of its own, so borrowing reaches up the tree (docs/quotas.md, "Hierarchical
cohorts").

A quota joins a cohort by ``spec.cohort`` as before; a Cohort document of that name gives the
cohort a parent (``spec.parentName``) and, optionally, its own nominal quota with borrowing and
lending limits per NodePool and resource (``spec.resourceGroups``, a quota's shape without
``limits``). A cohort no Cohort document names is a flat cohort, exactly as before.

Bounded: a tree holds at most ``MAX_TREE_COHORTS`` cohorts, at any depth, and a parent has at
most ``MAX_CHILD_COHORTS`` children, so the usage items one admission reads and conditions on
stay within one transaction (domain/accounting/cohort_tree.py). A larger tree, a cycle and any
field not acted on are refused naming the field (`check_tree`, `parse_cohort`). Its
``spec.fairSharing.weight`` weighs its share within its parent when waiting requests of one
priority are woken (docs/queueing.md, "Fair sharing"; domain/accounting/fair_sharing.py).
Served as its own hub (`cohort_version`), stored beside the quotas (adapters/cohort_store.py),
read with them by every admission (docs/quotas.md, "Hierarchical cohorts").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from capacity_launcher.domain.accounting.cohort_paths import in_cycle, tree_cohorts, tree_root
from capacity_launcher.domain.apis.api_versions import ServedVersion, as_document
from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, Name, _Document
from capacity_launcher.domain.apis.fair_sharing import FairSharing
from capacity_launcher.domain.apis.hub_kinds import own_hub
from capacity_launcher.domain.apis.kept_fields import Kept
from capacity_launcher.domain.apis.quotas import (
    MAX_FLAVORS,
    MAX_RESOURCE_GROUPS,
    CapacityQuota,
    Flavor,
    Problems,
    QuotaResource,
    ResourceGroup,
    problem_field_errors,
    repeats_across_groups,
)
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

COHORT_API_VERSION = "kueue.x-k8s.io/v1beta1"
COHORT = "Cohort"
PARENT_PATH = "spec.parentName"
# How many cohorts may name one parent (docs/quotas.md, "Hierarchical cohorts").
MAX_CHILD_COHORTS = 8
# How many cohorts one tree holds, at any depth. An admission through a tree reads the usage item
# of every cohort of the tree in its NodePool and conditions its lease's transaction on each
# (a sibling branch's use counts in every ancestor's usage, so the path alone would not do).
# One TransactWriteItems holds 100 items: the lease's own (quota_admission.LEASE_ITEMS, 6), its
# own cohort's usage item in each pool of a group with `limits` (up to MAX_FLAVORS, 64, the
# own cohort's item among them) leave 30 for the tree's other cohorts: 31 in all. A test holds
# the sum (tests/unit/test_cohort_tree.py).
MAX_TREE_COHORTS = 31


class CohortMetadata(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: Name
    labels: dict[str, str] | None = Field(default=None, max_length=64)
    annotations: dict[str, str] | None = Field(default=None, max_length=64)


class CohortResource(QuotaResource):
    """A cohort's own quota of one resource. Its lendingLimit bounds what the whole cohort lends
    its parent (its own quota and what its members lend it), so unlike a quota's it may exceed
    the cohort's own nominalQuota (which may be 0)."""

    model_config = BUILT_ON_FIRST_USE

    @model_validator(mode="before")
    @classmethod
    def _limits_of_a_nominal_quota(cls, data: Any) -> Any:
        """A limit without a nominalQuota is refused at nominalQuota, saying why (Kueue's
        nominalQuota is required; a cohort with no quota of its own writes 0)."""
        if isinstance(data, dict) and "nominalQuota" not in data and "nominal_quota" not in data:
            limits = [f for f in ("borrowingLimit", "lendingLimit") if f in data]
            if limits:
                raise Problems(
                    [
                        FieldError(
                            "nominalQuota",
                            f'is required with {" and ".join(limits)} (write "0" for a '
                            "cohort with no quota of its own)",
                        )
                    ]
                )
        return data

    @model_validator(mode="after")
    def _lending_within_nominal(self) -> CohortResource:
        return self


class CohortFlavor(Flavor):
    model_config = BUILT_ON_FIRST_USE

    resources: list[CohortResource] = Field(min_length=1, max_length=16)  # type: ignore[assignment]


class CohortResourceGroup(ResourceGroup):
    model_config = BUILT_ON_FIRST_USE

    flavors: list[CohortFlavor] = Field(min_length=1, max_length=MAX_FLAVORS)  # type: ignore[assignment]


class CohortSpec(_Document):
    """What is acted on: the parent, the cohort's own quota and the weight of its share within
    its parent (Kueue's ``fairSharing``; absent: weight 1)."""

    model_config = BUILT_ON_FIRST_USE

    parent_name: Name | None = None
    resource_groups: list[CohortResourceGroup] = Field(default=[], max_length=MAX_RESOURCE_GROUPS)
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _quota_shape(self) -> CohortSpec:
        problems = repeats_across_groups(self.resource_groups)
        problems += [
            FieldError(f"resourceGroups[{g}].limits", "is a CapacityQuota's field, not a Cohort's")
            for g, group in enumerate(self.resource_groups)
            if group.limits is not None
        ]
        if self.parent_name is None:
            # At the root nothing is above: Kueue refuses a root's limits, as do we.
            problems += [
                FieldError(
                    f"resourceGroups[{g}].flavors[{f}].resources[{r}].{limit}",
                    "needs spec.parentName: a cohort without a parent borrows from and lends "
                    "to no one",
                )
                for g, group in enumerate(self.resource_groups)
                for f, flavor in enumerate(group.flavors)
                for r, resource in enumerate(flavor.resources)
                for limit, value in (
                    ("borrowingLimit", resource.borrowing_limit),
                    ("lendingLimit", resource.lending_limit),
                )
                if value is not None
            ]
        if problems:
            raise Problems(problems)
        return self


class Cohort(_Document):
    """A Cohort as written (its own hub: stored as applied)."""

    model_config = BUILT_ON_FIRST_USE

    api_version: Literal["kueue.x-k8s.io/v1beta1"]
    kind: Literal["Cohort"]
    metadata: CohortMetadata
    spec: CohortSpec = Field(default_factory=CohortSpec)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def parent(self) -> str | None:
        return self.spec.parent_name

    @property
    def fair_weight(self) -> Decimal:
        """spec.fairSharing.weight, 1 when the cohort does not set it (as Kueue defaults it)."""
        fair = self.spec.fair_sharing
        return fair.weight if fair is not None else Decimal(1)

    def term(self, flavor: str, resource: str) -> QuotaResource | None:
        """The cohort's own quota of ``resource`` in ``flavor`` (None: it has none there)."""
        for group in self.spec.resource_groups:
            for listed in group.flavors:
                if listed.name == flavor:
                    return listed.resource(resource)
        return None


def parse_cohort(data: Mapping[str, Any]) -> Cohort:
    """Validate a Cohort document; every broken rule is reported at its document path."""
    try:
        return Cohort.model_validate(dict(data))
    except ValidationError as error:
        raise ConfigValidationError(problem_field_errors(error)) from None


def cohort_document(cohort: Cohort) -> dict[str, Any]:
    return as_document(cohort)


def cohort_version() -> ServedVersion:
    """kueue.x-k8s.io/v1beta1 Cohort, served as its own hub (stored as written)."""
    return own_hub(
        COHORT_API_VERSION,
        COHORT,
        Cohort,
        parse_cohort,
        lambda cohort: Kept(COHORT_API_VERSION, COHORT, {}, ()),
    )


def check_tree(others: Iterable[Cohort], applied: Cohort) -> None:
    """The tree ``applied`` makes with the stored ``others`` stays a tree within bounds: no
    cycle of parents, at most MAX_CHILD_COHORTS children per parent and MAX_TREE_COHORTS cohorts
    per tree, at any depth. Raises ConfigConflict naming ``spec.parentName``. A parent not
    applied yet is no error (order-free apply: `missing_parent`); the apply that joins the
    parts is checked against the whole tree they make."""
    every = {c.name: c for c in others if c.name != applied.name}
    every[applied.name] = applied
    parent = applied.parent
    where = f"Cohort {applied.name}: {PARENT_PATH}"
    if parent == applied.name:
        raise ConfigConflict(f"{where}: a cohort may not be its own parent")
    if parent is not None:
        chain = _ancestors(parent, every, applied.name)
        if applied.name in chain:
            cycle = " -> ".join([applied.name, *chain[: chain.index(applied.name) + 1]])
            raise ConfigConflict(f"{where}: makes a cycle of parents ({cycle})")
        siblings = sorted(c.name for c in every.values() if c.parent == parent)
        _check_children(parent, siblings, where)
    children = sorted(c.name for c in every.values() if c.parent == applied.name)
    _check_children(applied.name, children, where)
    tree = tree_cohorts(every, applied.name)
    if len(tree) > MAX_TREE_COHORTS:
        raise ConfigConflict(
            f"{where}: the tree of {tree_root(every, applied.name)} would hold {len(tree)} "
            f"cohorts; a tree holds at most {MAX_TREE_COHORTS} (an admission conditions on the "
            "usage item of every cohort of its tree, in one DynamoDB transaction)"
        )


def _check_children(parent: str, children: list[str], where: str) -> None:
    if len(children) > MAX_CHILD_COHORTS:
        raise ConfigConflict(
            f"{where}: Cohort {parent} would have {len(children)} child cohorts; at most "
            f"{MAX_CHILD_COHORTS} may name one parent"
        )


def _ancestors(start: str, every: Mapping[str, Cohort], stop: str) -> list[str]:
    """``start`` and its parents in order, up to a root, a parent not applied, or ``stop``."""
    chain = [start]
    while True:
        found = every.get(chain[-1])
        if found is None or found.parent is None or chain[-1] == stop:
            return chain
        if found.parent in chain:
            return [*chain, found.parent]
        chain.append(found.parent)


def missing_parent(cohorts: Mapping[str, Cohort], cohort: Cohort) -> str | None:
    """The parent ``cohort`` names that is not applied (its status condition says so): until it
    is, the cohort borrows only within itself, as a flat cohort."""
    parent = cohort.parent
    return parent if parent is not None and parent not in cohorts else None


# Status conditions (Kubernetes' convention: type, status, reason, message), computed when read.
ACTIVE, PARENT_NOT_FOUND, CYCLE = "CohortActive", "ParentNotFound", "CycleDetected"


def cohort_status(
    cohorts: Mapping[str, Cohort], quotas: Iterable[CapacityQuota], cohort: Cohort
) -> dict[str, Any]:
    """``cohort``'s status among the stored ``cohorts`` and ``quotas``: its member quotas, its
    child cohorts and a ``Ready`` condition, False with ``CycleDetected`` while it or its parent
    is on a cycle of parents, False with ``ParentNotFound`` while the parent it names is not
    applied (it then lends and borrows only within itself, as a flat cohort; it
    becomes part of the tree when the parent is applied)."""
    members = sorted(q.name for q in quotas if q.spec.cohort == cohort.name)
    children = sorted(c.name for c in cohorts.values() if c.parent == cohort.name)
    missing = missing_parent(cohorts, cohort)
    if in_cycle(cohorts, cohort.name) or (
        cohort.parent is not None and in_cycle(cohorts, cohort.parent)
    ):
        # An apply refuses the parent that closes a cycle; one stored anyway is said here.
        on = cohort.name if in_cycle(cohorts, cohort.name) else cohort.parent
        ready = {
            "type": "Ready",
            "status": "False",
            "reason": CYCLE,
            "message": f"Cohort {on} is on a cycle of parents ({_cycle_of(cohorts, str(on))}); "
            "borrowing stays within this cohort, and nothing borrows through it, until "
            f"{PARENT_PATH} breaks the cycle",
        }
    elif missing is not None:
        ready = {
            "type": "Ready",
            "status": "False",
            "reason": PARENT_NOT_FOUND,
            "message": f"parent Cohort {missing} is not applied; borrowing stays within this "
            "cohort until it is",
        }
    else:
        where = "the root of its tree" if cohort.parent is None else f"under {cohort.parent}"
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": ACTIVE,
            "message": f"{where}: {len(members)} quota(s), {len(children)} child cohort(s)",
        }
    return {"memberQuotas": members, "childCohorts": children, "conditions": [ready]}


def _cycle_of(cohorts: Mapping[str, Cohort], start: str) -> str:
    """The cycle of parents through ``start``, as ``a -> b -> a``."""
    chain = [start]
    while True:
        parent = cohorts[chain[-1]].parent
        chain.append(str(parent))
        if parent == start:
            return " -> ".join(chain)
