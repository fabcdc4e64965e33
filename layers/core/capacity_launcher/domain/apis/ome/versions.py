"""OME's ome.io/v1beta1 CapacityReservation and ClusterCapacityReservation as served versions of
the CapacityQuota hub (docs/ome.md, docs/api-versions.md).

What the hub has no place for is kept by path: the namespace, labels, priorityClassName,
compartmentID, the preemption rule and the resource groups as written (their covered resources,
and each amount's spelling). Read back in the version it was applied in, a reservation is the
document as written; read from a CapacityQuota applied otherwise, it is built from the hub alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion, as_document
from capacity_launcher.domain.apis.config import CAPACITY_QUOTA
from capacity_launcher.domain.apis.kept_fields import Kept, put, take
from capacity_launcher.domain.apis.ome.reservations import (
    OME_API_VERSION,
    RESERVATION_KINDS,
    CapacityReservation,
    from_hub,
    parse_reservation,
    to_hub,
)
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS_NAME_PATH,
    PriorityTable,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota

KEPT_PATHS = (
    "metadata.namespace",
    "metadata.labels",
    "spec.priorityClassName",
    "spec.compartmentID",
    "spec.allowBorrowing",
    "spec.preemptionRule",
    "spec.resourceGroups",
)


def _document(reservation: CapacityReservation) -> dict[str, Any]:
    return as_document(reservation)


def _served(kind: str) -> ServedVersion:
    def to_version_hub(
        reservation: CapacityReservation, table: PriorityTable | None = None
    ) -> Conversion:
        if table is None:
            converted = to_hub(reservation)
            unacted_errors = converted.not_acted_on
        else:
            # A class not applied yet is waited for, not refused: the apply stores the
            # reservation with priority 0, waiting for it (domain/apis/references.py).
            converted = to_hub(reservation, table.values, table.default_value)
            unacted_errors = tuple(
                e for e in converted.not_acted_on if e.field != PRIORITY_CLASS_NAME_PATH
            )
        fields = take(_document(reservation), KEPT_PATHS)
        unacted = tuple(dict.fromkeys(e.field for e in unacted_errors))
        return Conversion((converted.quota,), Kept(OME_API_VERSION, kind, fields, unacted))

    def from_version_hub(hub: CapacityQuota, kept: Mapping[str, Any]) -> dict[str, Any]:
        written: dict[str, Any] = {
            "apiVersion": OME_API_VERSION,
            "kind": kind,
            "metadata": {"name": hub.name},
            "spec": {},
        }
        put(written, kept)
        if "resourceGroups" not in written["spec"]:
            written["spec"]["resourceGroups"] = [
                {
                    "coveredResources": group.covered_resources,
                    "flavors": [
                        {
                            "name": flavor.name,
                            "resources": [
                                {
                                    "name": term.name,
                                    "nominalQuota": term.model_dump(by_alias=True)["nominalQuota"],
                                }
                                for term in flavor.resources
                            ],
                        }
                        for flavor in group.flavors
                    ],
                }
                for group in hub.spec.resource_groups
            ]
        return _document(from_hub(hub, parse_reservation(written)))

    version = ServedVersion(
        OME_API_VERSION, kind, CAPACITY_QUOTA, parse_reservation, to_version_hub, from_version_hub
    )
    return replace(
        version,
        document=_document,
        model=CapacityReservation,
        to_hub_with=to_version_hub,
        hub_only=hub_only,
        # The two kinds have the same fields: one read as the other shows them all.
        kept_kinds=tuple(k for k in RESERVATION_KINDS if k != kind),
    )


def hub_only(reservation: CapacityReservation) -> frozenset[str]:
    """ServedVersion.hub_only: a reservation naming a priorityClassName says its priority (the
    class's value); naming none, the priority was the global default's when it was applied,
    which no field of the reservation holds. OME has no fair-sharing weight (Kueue's
    ClusterQueue `spec.fairSharing`): a hub's travels in the annotation. Every other hub field OME
    writes or cannot be read in it (ome_reservations.from_hub)."""
    fair = frozenset({"spec.fairSharing"})
    return fair if reservation.spec.priority_class_name else fair | {"spec.priority"}


def ome_versions() -> tuple[ServedVersion, ...]:
    """CapacityReservation and ClusterCapacityReservation, ome.io/v1beta1."""
    return tuple(_served(kind) for kind in RESERVATION_KINDS)
