"""`get KIND [NAME] -o yaml|json --output-version V` and `convert -f FILE --output-version V`:
stored documents read in any served version of their kind, as `kubectl get` and `kubectl
convert` do (docs/api-versions.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from capacity_launcher.domain.apis.config import CAPACITY_QUOTA, NODE_CLASS, NODE_POOL
from capacity_launcher.domain.apis.documents import StoredDocument
from capacity_launcher.domain.apis.kept_fields import Kept
from capacity_launcher.domain.apis.priority_classes import PriorityTable
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import CapacityLauncherError, ConfigValidationError, NotFound
from capacity_launcher_cli import named, views
from capacity_launcher_cli.config_commands import read_or_report
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.karpenter_commands import ec2nodeclass_status_of, nodepool_status_of
from capacity_launcher_cli.label_selectors import matches, requirements_of, stored_labels
from capacity_launcher_cli.service import queries

StatusOf = Callable[[StoredDocument], dict[str, Any]]


@dataclass(frozen=True)
class Resource:
    """A name `get` accepts: the hub kind it reads, the version it prints by default, and the
    status shown beside each document."""

    hub_kind: str
    api_version: str
    status: Callable[[Deployment], StatusOf] | None = None


_HUB = "capacity-launcher/v1"
RESOURCES: dict[str, Resource] = {
    "nodepools": Resource(NODE_POOL, _HUB, nodepool_status_of),
    "nodeclasses": Resource(NODE_CLASS, _HUB, ec2nodeclass_status_of),
    "ec2nodeclasses": Resource(NODE_CLASS, "karpenter.k8s.aws/v1", ec2nodeclass_status_of),
    "capacityquotas": Resource(CAPACITY_QUOTA, _HUB),
}
# Singular forms, as kubectl accepts them.
ALIASES = {
    "nodepool": "nodepools",
    "nodeclass": "nodeclasses",
    "ec2nodeclass": "ec2nodeclasses",
    "capacityquota": "capacityquotas",
}


def resource(name: str) -> Resource | None:
    return RESOURCES.get(ALIASES.get(name, name))


def not_acted_on(kept: Kept | None) -> dict[str, Any]:
    """The stored object's report of what its apply kept but capacity-launcher does not act on."""
    if not kept or not kept.not_acted_on:
        return {}
    return {"notActedOn": list(kept.not_acted_on)}


def as_version(
    stored: StoredDocument,
    api_version: str,
    status: dict[str, Any] | None = None,
    references: PriorityTable | None = None,
) -> dict[str, Any]:
    """A stored document in the served version ``api_version`` of its kind, with its status
    (``references``: the PriorityClasses an OME reservation's priority resolves in)."""
    version = REGISTRY.version_for(stored.document.kind, api_version)
    document = REGISTRY.convert(
        stored.document, stored.kept, version.api_version, version.kind, references
    )
    found = {**(status or {}), **not_acted_on(stored.kept)}
    return {**document, "status": found} if found else document


def get_documents(args: argparse.Namespace, deployment: Deployment) -> int:
    """Documents of one kind (or one by name) in the version asked for (or the resource's)."""
    found = resource(args.resource)
    assert found is not None
    status_of = found.status(deployment) if found.status else None
    api_version = args.output_version or found.api_version
    asked = queries(deployment)
    store = asked.config
    try:
        REGISTRY.version_for(found.hub_kind, api_version)
        if args.name:
            stored = [store.stored(found.hub_kind, args.name)]
        else:
            stored = store.stored_all(found.hub_kind)
    except NotFound:
        return named.report_missing(args, [args.name])
    except ConfigValidationError as error:
        print(f"error: {args.resource}: {error.errors[0]}", file=sys.stderr)
        return 1
    selector = requirements_of(args)
    stored = [s for s in stored if matches(stored_labels(s), selector)]
    table = asked.priority_classes.table() if found.hub_kind == CAPACITY_QUOTA else None
    items = [as_version(s, api_version, status_of(s) if status_of else None, table) for s in stored]
    views.emit(items[0] if args.name else items, args)
    return 0


def convert(args: argparse.Namespace) -> int:
    """Each document of the files in the served version ``--output-version`` of its kind."""
    sources = read_or_report(args.filename, args.recursive)
    if sources is None:
        return 1
    converted: list[dict[str, Any]] = []
    failed = False
    for source in sources:
        try:
            applied = REGISTRY.read(source.data)
            converted += _converted(applied.conversion.hubs, applied.conversion.kept, args)
        except (ConfigValidationError, CapacityLauncherError) as error:
            errors = getattr(error, "errors", None) or []
            for problem in errors or [error]:
                print(f"error: {source.where}: {problem}", file=sys.stderr)
            failed = True
    if failed:
        return 1
    if args.output == "json":
        views.print_json(converted[0] if len(converted) == 1 else converted)
    else:
        sys.stdout.write(yaml.safe_dump_all(converted, sort_keys=False, allow_unicode=True))
    return 0


def _converted(hubs: tuple[Any, ...], kept: Kept, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The primary hub in the version asked for; any other hub in that version if its kind has
    one there, else as its hub."""
    primary = REGISTRY.version_for(hubs[0].kind, args.output_version)
    documents = [REGISTRY.convert(hubs[0], kept or None, primary.api_version, primary.kind)]
    for hub in hubs[1:]:
        try:
            target = REGISTRY.version_for(hub.kind, args.output_version)
        except ConfigValidationError:
            target = REGISTRY.hub_version(hub.kind)
        documents.append(REGISTRY.convert(hub, None, target.api_version, target.kind))
    return documents
