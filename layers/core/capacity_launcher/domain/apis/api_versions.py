"""Served API versions of the configuration kinds, converted through each kind's hub version.

As in Kubernetes, a kind may be written in several served versions (``apiVersion`` + ``kind``),
and one of them, the hub (storage) version, is what is stored and what the service reads. The
hubs are today's ``capacity-launcher/v1`` kinds. Every served version registers how to

- ``parse`` a document of that version (every broken rule named by document path),
- convert it ``to_hub``: one or more hub documents (the primary first, under the document's name)
  and the ``Kept`` fields the hub has no place for,
- convert a hub document (with what was kept) back ``from_hub``, as a document of the version.

Nothing a document says is dropped: the fields the hub cannot hold are kept, by their path in the
document as applied, and given back when the object is read in the version it was applied in.
Read in another version, they travel in the annotation ``KEPT_ANNOTATION`` (JSON), which a later
apply of that document turns back into kept fields: Kubernetes' way of making conversions lossless.

The other way round, the hub fields a version has no place for (its ``hub_only`` paths) travel in
``HUB_FIELDS_ANNOTATION``. That annotation may set nothing else: a path the version expresses, or
any ``metadata``, would make the stored object other than the document a reviewer reads, so it is
refused; and an object applied with it must read back in the version it was applied in.

A deprecated version is still served and its use warns, naming its replacement; a version no
longer served is refused, naming the versions that are (docs/api-versions.md). The kept fields and
both annotations, read and written by path: domain/apis/kept_fields.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from capacity_launcher.domain.apis.kept_fields import (
    HUB_FIELDS_ANNOTATION,
    HUB_FIELDS_PATH,
    HUB_PATH_PREFIX,
    KEPT_PATH,
    Kept,
    annotate,
    differing,
    merged_kept,
    put,
    without_hub_fields,
    without_kept_annotation,
)
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, field_errors

# One document as JSON, counted before it is converted: a hub is stored in one state table item
# (400 KB) with its kept fields, so a larger document could never be stored (docs/cli.md).
MAX_DOCUMENT_BYTES = 256 * 1024
# What the server sets and `get` may print, and `apply` ignores as Kubernetes does for a kind with
# a status subresource: the object's status, and metadata only the server writes.
SERVER_METADATA = ("creationTimestamp", "generation", "resourceVersion", "uid", "managedFields")


@dataclass(frozen=True)
class Conversion:
    """A document converted to its hub: the hub documents (the primary first) and what was kept."""

    hubs: tuple[Any, ...]
    kept: Kept

    @property
    def hub(self) -> Any:
        return self.hubs[0]


def as_document(model: BaseModel) -> dict[str, Any]:
    """A version's model as its document: wire names, JSON types, unset fields left out."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def validated[Model: BaseModel](model: type[Model], data: Mapping[str, Any]) -> Model:
    """A document validated by its version's model; every error by document path."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as error:
        raise ConfigValidationError(field_errors(error)) from None


@dataclass(frozen=True)
class ServedVersion:
    """One served (apiVersion, kind): how to parse it and convert it to and from its hub.

    ``parse`` raises ConfigValidationError naming each field by document path; ``from_hub``
    returns the document (a JSON mapping) given the hub document and the kept fields of this
    version (empty when the object was applied in another one); ``document`` dumps a parsed
    model as its document. ``deprecated_by`` names the replacement (``"apiVersion Kind"``).
    """

    api_version: str
    kind: str
    hub_kind: str
    parse: Callable[[Mapping[str, Any]], Any]
    to_hub: Callable[[Any], Conversion]
    from_hub: Callable[[Any, Mapping[str, Any]], dict[str, Any]]
    deprecated_by: str | None = None
    document: Callable[[Any], dict[str, Any]] = as_document
    # The model whose JSON Schema describes this version (schemas/), when there is one.
    model: type | None = None
    # ``to_hub`` given what the document refers to (``read``'s and ``convert``'s ``references``:
    # an OME reservation's PriorityClass values), for versions whose hub depends on it.
    to_hub_with: Callable[[Any, Any], Conversion] | None = None
    # The hub paths (``spec.FIELD``) a parsed document of this version has no place for: the only
    # ones HUB_FIELDS_ANNOTATION may set on it (tests/unit/test_hub_fields.py checks each
    # version's against its conversion). A hub's: none, it expresses all of itself.
    hub_only: Callable[[Any], frozenset[str]] = field(default=lambda document: frozenset())
    # Other kinds of this apiVersion whose kept fields are this version's own: the same fields
    # at the same paths (OME's CapacityReservation and ClusterCapacityReservation). Read in this
    # version, an object applied as one of them shows its kept fields in the document, not in
    # KEPT_ANNOTATION (an apply of this version keeps its own fields, so the annotation would
    # be dropped and the document would not read back as applied).
    kept_kinds: tuple[str, ...] = ()

    def reads_kept(self, kept: Kept) -> bool:
        """Whether ``kept`` (of an apply in any version) is this version's own fields."""
        if kept.api_version != self.api_version:
            return False
        return kept.kind == self.kind or kept.kind in self.kept_kinds

    def converted(self, document: Any, references: Any = None) -> Conversion:
        if self.to_hub_with is not None and references is not None:
            return self.to_hub_with(document, references)
        return self.to_hub(document)

    @property
    def label(self) -> str:
        return f"{self.api_version} {self.kind}"

    def deprecation(self) -> str | None:
        if self.deprecated_by is None:
            return None
        return f"{self.label} is deprecated; use {self.deprecated_by}"


