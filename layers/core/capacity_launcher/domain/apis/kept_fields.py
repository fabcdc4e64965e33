"""What a conversion keeps by path (docs/api-versions.md): the `Kept` fields a served version has
and the hub has no place for, carried in the KEPT_ANNOTATION when read in another version, the hub
fields a version has no place for carried in the HUB_FIELDS_ANNOTATION, and reading, writing and
comparing fields by their dotted path. The registry of served versions:
domain/apis/api_versions.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, field_path

KEPT_ANNOTATION = "capacity-launcher/kept-fields"


# Hub fields a version has no place for, when an object is read in that version (JSON: path ->
# value); applying the document puts them back on the hub.
HUB_FIELDS_ANNOTATION = "capacity-launcher/hub-fields"


KEPT_PATH = field_path(("metadata", "annotations", KEPT_ANNOTATION))


HUB_FIELDS_PATH = field_path(("metadata", "annotations", HUB_FIELDS_ANNOTATION))


# What HUB_FIELDS_ANNOTATION may set: one top-level field of the hub's spec (what the registry
# compares when it reads an object in a version, VersionRegistry._lost).
HUB_PATH_PREFIX = "spec."


# Kept fields are stored beside the hub document in the state table (400 KB items).
MAX_KEPT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Kept:
    """What an applied document said that the hub has no place for.

    ``fields`` maps a dotted document path (in the version ``api_version`` / ``kind``) to its
    JSON value; ``not_acted_on`` lists the paths capacity-launcher accepts and keeps but does not
    act on (cluster-only fields such as taints), whether the hub holds them or not.
    """

    api_version: str
    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    not_acted_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        size = len(json.dumps(self.to_json(), sort_keys=True).encode())
        if size > MAX_KEPT_BYTES:
            raise ConfigValidationError(
                [
                    FieldError(
                        next(iter(self.fields), "body"),
                        f"the fields kept but not acted on must be at most {MAX_KEPT_BYTES} "
                        f"bytes together (JSON), not {size}",
                    )
                ]
            )

    def __bool__(self) -> bool:
        return bool(self.fields or self.not_acted_on)

    def to_json(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "fields": dict(self.fields),
            "notActedOn": list(self.not_acted_on),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Kept:
        return cls(
            api_version=str(data["apiVersion"]),
            kind=str(data["kind"]),
            fields=dict(data.get("fields") or {}),
            not_acted_on=tuple(str(path) for path in data.get("notActedOn") or ()),
        )

    def is_for(self, api_version: str, kind: str) -> bool:
        return (self.api_version, self.kind) == (api_version, kind)


def without_kept_annotation(data: Mapping[str, Any]) -> tuple[dict[str, Any], Kept | None]:
    """The document without KEPT_ANNOTATION, and the kept fields it carried (if any)."""
    body = dict(data)
    metadata = body.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping) or KEPT_ANNOTATION not in annotations:
        return body, None
    try:
        carried = Kept.from_json(json.loads(annotations[KEPT_ANNOTATION]))
    except (TypeError, ValueError, KeyError, AttributeError):
        rule = "must be the JSON capacity-launcher wrote: {apiVersion, kind, fields, notActedOn}"
        raise ConfigValidationError([FieldError(KEPT_PATH, rule)]) from None
    rest = {k: v for k, v in annotations.items() if k != KEPT_ANNOTATION}
    assert isinstance(metadata, Mapping)
    body["metadata"] = {**metadata, "annotations": rest}
    if not rest:
        del body["metadata"]["annotations"]
    return body, carried


def without_hub_fields(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    metadata = body.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping) or HUB_FIELDS_ANNOTATION not in annotations:
        return body, {}
    try:
        fields = json.loads(annotations[HUB_FIELDS_ANNOTATION])
        if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
            raise ValueError
    except (TypeError, ValueError):
        rule = "must be the JSON capacity-launcher wrote: {path: value}"
        raise ConfigValidationError([FieldError(HUB_FIELDS_PATH, rule)]) from None
    rest = {k: v for k, v in annotations.items() if k != HUB_FIELDS_ANNOTATION}
    assert isinstance(metadata, Mapping)
    new_metadata = {**metadata, "annotations": rest}
    if not rest:
        del new_metadata["annotations"]
    return {**body, "metadata": new_metadata}, fields


def merged_kept(carried: Kept, own: Kept) -> Kept:
    """Kept fields carried in the annotation, with the document's own (which it may not have)."""
    if not own:
        return carried
    if not carried or carried.is_for(own.api_version, own.kind):
        fields = {**carried.fields, **own.fields}
        acted = tuple(dict.fromkeys([*carried.not_acted_on, *own.not_acted_on]))
        return Kept(own.api_version, own.kind, fields, acted)
    # Fields of two versions cannot share one path space: the document's own win.
    return own


def annotate(document: dict[str, Any], kept: Kept) -> None:
    metadata = document.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {})
    annotations[KEPT_ANNOTATION] = json.dumps(kept.to_json(), sort_keys=True)


def take(document: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """The values at ``paths`` (dotted) that the document sets."""
    found: dict[str, Any] = {}
    for path in paths:
        node: Any = document
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            found[path] = node
    return found


def put(document: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with each dotted path in ``fields`` set (its parents made as needed); a None
    value removes the field (kept as None: the document as written did not have it)."""
    for path, value in fields.items():
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return document


def differing(
    written: Mapping[str, Any], rebuilt: Mapping[str, Any], paths: Iterable[str]
) -> dict[str, Any]:
    """The fields at ``paths`` where a document rebuilt from the hub differs from the one written:
    their written values (None where it had none), kept so that the conversion loses nothing."""
    found: dict[str, Any] = {}
    for path in paths:
        mine, theirs = take(written, [path]).get(path), take(rebuilt, [path]).get(path)
        if mine != theirs:
            found[path] = mine
    return found
