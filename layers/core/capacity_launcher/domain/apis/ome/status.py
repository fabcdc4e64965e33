"""A reservation's status in OME's shape, read from its CapacityQuota's
(domain/accounting/quota_status.py).

OME's associations are the launch requests associated with the reservation: each is counted as
requester ``capacityreservation/NAME/ASSOCIATION`` and shown here by its association name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity_launcher.domain.accounting.quota_status import (
    FLAVOR_NOT_FOUND,
    PRIORITY_CLASS_NOT_FOUND,
    READY,
    Condition,
)
from capacity_launcher.domain.apis.ome.associations import association_of

ACTIVE, CREATING, FAILED = "Active", "Creating", "Failed"
ASSOCIATIONS_HEALTHY = "DACAssociationsHealthy"


def reservation_status(name: str, quota_status: Mapping[str, Any]) -> dict[str, Any]:
    """OME's status of reservation ``name`` from its hub quota's stored or computed status."""
    conditions = list(quota_status.get("conditions", []))
    ready = next((c for c in conditions if c.get("type") == READY), None)
    status: dict[str, Any] = {
        "capacityReservationLifecycleState": _lifecycle(ready),
        "capacity": quota_status.get("capacity", []),
        "allocatable": quota_status.get("allocatable", []),
        "associationUsages": [
            {**usage, "name": association_of(name, usage["name"]) or usage["name"]}
            for usage in quota_status.get("associationUsages", [])
        ],
        "conditions": [*conditions, _associations_healthy(quota_status).to_document()],
    }
    for kept in ("cohort", "usage", "borrowed", "lent", "observedAt"):
        if kept in quota_status:
            status[kept] = quota_status[kept]
    return status


def _lifecycle(ready: Mapping[str, Any] | None) -> str:
    if ready is None or ready.get("status") == "True":
        return ACTIVE if ready is not None else CREATING
    waiting = ready.get("reason") in (FLAVOR_NOT_FOUND, PRIORITY_CLASS_NOT_FOUND)
    return CREATING if waiting else FAILED


def _associations_healthy(quota_status: Mapping[str, Any]) -> Condition:
    """False while associations run on borrowed quota, which its lenders may reclaim."""
    borrowed = [
        f"{flavor['name']}/{resource['name']} {resource['total']}"
        for flavor in quota_status.get("borrowed", [])
        for resource in flavor.get("resources", [])
        if resource.get("total") != "0"
    ]
    if borrowed:
        return Condition(
            ASSOCIATIONS_HEALTHY,
            False,
            "AssociationsBorrowing",
            f"associations run on borrowed quota ({', '.join(borrowed)}); lenders may reclaim it",
        )
    return Condition(
        ASSOCIATIONS_HEALTHY,
        True,
        "AllAssociationsWithinQuota",
        "every association runs within the reservation's nominal quota",
    )