@dataclass(frozen=True)
class Applied:
    """One document read for apply: its served version, its conversion and any warnings."""

    version: ServedVersion
    conversion: Conversion
    warnings: tuple[str, ...] = ()
    # The hub paths HUB_FIELDS_ANNOTATION set (apply says so: what was not in the document).
    hub_fields: tuple[str, ...] = ()


class VersionRegistry:
    """The served (apiVersion, kind) pairs, the ones no longer served, and each kind's hub."""

    def __init__(self) -> None:
        self._served: dict[tuple[str, str], ServedVersion] = {}
        self._retired: dict[tuple[str, str], str] = {}
        self._hubs: dict[str, tuple[str, str]] = {}

    def serve(self, *versions: ServedVersion, hub: bool = False) -> None:
        """Register served versions; ``hub`` marks them as their kinds' storage versions."""
        for version in versions:
            key = (version.api_version, version.kind)
            if key in self._served or key in self._retired:
                raise ValueError(f"{version.label} is registered twice")
            self._served[key] = version
            if hub:
                if version.kind != version.hub_kind:
                    raise ValueError(f"{version.label}: a hub version converts to itself")
                self._hubs[version.kind] = key

    def retire(self, api_version: str, kind: str, replacement: str) -> None:
        """A version no longer served: refused, naming ``replacement`` and the served ones."""
        if (api_version, kind) in self._served:
            raise ValueError(f"{api_version} {kind} is served; stop serving it first")
        self._retired[(api_version, kind)] = replacement

    def versions(self) -> list[ServedVersion]:
        return list(self._served.values())

    def hub_version(self, hub_kind: str) -> ServedVersion:
        return self._served[self._hubs[hub_kind]]

    def version(self, api_version: str, kind: str) -> ServedVersion:
        """The served version, or a ConfigValidationError naming the versions that are served."""
        found = self._served.get((api_version, kind))
        if found is not None:
            return found
        served = self.served_for(kind)
        if (api_version, kind) in self._retired:
            replacement = self._retired[(api_version, kind)]
            # A kind that was replaced by another: name the served versions of that one.
            served = served or self.served_for(replacement.rsplit(" ", 1)[-1])
            rule = (
                f"{api_version} {kind} is no longer served; use {replacement} "
                f"(served: {_listed(served)})"
            )
            raise ConfigValidationError([FieldError("apiVersion", rule)])
        if served:
            rule = f"{api_version!r} is not a served version of {kind}: {_listed(served)}"
            raise ConfigValidationError([FieldError("apiVersion", rule)])
        raise ConfigValidationError([FieldError("kind", f"must be one of {self._kinds()}")])

    def version_for(self, hub_kind: str, api_version: str) -> ServedVersion:
        """The served version of a hub kind in ``api_version`` (``--output-version``)."""
        for version in self._served.values():
            if version.hub_kind == hub_kind and version.api_version == api_version:
                return version
        served = ", ".join(v.api_version for v in self.served_for(hub_kind))
        rule = f"{api_version!r} is not a served version of {hub_kind}: {served}"
        raise ConfigValidationError([FieldError("outputVersion", rule)])

    def served_for(self, kind: str) -> list[ServedVersion]:
        """Served versions of a kind, by the kind as written (``NodePool``) or as a hub."""
        return [v for v in self._served.values() if kind in (v.kind, v.hub_kind)]

    def _kinds(self) -> str:
        return ", ".join(sorted({kind for _, kind in self._served}))

    def read(self, data: Mapping[str, Any], references: Any = None) -> Applied:
        """Parse a document of any served version and convert it to its hub (``references``:
        what the conversion resolves names in, ServedVersion.to_hub_with)."""
        if not isinstance(data, Mapping):
            raise ConfigValidationError([FieldError("body", "must be a mapping (one document)")])
        api_version, kind = data.get("apiVersion"), data.get("kind")
        if not isinstance(kind, str):
            raise ConfigValidationError([FieldError("kind", f"is required: {self._kinds()}")])
        if not isinstance(api_version, str):
            served = _listed(self.served_for(kind)) or self._kinds()
            raise ConfigValidationError([FieldError("apiVersion", f"is required: {served}")])
        version = self.version(api_version, kind)
        check_document_size(data)
        body, carried = without_kept_annotation(without_server_fields(data))
        body, hub_fields = without_hub_fields(body)
        try:
            parsed = version.parse(body)
            conversion = version.converted(parsed, references)
        except RecursionError:
            raise ConfigValidationError([FieldError("body", "is nested too deeply")]) from None
        if hub_fields:
            _check_hub_only(version, parsed, hub_fields)
            conversion = self._with_hub_fields(conversion, hub_fields)
        if carried is not None:
            conversion = Conversion(conversion.hubs, merged_kept(carried, conversion.kept))
            self._check_kept_gives_back(conversion, references)
        if hub_fields:
            self._check_reads_back(version, conversion, references)
        warning = version.deprecation()
        return Applied(
            version, conversion, (warning,) if warning else (), tuple(sorted(hub_fields))
        )

    def convert(
        self, hub: Any, kept: Kept | None, api_version: str, kind: str, references: Any = None
    ) -> dict[str, Any]:
        """A stored hub document (and its kept fields) as a document of a served version."""
        version = self.version(api_version, kind)
        if version.hub_kind != hub.kind:
            served = _listed(self.served_for(hub.kind))
            rule = f"{version.label} is not a version of {hub.kind}: {served}"
            raise ConfigValidationError([FieldError("apiVersion", rule)])
        own = kept is not None and version.reads_kept(kept)
        document = version.from_hub(hub, kept.fields if own and kept else {})
        lost = self._lost(version, hub, document, references)
        if lost:
            annotations = document.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[HUB_FIELDS_ANNOTATION] = json.dumps(lost, sort_keys=True)
        if kept is not None and kept.fields and not own:
            annotate(document, kept)
        return document

    def _lost(
        self, version: ServedVersion, hub: Any, document: dict[str, Any], references: Any
    ) -> dict[str, Any]:
        """The hub's spec fields that ``document`` (of ``version``) does not give back."""
        hub_version = self.hub_version(hub.kind)
        if version is hub_version:
            return {}
        try:
            back = version.converted(version.parse(document), references).hub
        except ConfigValidationError:
            return {}
        mine, theirs = hub_version.document(hub), hub_version.document(back)
        paths = {f"spec.{k}" for k in (*mine.get("spec", {}), *theirs.get("spec", {}))}
        return differing(mine, theirs, sorted(paths))

    def _with_hub_fields(self, conversion: Conversion, fields: Mapping[str, Any]) -> Conversion:
        """The primary hub with the fields a document carried back in HUB_FIELDS_ANNOTATION."""
        hub_version = self.hub_version(conversion.hub.kind)
        restored = put(hub_version.document(conversion.hub), fields)
        try:
            hub = hub_version.parse(restored)
        except ConfigValidationError as error:
            raise ConfigValidationError([FieldError(HUB_FIELDS_PATH, str(error))]) from None
        return Conversion((hub, *conversion.hubs[1:]), conversion.kept)

    def _check_kept_gives_back(self, conversion: Conversion, references: Any) -> None:
        """Refuse carried kept fields that `get` would show as another object than the one
        stored: read in the kept fields' version and applied again, the object must be the same
        (fields the version expresses set to values the hub does not hold would show, and then
        apply, another object than the one the document stores), and what they list as not acted
        on must be what that version's document does not act on."""
        kept, hub = conversion.kept, conversion.hub
        version = self._served.get((kept.api_version, kept.kind))
        if version is None or version.hub_kind != hub.kind or not kept:
            return  # never printed as that version's own fields
        hub_version = self.hub_version(hub.kind)
        document: dict[str, Any] = {}
        try:
            document = self.convert(hub, kept, kept.api_version, kept.kind, references)
            back = self.read(document, references).conversion
        except ConfigValidationError as error:
            wrong = f"{self._shown(version, hub, kept, document)} (applying it is refused: {error})"
        else:
            if hub_version.document(hub) != hub_version.document(back.hub):
                wrong = self._shown(version, hub, kept, document)
            else:
                acted_on = sorted(set(kept.not_acted_on) - set(back.kept.not_acted_on))
                if not acted_on:
                    return
                wrong = f"lists {', '.join(acted_on)} as not acted on, which is acted on"
        rule = (
            f"{wrong}: read as {version.label}, kept fields give back only what the document "
            "applied said, so that get shows the object stored and its output applies it again"
        )
        raise ConfigValidationError([FieldError(KEPT_PATH, rule)])

    @staticmethod
    def _shown(version: ServedVersion, hub: Any, kept: Kept, document: Mapping[str, Any]) -> str:
        """`would show PATHS ...`: the kept paths that show something else than the hub alone."""
        try:
            plain = version.from_hub(hub, {})
        except ConfigValidationError:
            plain = {}
        shown = sorted(differing(document, plain, kept.fields)) or sorted(kept.fields)
        return f"would show {', '.join(shown)} as the stored object does not hold them"

    def _check_reads_back(
        self, version: ServedVersion, conversion: Conversion, references: Any
    ) -> None:
        """Refuse hub fields that would store an object its own version cannot read back."""
        kept = conversion.kept or None
        try:
            self.convert(conversion.hub, kept, version.api_version, version.kind, references)
        except ConfigValidationError as error:
            rule = (
                f"sets what {version.label} cannot read back "
                f"({'; '.join(str(e) for e in error.errors)}): every stored object reads back "
                "in the version it was applied in"
            )
            raise ConfigValidationError([FieldError(HUB_FIELDS_PATH, rule)]) from None


