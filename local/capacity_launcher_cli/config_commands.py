"""apply, get and delete for NodeClass, NodePool and CapacityQuota documents, as kubectl does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from capacity_launcher.domain.apis.api_versions import Applied
from capacity_launcher.domain.apis.config import NODE_CLASS, NodeClass, NodePool
from capacity_launcher.domain.apis.documents import InvalidDocument
from capacity_launcher.domain.apis.documents import to_document as config_document
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_PATH, Kept
from capacity_launcher.domain.apis.kueue.cohorts import COHORT, Cohort
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
    PriorityTable,
    parse_priority_class,
    priority_table,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import CapacityLauncherError, ConfigValidationError, NotFound
from capacity_launcher.domain.field_errors import FieldError
from capacity_launcher.service.configuration import conflicts_among
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import requirements_of, selected_names
from capacity_launcher_cli.output_formats import TABLES
from capacity_launcher_cli.resource_types import lookup
from capacity_launcher_cli.service import configuration, queries

if TYPE_CHECKING:
    from capacity_launcher.service.queries import Queries
from capacity_launcher_cli.yaml_documents import (
    DuplicateKey,
    TooLarge,
    load_documents,
    read_bounded,
)

KINDS = {
    "nodepool": "NodePool",
    "nodeclass": "NodeClass",
    "capacityquota": "CapacityQuota",
    "priorityclass": PRIORITY_CLASS,
    "cohort": COHORT,
}
_YAML_SUFFIXES = (".yaml", ".yml")
# `-f -`: standard input, named so in errors.
STDIN = Path("<stdin>")


@dataclass(frozen=True)
class SourceDocument:
    """One document of one file, remembered so that errors can say where it came from."""

    path: Path
    index: int  # 1-based, as people count documents in a file
    data: Any

    @property
    def where(self) -> str:
        name = self.data.get("metadata", {}).get("name") if isinstance(self.data, dict) else None
        kind = self.data.get("kind") if isinstance(self.data, dict) else None
        label = f"{kind} {name}" if kind and name else (kind or "document")
        return f"{self.path}: document {self.index} ({label})"


class ApplyError(Exception):
    """Files that cannot be applied; every problem found is listed, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def _files(paths: list[str], recursive: bool = False) -> Iterator[Path]:
    """Each path's files: a folder's YAML files (and, `recursive`, its subfolders', as kubectl's
    -R reads them), in name order."""
    for raw in paths:
        if raw == "-":
            yield STDIN
            continue
        path = Path(raw)
        if path.is_dir():
            found = path.rglob("*") if recursive else path.iterdir()
            yield from sorted(p for p in found if p.suffix in _YAML_SUFFIXES and p.is_file())
        else:
            yield path


def _text(path: Path) -> str:
    """The file's text, bounded (MAX_FILE_BYTES); `-f -` reads standard input, as kubectl does."""
    if path == STDIN:
        return read_bounded(sys.stdin)
    with path.open(encoding="utf-8") as file:
        return read_bounded(file)


def list_items(data: Any) -> list[Any]:
    """A `kind: List` (what `get -o yaml|json` prints for several objects) stands for each of its
    items, as kubectl applies one; any other document stands for itself."""
    items = data.get("items") if isinstance(data, dict) and data.get("kind") == "List" else None
    if isinstance(items, list):
        return [item for item in items if item is not None]
    return [data]


def read_documents(paths: list[str], recursive: bool = False) -> list[SourceDocument]:
    documents: list[SourceDocument] = []
    problems: list[str] = []
    for path in _files(paths, recursive):
        try:
            loaded = load_documents(_text(path))
        except OSError as error:
            problems.append(f"{path}: cannot read: {error.strerror or error}")
            continue
        except TooLarge as error:
            problems.append(f"{path}: {error}")
            continue
        except DuplicateKey as error:
            problems.append(f"{path}: {error}")
            continue
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            problems.append(f"{path}: not valid YAML: {error}")
            continue
        except RecursionError:
            problems.append(f"{path}: not valid YAML: nested too deeply")
            continue
        documents += [
            SourceDocument(path, i, item)
            for i, data in enumerate(loaded, start=1)
            if data is not None
            for item in list_items(data)
        ]
    if problems:
        raise ApplyError(problems)
    if not documents:  # an empty file (or folder) would apply nothing and say nothing
        hint = "" if recursive else _nested_hint(paths)
        raise ApplyError([f"{', '.join(paths)}: no documents to apply{hint}"])
    return documents


def _nested_hint(paths: list[str]) -> str:
    """A folder whose YAML files are all in its subfolders (examples/karpenter, say) read without
    -R: which subfolders hold them, and the flag that reads them."""
    if any(path == "-" or not Path(path).is_dir() for path in paths):
        return ""
    nested = sorted(
        {
            str(found.parent)
            for path in paths
            for found in Path(path).rglob("*")
            if found.suffix in _YAML_SUFFIXES and found.is_file()
        }
    )
    if not nested:
        return ""
    return f" (its subfolders {', '.join(nested)} have YAML files: pass -R to read them)"


