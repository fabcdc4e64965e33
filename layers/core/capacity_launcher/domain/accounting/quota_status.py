"""A CapacityQuota's status: capacity, allocatable, usage, borrowed, lent, use per requester,
and the conditions Ready and ResourcesSufficient, in OME's shape with amounts in units."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.accounting.quota_admission import Cohort, Ledger, UsageKey
from capacity_launcher.domain.apis.quota_sets import conflicts
from capacity_launcher.domain.apis.quotas import CapacityQuota, format_amount
from capacity_launcher.domain.quantities import Resources

READY = "Ready"
RESOURCES_SUFFICIENT = "ResourcesSufficient"
# A quota naming a PriorityClass (an OME reservation's priorityClassName): is it applied?
PRIORITY_CLASS_READY = "PriorityClassReady"
FLAVOR_NOT_FOUND = "FlavorNotFound"
PRIORITY_CLASS_NOT_FOUND = "PriorityClassNotFound"


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def to_document(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
        }


def quota_status(
    quota: CapacityQuota,
    quotas: Iterable[CapacityQuota],
    usage: Mapping[UsageKey, Resources],
    node_pools: Collection[str],
) -> dict[str, Any]:
    """The status of ``quota`` among every stored quota, given use per (requester, NodePool)."""
    every = list(quotas)
    cohort = Cohort.of(quota, every, usage)
    ledgers = {
        (flavor.name, term.name): cohort.ledger(flavor.name, term.name)
        for flavor in quota.flavors()
        for term in flavor.resources
    }
    lent = {key: cohort.lent(*key).get(quota.name, Decimal(0)) for key in ledgers}
    name = quota.name

    def table(amount: Callable[[tuple[str, str], Ledger], Decimal]) -> list[dict[str, Any]]:
        return [
            {
                "name": flavor.name,
                "resources": [
                    {
                        "name": term.name,
                        "total": format_amount(
                            term.name,
                            amount((flavor.name, term.name), ledgers[(flavor.name, term.name)]),
                        ),
                    }
                    for term in flavor.resources
                ],
            }
            for flavor in quota.flavors()
        ]

    allocatable = {key: _allocatable(cohort, quota, key, ledger) for key, ledger in ledgers.items()}
    return {
        "cohort": quota.spec.cohort,
        "capacity": table(lambda key, ledger: ledger.terms[name].nominal_quota),
        "allocatable": table(lambda key, ledger: allocatable[key]),
        "usage": table(lambda key, ledger: ledger.used[name]),
        "borrowed": table(lambda key, ledger: ledger.borrowed(name)),
        "lent": table(lambda key, ledger: lent[key]),
        "associationUsages": _association_usages(quota, usage),
        "conditions": [
            c.to_document()
            for c in (
                _ready(quota, every, node_pools),
                _sufficient(allocatable),
            )
        ],
    }


def _allocatable(
    cohort: Cohort, quota: CapacityQuota, key: tuple[str, str], ledger: Ledger
) -> Decimal:
    """What the quota may still be admitted now, also bounded by its group's limits."""
    flavor, resource = key
    most = ledger.allocatable(quota.name)
    for group in quota.spec.resource_groups:
        if group.limits is None or not any(f.name == flavor for f in group.flavors):
            continue
        bound = group.limits.limit_for(resource)
        if bound is not None:
            used = sum(
                (cohort.used(quota.name, f.name).amount(resource) for f in group.flavors),
                Decimal(0),
            )
            most = min(most, max(Decimal(0), bound - used))
    return most


def _association_usages(
    quota: CapacityQuota, usage: Mapping[UsageKey, Resources]
) -> list[dict[str, Any]]:
    """Use per requester, in the resources each flavor covers (memory with units)."""
    found = []
    seen = [*quota.spec.requesters]
    seen += sorted({r for r, _ in usage if r not in seen and quota.covers(r)})
    for requester in seen:
        flavors = []
        for flavor in quota.flavors():
            used = usage.get((requester, flavor.name))
            if used is None or used.is_zero():
                continue
            flavors.append(
                {
                    "name": flavor.name,
                    "resources": [
                        {"name": t.name, "total": format_amount(t.name, used.amount(t.name))}
                        for t in flavor.resources
                    ],
                }
            )
        if flavors:
            found.append({"name": requester, "usage": flavors})
    return found


def reference_conditions(
    quota: CapacityQuota,
    quotas: Iterable[CapacityQuota],
    node_pools: Collection[str],
    named_class: str | None = None,
    unresolved: str | None = None,
) -> list[Condition]:
    """What the quota's references say now, read when asked (an apply in any order turns them
    true without waiting for the sync): Ready, and for a quota naming a PriorityClass,
    PriorityClassReady (False while it waits for the class, `unresolved`)."""
    found = [_ready(quota, list(quotas), node_pools, unresolved)]
    if unresolved is not None:
        found.append(
            Condition(
                PRIORITY_CLASS_READY,
                False,
                PRIORITY_CLASS_NOT_FOUND,
                f"PriorityClass {unresolved} is not applied: requests associated with this "
                "reservation are rejected until it is",
            )
        )
    elif named_class is not None:
        found.append(
            Condition(
                PRIORITY_CLASS_READY,
                True,
                "PriorityClassFound",
                f"PriorityClass {named_class} is applied: its value is the priority",
            )
        )
    return found


def with_conditions(status: Mapping[str, Any], conditions: Iterable[Condition]) -> dict[str, Any]:
    """`status` with each of `conditions` in place of the one of its type (new types after)."""
    fresh = {c.type: c.to_document() for c in conditions}
    kept = [fresh.pop(c.get("type"), c) for c in status.get("conditions", [])]
    return {**status, "conditions": [*kept, *fresh.values()]}


def _ready(
    quota: CapacityQuota,
    quotas: list[CapacityQuota],
    node_pools: Collection[str],
    unresolved: str | None = None,
) -> Condition:
    missing = [f.name for f in quota.flavors() if f.name not in node_pools]
    if missing:
        return Condition(
            READY,
            False,
            FLAVOR_NOT_FOUND,
            f"NodePool(s) {', '.join(missing)} do not exist: nothing is admitted there",
        )
    if unresolved is not None:
        return Condition(
            READY,
            False,
            PRIORITY_CLASS_NOT_FOUND,
            f"PriorityClass {unresolved} is not applied: its associations are rejected",
        )
    # Applies refuse these; two racing applies or a hand edit could still store them.
    clashes = [
        e
        for e in conflicts(quotas)
        if e.field.startswith(f"CapacityQuota {quota.name}:")
        or f"by CapacityQuota {quota.name};" in e.rule
    ]
    if clashes:
        return Condition(READY, False, "RequesterConflict", "; ".join(e.rule for e in clashes))
    covered = f"{len(quota.spec.requesters)} requester(s)"
    if quota.spec.requester_prefixes:
        covered += f" and those starting {', '.join(quota.spec.requester_prefixes)}"
    return Condition(
        READY, True, "QuotaActive", f"covers {covered} in {len(quota.flavors())} NodePool(s)"
    )


def _sufficient(allocatable: Mapping[tuple[str, str], Decimal]) -> Condition:
    exhausted = [f"{flavor}/{resource}" for (flavor, resource), a in allocatable.items() if a <= 0]
    if exhausted:
        return Condition(
            RESOURCES_SUFFICIENT,
            False,
            "QuotaExhausted",
            f"nothing more can be admitted in {', '.join(exhausted)} without reclaim or release",
        )
    return Condition(
        RESOURCES_SUFFICIENT, True, "CapacityAvailable", "every covered resource has room"
    )