def document_size(data: Any, limit: int = MAX_DOCUMENT_BYTES) -> int:
    """About ``data``'s size as JSON (its strings' UTF-8 bytes, quotes and separators), counted
    no further than past ``limit``: a document whose parts are shared many times over (a YAML
    alias bomb's) is measured as written out, without writing it out."""
    size, pending = 0, [data]
    while pending and size <= limit:
        node = pending.pop()
        if isinstance(node, str):
            size += 2 + (len(node) if len(node) > limit else len(node.encode("utf-8", "replace")))
        elif isinstance(node, Mapping):
            size += 2 + len(node)
            for key, value in node.items():
                pending += (key, value)
        elif isinstance(node, list | tuple):
            size += 2 + len(node)
            pending += node
        elif isinstance(node, int):  # its digits (str() of a huge int raises)
            size += 2 + node.bit_length() * 3 // 10
        else:
            size += len(repr(node)) if isinstance(node, float) else 5
    return size


def check_document_size(data: Any) -> None:
    """Refuse a document larger than MAX_DOCUMENT_BYTES (as JSON), before converting it."""
    if document_size(data) > MAX_DOCUMENT_BYTES:
        rule = f"must be at most {MAX_DOCUMENT_BYTES} bytes as JSON (one stored object)"
        raise ConfigValidationError([FieldError("body", rule)])