def read_or_report(paths: list[str], recursive: bool = False) -> list[SourceDocument] | None:
    """The files' documents; None when they cannot be read, each problem said on stderr."""
    try:
        return read_documents(paths, recursive)
    except ApplyError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return None


Hub = NodeClass | NodePool | CapacityQuota | PriorityClass | Cohort


@dataclass(frozen=True)
class Step:
    """One hub document to store, from one file document, with what its apply kept."""

    source: SourceDocument
    applied: Applied
    document: Hub
    kept: Kept | None
    primary: bool = True  # the document's first hub (a Provisioner's NodePool, not its class)


def validate(documents: list[SourceDocument]) -> list[Hub]:
    """Every document converted to its hub, or an ApplyError naming file, document and field."""
    return [step.document for step in validate_steps(documents)]


def priority_references(
    documents: list[SourceDocument], stored: list[PriorityClass]
) -> PriorityTable:
    """The PriorityClasses a reservation may name: the stored ones and those applied with it."""
    classes = {c.name: c for c in stored}
    for document in documents:
        if isinstance(document.data, dict) and document.data.get("kind") == PRIORITY_CLASS:
            try:
                found = parse_priority_class(document.data)
            except ConfigValidationError:
                continue  # reported when the document itself is read
            classes[found.name] = found
    return priority_table(classes.values())


def _order(step: Step) -> int:
    """PriorityClasses, then NodeClasses, then the rest: a file may list a pool before the class
    it names, or a reservation before its PriorityClass."""
    return {PRIORITY_CLASS: 0, NODE_CLASS: 1}.get(step.document.kind, 2)


def validate_steps(
    documents: list[SourceDocument], references: PriorityTable | None = None
) -> list[Step]:
    """Each document of any served version converted to the hub documents to store, in order
    (``references``: the PriorityClasses reservations resolve in; none: offline, unresolved)."""
    steps: list[Step] = []
    problems: list[str] = []
    for document in documents:
        try:
            applied = REGISTRY.read(document.data, references)
        except ConfigValidationError as error:
            problems += [_problem(document, e) for e in error.errors]
            continue
        kept = applied.conversion.kept or None
        for index, hub in enumerate(applied.conversion.hubs):
            primary = index == 0
            steps.append(Step(document, applied, hub, kept if primary else None, primary))
    problems += _applied_twice(steps)
    # Documents applied together are checked together too (the stores check each against the
    # rest).
    problems += conflicts_among(s.document for s in steps)
    if problems:
        raise ApplyError(problems)
    return sorted(steps, key=_order)


def _applied_twice(steps: list[Step]) -> list[str]:
    """One object set by two documents of one apply: refused naming both (YAML's and kubectl's
    last-wins would store the second and silently drop the first)."""
    first: dict[tuple[str, str], Step] = {}
    problems = []
    for step in steps:
        key = (step.document.kind, step.document.name)
        earlier = first.setdefault(key, step)
        if earlier is not step:
            problems.append(
                f"{step.source.where}: {key[0]} {key[1]} is also set by "
                f"{earlier.source.where}: one apply sets each object once"
            )
    return problems


def _problem(document: SourceDocument, error: FieldError) -> str:
    return f"{document.where}: {error.field}: {error.rule}"


def _before(asked: Queries, document: Hub) -> tuple[object, Kept | None] | None:
    """The object as stored before this apply, with what its apply kept (None: not stored)."""
    try:
        if document.kind == PRIORITY_CLASS:
            return asked.priority_classes.priority_class(document.name), None
        if document.kind == COHORT:
            return asked.config.cohorts().cohort(document.name), None
        stored = asked.config.stored(document.kind, document.name)
    except NotFound:
        return None
    except CapacityLauncherError:  # stored but no longer valid: this apply replaces it
        return _INVALID, None
    return stored.document, stored.kept


_INVALID = object()


def change_word(before: tuple[object, Kept | None] | None, step: Step) -> str:
    """kubectl's word for what an apply did to one object: created, configured or unchanged."""
    if before is None:
        return "created"
    if before == (step.document, step.kept):
        return "unchanged"
    return "configured"


def unserved(document: SourceDocument) -> str | None:
    """Why a document of a kind no version here serves is skipped (kubectl's "no matches for
    kind"), or None: a served kind, or one that is not a document of a kind at all, is read
    (and refused there when wrong)."""
    data = document.data
    if not isinstance(data, dict):
        return None
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str):
        return None
    try:
        REGISTRY.version(api_version, kind)
    except ConfigValidationError as error:
        if error.errors[0].field == "kind":
            return (
                f"{document.where}: skipped: no kind {kind!r} is served here "
                f"({error.errors[0].rule}); the other documents are applied"
            )
    return None


def served(found: list[SourceDocument]) -> tuple[list[SourceDocument], list[str]]:
    """The documents of kinds served here, and why each other one is skipped."""
    judged = [(document, unserved(document)) for document in found]
    return [d for d, why in judged if why is None], [why for _, why in judged if why is not None]


