"""Issue 26: every document the simulation applies is written in one of its kind's served
versions, drawn from the seed, and applied through the CLI's own `apply` path.

The simulation decides a hub document (`capacity-launcher/v1`); `written_as` draws a served
version of its kind (uniformly, from a stream of its own so the run's other draws stay those of
the seed), converts the hub to it with the registry's `convert` (what `get --output-version`
does), and `apply_as_written` applies that document as the CLI does (`validate_steps`, then the
store's `apply` of each hub with what its apply kept). A version that cannot express the hub
(the converter refuses, the document it writes does not read back, or reads back as more than
the one hub meant, like a Provisioner's NodeClass) is counted and another is drawn; the hub
version always can. `stored_as_meant` is the invariant: the hub the service reads is the hub the
simulation meant.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capacity_launcher.adapters.priority_class_store import PriorityClassStore
from capacity_launcher.domain.apis.documents import parse_document, to_document
from capacity_launcher.domain.apis.priority_classes import PriorityClass
from capacity_launcher.domain.apis.served_versions import HUB_API_VERSION, REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.service.configuration import Configuration
from capacity_launcher_cli.config_commands import (
    ApplyError,
    SourceDocument,
    priority_references,
    validate_steps,
)

SOURCE = Path("simulation")


@dataclass(frozen=True)
class Written:
    """A hub document as written in a served version, and the versions that could not say it."""

    label: str
    document: dict[str, Any]
    refused: tuple[tuple[str, str], ...] = ()  # (version label, why)


@dataclass
class VersionCounts:
    """What the run's report says about versions: documents applied and refusals, by version."""

    written: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    hub_fields: Counter[str] = field(default_factory=Counter)  # carried in the annotation

    def note(self, written: Written) -> None:
        self.written[written.label] += 1
        for label, why in written.refused:
            self.refused[f"{label}: {why}"] += 1
        annotations = written.document.get("metadata", {}).get("annotations", {})
        if "capacity-launcher/hub-fields" in annotations:
            self.hub_fields[written.label] += 1


def version_stream(seed: int) -> random.Random:
    """The draws of versions, apart from the run's own generator (a str seed is hashed by
    SHA-512, not by Python's randomised hash)."""
    return random.Random(f"served-versions:{seed}")


def written_as(hub: dict[str, Any], rng: random.Random) -> Written:
    """``hub`` in a served version of its kind drawn by ``rng``: the first that can express it.

    A document that is not a valid hub (the simulation's invalid documents) is written as it is:
    no version can say it, and the apply must refuse it."""
    try:
        model = parse_document(hub)
    except ConfigValidationError:
        return Written(f"{HUB_API_VERSION} {hub.get('kind')}", hub)
    candidates = REGISTRY.served_for(model.kind)
    refused: list[tuple[str, str]] = []
    while candidates:
        version = candidates.pop(rng.randrange(len(candidates)))
        why = _in_version(model, version.api_version, version.kind)
        if isinstance(why, dict):
            return Written(version.label, why, tuple(refused))
        refused.append((version.label, why))
    raise AssertionError(f"no served version expresses {model.kind} {model.name}: {refused}")


def _in_version(model: Any, api_version: str, kind: str) -> dict[str, Any] | str:
    """The document of the version, or why the version cannot express the hub."""
    try:
        document = REGISTRY.convert(model, None, api_version, kind)
    except ConfigValidationError as error:
        return f"convert refused ({error.errors[0].field})"
    try:
        steps = validate_steps([SourceDocument(SOURCE, 1, document)])
    except ApplyError:
        return "its document does not read back"
    if len(steps) != 1:
        return f"reads back as {len(steps)} hubs"
    return document


def apply_as_written(
    store: Configuration, document: dict[str, Any], classes: PriorityClassStore | None = None
) -> None:
    """What `capacity-launcher apply -f` does with one document: read it (any served version),
    then store each hub with what its apply kept. Raises what the CLI would report. With
    `classes`, as the CLI does: reservations resolve `priorityClassName` in the stored
    PriorityClasses, and a PriorityClass is stored there."""
    sources = [SourceDocument(SOURCE, 1, document)]
    references = None
    if classes is not None:
        references = priority_references(sources, classes.priority_classes())
    for step in validate_steps(sources, references):
        assert classes is not None or not isinstance(step.document, PriorityClass), (
            "a PriorityClass is applied with the classes resolved"
        )
        store.apply(step.document, step.kept)


def stored_as_meant(meant: dict[str, Any], stored: str | None) -> str | None:
    """Why the stored hub (the state table's `document`, as the service reads it) is not the hub
    meant, or None when it is."""
    if stored is None:
        return "nothing stored"
    try:
        read = to_document(parse_document(json.loads(stored)))
    except (ValueError, ConfigValidationError) as error:
        return f"the stored document does not parse: {error}"
    wanted = to_document(parse_document(meant))
    if read == wanted:
        return None
    mine, theirs = read.get("spec", {}), wanted.get("spec", {})
    paths = [f"spec.{k}" for k in sorted({*mine, *theirs}) if mine.get(k) != theirs.get(k)]
    if read.get("metadata") != wanted.get("metadata"):
        paths.insert(0, "metadata")
    return "differs at " + ", ".join(paths)
