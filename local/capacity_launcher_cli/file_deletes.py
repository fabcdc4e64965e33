"""`delete -f FILE_OR_FOLDER`: every object the files' documents apply, deleted as `kubectl delete
-f` deletes them: each one `deleted`, each one not stored kubectl's NotFound line (no error with
`--ignore-not-found`), the others still deleted, and exit 1 when any was not.

A document is read as apply reads it (any served version, a `List`'s items, a Provisioner's
NodePool and NodeClass); one that no longer validates is still deleted by its kind and
`metadata.name`. Objects that name others go first (NodePools and CapacityQuotas, then
NodeClasses, then PriorityClasses), so a folder applied together deletes together: the service
refuses to delete a NodeClass a NodePool names, or a PriorityClass a reservation names.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from capacity_launcher.domain.apis.config import NODE_CLASS
from capacity_launcher.domain.apis.priority_classes import PRIORITY_CLASS
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import CapacityLauncherError, ConfigValidationError, NotFound
from capacity_launcher_cli import named
from capacity_launcher_cli.config_commands import SourceDocument, read_or_report
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.resource_types import lookup
from capacity_launcher_cli.service import configuration

# Deleted last: what others name.
_NAMED_BY_OTHERS = {PRIORITY_CLASS: 2, NODE_CLASS: 1}


@dataclass(frozen=True)
class Target:
    """One stored object a document stands for, and the document that named it."""

    kind: str
    name: str
    source: SourceDocument

    @property
    def plural(self) -> str:
        return lookup(self.kind).plural


def targets(source: SourceDocument) -> list[Target]:
    """The objects a document applies (its hubs), or, when it no longer validates, the one its
    kind and name say; ConfigValidationError when neither can be told."""
    try:
        hubs: tuple[Any, ...] = REGISTRY.read(source.data).conversion.hubs
        return [Target(hub.kind, hub.name, source) for hub in hubs]
    except ConfigValidationError:
        data = source.data if isinstance(source.data, dict) else {}
        version = REGISTRY.version(str(data.get("apiVersion")), str(data.get("kind")))
        name = (data.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise
        return [Target(version.hub_kind, name, source)]


def delete_files(args: argparse.Namespace, deployment: Deployment) -> int:
    sources = read_or_report(args.filename, args.recursive)
    if sources is None:
        return 1
    code = 0
    found: dict[tuple[str, str], Target] = {}
    for source in sources:
        try:
            for target in targets(source):
                found.setdefault((target.kind, target.name), target)
        except ConfigValidationError as error:
            print(f"error: {source.where}: {error.errors[0]}", file=sys.stderr)
            code = 1
    changes = configuration(deployment)
    for target in sorted(found.values(), key=lambda t: _NAMED_BY_OTHERS.get(t.kind, 0)):
        try:
            changes.delete(target.kind, target.name)
        except NotFound:
            if not args.ignore_not_found:
                print(
                    named.not_found(target.plural, target.name, target.source.path),
                    file=sys.stderr,
                )
                code = named.EXIT_NOT_FOUND
            continue
        except CapacityLauncherError as error:
            print(f"error: {target.source.where}: {error}", file=sys.stderr)
            code = 1
            continue
        print(f"{target.kind.lower()}/{target.name} deleted")
    return code
