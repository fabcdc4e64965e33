"""A NodePool's status: what it uses against its limits, in units, and the conditions Ready and
ResourcesSufficient, in the same shape as a CapacityQuota's (domain/quota_status.py)."""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from capacity_launcher.domain.config import NodePool
from capacity_launcher.domain.quantities import DIMENSIONS, Resources
from capacity_launcher.domain.quota_status import READY, RESOURCES_SUFFICIENT, Condition
from capacity_launcher.domain.quotas import format_amount


def pool_conditions(
    pool: NodePool, node_classes: Collection[str], used: Resources
) -> list[Condition]:
    """Ready: its NodeClass exists (a pool naming a missing one rejects every request).
    ResourcesSufficient: every limited resource has room for more."""
    ref = pool.spec.node_class_ref
    if ref in node_classes:
        ready = Condition(READY, True, "NodeClassFound", f"NodeClass {ref} is applied")
    else:
        ready = Condition(
            READY,
            False,
            "NodeClassNotFound",
            f"NodeClass {ref} is not applied: requests for this pool are rejected",
        )
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
        sufficient = Condition(
            RESOURCES_SUFFICIENT,
            False,
            "LimitReached",
            f"nothing more launches until instances end: {', '.join(full)}",
        )
    elif limits is None or limits.is_unlimited():
        sufficient = Condition(RESOURCES_SUFFICIENT, True, "Unlimited", "the pool sets no limits")
    else:
        sufficient = Condition(
            RESOURCES_SUFFICIENT, True, "CapacityAvailable", "every limited resource has room"
        )
    return [ready, sufficient]


def pool_status(pool: NodePool, node_classes: Collection[str], used: Resources) -> dict[str, Any]:
    """`used` per resource in units (cpu cores, memory in Mi/Gi), and the conditions."""
    return {
        "used": {
            dimension: format_amount(dimension, amount)
            for dimension, amount in used.amounts().items()
            if amount != Decimal(0)
        },
        "conditions": [c.to_document() for c in pool_conditions(pool, node_classes, used)],
    }
