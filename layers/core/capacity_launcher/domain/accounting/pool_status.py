"""A NodePool's status: what it uses against its limits, in units, and the conditions Ready and
ResourcesSufficient, in the same shape as a CapacityQuota's (domain/accounting/quota_status.py).

A pool with `limits.unready` also shows its unready instances as the lease's gate counts them
(`pool_usage.Readiness`), and ResourcesSufficient is False while that gate would refuse a lease.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.accounting.pool_usage import Readiness, unready_refusal
from capacity_launcher.domain.accounting.quota_status import READY, RESOURCES_SUFFICIENT, Condition
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.quotas import format_amount
from capacity_launcher.domain.quantities import DIMENSIONS, Resources

UNREADY_LIMIT_REACHED = "UnreadyLimitReached"
# Karpenter's NodePool condition: is the NodeClass it names applied?
NODE_CLASS_READY = "NodeClassReady"


def pool_conditions(
    pool: NodePool,
    node_classes: Collection[str],
    used: Resources,
    readiness: Readiness | None = None,
) -> list[Condition]:
    """Ready and NodeClassReady (Karpenter's): its NodeClass exists (a pool naming a missing one
    rejects every request). ResourcesSufficient: every limited resource has room for more, and
    `limits.unready` (counted in `readiness`) does not hold new launches back."""
    ref = pool.spec.node_class_ref
    if ref in node_classes:
        found = (True, "NodeClassFound", f"NodeClass {ref} is applied")
    else:
        found = (
            False,
            "NodeClassNotFound",
            f"NodeClass {ref} is not applied: requests for this pool are rejected",
        )
    ready = Condition(READY, *found)
    held = _held_by_unready(pool, readiness)
    return [ready, held or _sufficient(pool, used), Condition(NODE_CLASS_READY, *found)]


def _held_by_unready(pool: NodePool, readiness: Readiness | None) -> Condition | None:
    """ResourcesSufficient False while the lease's gate would refuse (`unready_refusal`)."""
    refused = (
        None
        if readiness is None
        else unready_refusal(pool.metadata.name, pool.spec.limits, readiness)
    )
    if refused is None:
        return None
    return Condition(
        RESOURCES_SUFFICIENT,
        False,
        UNREADY_LIMIT_REACHED,
        f"new launches are held by limits.unready: {refused}",
    )


def _sufficient(pool: NodePool, used: Resources) -> Condition:
    limits = pool.spec.limits
    full = [
        f"{dimension} {format_amount(dimension, used.amount(dimension))} of "
        f"{format_amount(dimension, bound)}"
        for dimension in DIMENSIONS
        if limits is not None
        and (bound := limits.limit_for(dimension)) is not None
        and used.amount(dimension) >= bound
    ]
    if full:
        return Condition(
            RESOURCES_SUFFICIENT,
            False,
            "LimitReached",
            f"nothing more launches until instances end: {', '.join(full)}",
        )
    if limits is None or limits.is_unlimited():
        return Condition(RESOURCES_SUFFICIENT, True, "Unlimited", "the pool sets no limits")
    return Condition(
        RESOURCES_SUFFICIENT, True, "CapacityAvailable", "every limited resource has room"
    )


def pool_status(
    pool: NodePool,
    node_classes: Collection[str],
    used: Resources,
    readiness: Readiness | None = None,
) -> dict[str, Any]:
    """`used` per resource in units (cpu cores, memory in Mi/Gi), and the conditions. With
    `readiness` (a pool with `limits.unready`), `used.unready` is its unready instances as the
    lease's gate counts them: live leases whole, members until the sync marks them ready. A
    static pool's status also has `nodes` (Karpenter's): its instances, launching ones too."""
    shown = {
        dimension: format_amount(dimension, amount)
        for dimension, amount in used.amounts().items()
        if amount != Decimal(0)
    }
    if readiness is not None and readiness.unready:
        shown["unready"] = str(readiness.unready)
    conditions = pool_conditions(pool, node_classes, used, readiness)
    status: dict[str, Any] = {"used": shown, "conditions": [c.to_document() for c in conditions]}
    if pool.spec.replicas is not None:
        # Karpenter's status.nodes of a static pool: its instances, launching ones included.
        status["nodes"] = used.instances
    return status