def _listed(versions: Iterable[ServedVersion]) -> str:
    return ", ".join(v.label for v in versions)


def without_server_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The document as its author wrote it: without ``status`` and SERVER_METADATA, which `get`
    prints and an apply of its output must not be refused for (nor act on)."""
    body = {k: v for k, v in data.items() if k != "status"}
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        body["metadata"] = {k: v for k, v in metadata.items() if k not in SERVER_METADATA}
    return body


def _check_hub_only(version: ServedVersion, parsed: Any, fields: Mapping[str, Any]) -> None:
    """Refuse each path HUB_FIELDS_ANNOTATION sets that the document itself says (or could say):
    the object stored must be the one its visible document describes."""
    allowed = version.hub_only(parsed)
    errors = []
    for path in sorted(fields):
        if path == "metadata" or path.startswith("metadata."):
            rule = f"may not set {path}: metadata is always written in the document"
        elif path in allowed:
            continue
        elif path.startswith(HUB_PATH_PREFIX) and "." not in path.removeprefix(HUB_PATH_PREFIX):
            rule = (
                f"may not set {path}: {version.label} expresses it, so it is written in the "
                f"document; the annotation carries only hub fields the version has no place "
                f"for ({', '.join(sorted(allowed)) or 'none'})"
            )
        else:
            rule = (
                f"may not set {path}: it carries hub fields by their spec path "
                f"({', '.join(sorted(allowed)) or f'{version.label} has none'})"
            )
        errors.append(FieldError(HUB_FIELDS_PATH, rule))
    if errors:
        raise ConfigValidationError(errors)


# -- kept fields by path ------------------------------------------------------------------------
