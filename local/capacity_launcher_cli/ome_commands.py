"""`get capacityreservation[s] [NAME]` and `get clustercapacityreservation[s] [NAME]`: OME's
reservations as applied, with their status in OME's shape (docs/ome.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.apis.api_versions import ServedVersion
from capacity_launcher.domain.apis.config import CAPACITY_QUOTA
from capacity_launcher.domain.apis.documents import StoredDocument
from capacity_launcher.domain.apis.ome.reservations import (
    CAPACITY_RESERVATION,
    CLUSTER_CAPACITY_RESERVATION,
    OME_API_VERSION,
)
from capacity_launcher.domain.apis.ome.status import reservation_status
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError, NotFound
from capacity_launcher_cli import named
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import matches, requirements_of, stored_labels
from capacity_launcher_cli.service import queries
from capacity_launcher_cli.version_commands import not_acted_on
from capacity_launcher_cli.views import emit

if TYPE_CHECKING:
    from capacity_launcher.service.queries import Queries

RESOURCES = {
    "capacityreservations": CAPACITY_RESERVATION,
    "capacityreservation": CAPACITY_RESERVATION,
    "clustercapacityreservations": CLUSTER_CAPACITY_RESERVATION,
    "clustercapacityreservation": CLUSTER_CAPACITY_RESERVATION,
}


def _applied_as(stored: StoredDocument, kind: str) -> bool:
    return stored.kept is not None and stored.kept.is_for(OME_API_VERSION, kind)


def get_reservations(args: argparse.Namespace, deployment: Deployment) -> int:
    """Reservations of one kind (or one by name), as written, with OME's status."""
    kind = RESOURCES[args.resource]
    asked = queries(deployment)
    store = asked.config
    try:
        if args.name:
            found = [store.stored("CapacityQuota", args.name)]
            if not _applied_as(found[0], kind):
                raise NotFound(kind, args.name)
        else:
            selector = requirements_of(args)
            found = [
                s
                for s in store.stored_all("CapacityQuota")
                if _applied_as(s, kind) and matches(stored_labels(s), selector)
            ]
        version = (
            REGISTRY.version_for(CAPACITY_QUOTA, args.output_version)
            if args.output_version
            else REGISTRY.version(OME_API_VERSION, kind)
        )
    except NotFound:
        return named.report_missing(args, [args.name])
    except ConfigValidationError as error:
        print(f"error: {args.resource}: {error}", file=sys.stderr)
        return 1
    items = shown(asked, found, version)
    emit(items[0] if args.name else items, args)
    return 0


def shown(asked: Queries, found: list[StoredDocument], version: ServedVersion) -> list[Any]:
    """Each reservation as written in `version`, with OME's status and what is not acted on."""
    statuses = asked.quota_status_of()
    table = asked.priority_classes.table()
    items = []
    for stored in found:
        document = REGISTRY.convert(
            stored.document, stored.kept, version.api_version, version.kind, table
        )
        status: dict[str, Any] = reservation_status(
            stored.document.name, statuses[stored.document.name]
        )
        items.append({**document, "status": {**status, **not_acted_on(stored.kept)}})
    return items


def one(deployment: Deployment, resource: str, name: str) -> dict[str, Any]:
    """One reservation of the kind `resource` names, as `get RESOURCE NAME` shows it (NotFound
    when no reservation of that kind has that name)."""
    kind = RESOURCES[resource]
    asked = queries(deployment)
    stored = asked.config.stored("CapacityQuota", name)
    if not _applied_as(stored, kind):
        raise NotFound(kind, name)
    (item,) = shown(asked, [stored], REGISTRY.version(OME_API_VERSION, kind))
    return dict(item)
