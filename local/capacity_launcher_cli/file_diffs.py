"""`diff -f FILE_OR_FOLDER`: what `apply -f` would change, as `kubectl diff` shows it.

Each object the files apply is checked as `apply --dry-run=server` checks it (the documents
here, then the service's checks against what is stored, nothing written), then printed twice in
the version it was written in, keys sorted: as stored now (LIVE, empty when it is not stored)
and as the apply would store it (MERGED), without status; a unified diff of the two is printed
for each object that would change. Exit 0 when none would, 1 when some would, 2 when the files
or the service refuse them (kubectl's and diff's convention: above 1 is an error).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING, Any

import yaml

from capacity_launcher.domain.apis.api_versions import ServedVersion
from capacity_launcher.domain.apis.kueue.cohorts import COHORT
from capacity_launcher.domain.apis.priority_classes import PRIORITY_CLASS, PriorityTable
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import CapacityLauncherError, NotFound
from capacity_launcher_cli.config_commands import (
    ApplyError,
    Step,
    priority_references,
    read_or_report,
    validate_steps,
)
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.service import configuration, queries

if TYPE_CHECKING:
    from capacity_launcher.service.queries import Queries

DIFFERENT = 1
FAILED = 2


def diff(args: argparse.Namespace, deployment: Deployment) -> int:
    sources = read_or_report(args.filename, args.recursive)
    if sources is None:
        return FAILED
    changes = configuration(deployment)
    references = priority_references(sources, changes.stored_priority_classes())
    try:
        steps = validate_steps(sources, references)
    except ApplyError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return FAILED
    asked = queries(deployment)
    stored_references = asked.priority_classes.table()
    differs = False
    for index, step in enumerate(steps):
        try:
            changes.check(step.document, step.kept, (s.document for s in steps[:index]))
        except CapacityLauncherError as error:
            print(f"error: {step.source.where}: {error}", file=sys.stderr)
            return FAILED
        version = _version(step)
        merged = _yaml(
            REGISTRY.convert(
                step.document, step.kept, version.api_version, version.kind, references
            )
        )
        live = _live(asked, step, version, stored_references)
        name = f"{version.api_version.replace('/', '.')}.{version.kind}.{step.document.name}"
        lines = list(
            difflib.unified_diff(
                live.splitlines(keepends=True),
                merged.splitlines(keepends=True),
                f"LIVE/{name}",
                f"MERGED/{name}",
            )
        )
        if lines:
            differs = True
            sys.stdout.write(f"diff -u -N LIVE/{name} MERGED/{name}\n")
            sys.stdout.writelines(lines)
    return DIFFERENT if differs else 0


def _version(step: Step) -> ServedVersion:
    """The version the object was written in (a Provisioner's NodeClass: its hub's)."""
    if step.primary:
        return step.applied.version
    return REGISTRY.hub_version(step.document.kind)


def _live(asked: Queries, step: Step, version: ServedVersion, references: PriorityTable) -> str:
    """The object as stored now, in ``version``, without status ("" when it is not stored)."""
    document = step.document
    try:
        if document.kind == PRIORITY_CLASS:
            stored: Any = asked.priority_classes.priority_class(document.name)
            kept = None
        elif document.kind == COHORT:
            stored, kept = asked.config.cohorts().cohort(document.name), None
        else:
            found = asked.config.stored(document.kind, document.name)
            stored, kept = found.document, found.kept
    except NotFound:
        return ""
    return _yaml(REGISTRY.convert(stored, kept, version.api_version, version.kind, references))


def _yaml(document: dict[str, Any]) -> str:
    """Keys sorted, as kubectl's diff prints objects: a mapping written in another order (a
    document's labels against the stored ones) is no difference."""
    return yaml.safe_dump(document, sort_keys=True, allow_unicode=True)