def apply(args: argparse.Namespace, deployment: Deployment) -> int:
    changes = configuration(deployment)
    asked = queries(deployment)
    try:
        documents, skipped = served(read_documents(args.filename, args.recursive))
        for why in skipped:
            print(f"error: {why}", file=sys.stderr)
        steps = validate_steps(
            documents, priority_references(documents, changes.stored_priority_classes())
        )
    except ApplyError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    for warning in dict.fromkeys(w for s in steps for w in s.applied.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    dry_run = getattr(args, "dry_run", "none")
    for index, step in enumerate(steps):
        document = step.document
        try:
            word = change_word(_before(asked, document), step)
            waiting: list[FieldError] = []
            if dry_run == "server":  # the service's checks, nothing written
                earlier = (s.document for s in steps[:index])
                waiting = changes.check(document, step.kept, earlier)
            elif dry_run == "none":
                waiting = changes.apply(document, step.kept)
        except CapacityLauncherError as error:
            # The store's refusals (a quota conflict, a class's value changed) say where, too.
            print(f"error: {step.source.where}: {_without_name(document, error)}", file=sys.stderr)
            return 1
        print(
            f"{document.kind.lower()}/{document.name} {word}{_as_written(step)}"
            f"{DRY_RUN_SUFFIX[dry_run]}"
        )
        for path in step.kept.not_acted_on if step.kept else ():
            print(f"  {path}: kept, not acted on")
        for path in step.applied.hub_fields if step.primary else ():
            print(f"  {path}: set by {HUB_FIELDS_PATH}, not in the document's own fields")
        for missing in waiting:
            # Applied all the same, as Kubernetes does; its status says so until it is not.
            print(
                f"warning: {document.kind.lower()}/{document.name}: {missing.field}: "
                f"{missing.rule}",
                file=sys.stderr,
            )
    # kubectl's exit for a file with a kind it does not know: the rest applied, and 1.
    return 1 if skipped else 0


# kubectl's words after each object of `apply --dry-run=client|server`.
DRY_RUN_SUFFIX = {"none": "", "client": " (dry run)", "server": " (server dry run)"}


def _as_written(step: Step) -> str:
    """`` (as karpenter.sh/v1 NodePool)`` when the document was not written as its hub."""
    version = step.applied.version
    return "" if version is REGISTRY.hub_version(version.hub_kind) else f" (as {version.label})"


def _without_name(document: Hub, error: Exception) -> str:
    """The store's message without its own `Kind name: ` lead, which `where` already says."""
    message = str(error)
    return message.removeprefix(f"{document.kind} {document.name}: ")


def get_config(args: argparse.Namespace, deployment: Deployment) -> int:
    """NodePools or NodeClasses as a table (one NAME: its row, as kubectl prints one), or as
    documents (-o json|name|jsonpath of a listing)."""
    asked = queries(deployment)
    store = asked.config
    classes_asked = args.resource in ("nodeclasses", "ec2nodeclasses")
    kind = "NodeClass" if classes_asked else "NodePool"
    # Stored documents that no longer parse are listed as invalid, never fatal to the listing.
    invalid = named.chosen(args, asked.invalid(kind), lambda d: d.name)
    invalid_json = [
        {"kind": d.kind, "metadata": {"name": d.name}, "status": {"invalid": d.reason}}
        for d in invalid
    ]
    names = selected_names(store, kind, requirements_of(args))
    if classes_asked:
        classes = [c for c in store.node_classes() if names is None or c.name in names]
        classes = named.chosen(args, classes, lambda c: c.name)
        found = [c.name for c in classes]
        items = [*(config_document(c) for c in classes), *invalid_json]
        table = views.node_classes(classes)
    else:
        pools, statuses = asked.pool_statuses()
        pools = [p for p in pools if names is None or p.name in names]
        pools = named.chosen(args, pools, lambda p: p.name)
        found = [p.name for p in pools]
        items = [
            *({**config_document(p), "status": statuses[p.name]} for p in pools),
            *invalid_json,
        ]
        table = views.node_pools(pools, statuses)
    missing = named.missing_from(args, [*found, *(d.name for d in invalid)])
    code = named.answer(args, missing, lambda: items, lambda: table)
    if args.output in TABLES:
        _warn_invalid(invalid)
    return code


def _warn_invalid(invalid: list[InvalidDocument]) -> None:
    for document in invalid:
        print(
            f"warning: {document.kind} {document.name} is stored but invalid "
            f"(re-apply or delete it): {document.reason}",
            file=sys.stderr,
        )


def delete(args: argparse.Namespace, deployment: Deployment) -> int:
    kind = KINDS[args.kind]
    try:
        configuration(deployment).delete(kind, args.name)
    except NotFound:
        if args.ignore_not_found:
            return 0
        print(named.not_found(lookup(args.kind).plural, args.name), file=sys.stderr)
        return named.EXIT_NOT_FOUND
    except CapacityLauncherError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{args.kind}/{args.name} deleted")
    return 0
