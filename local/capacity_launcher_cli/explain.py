"""`explain TYPE[.FIELD.PATH] [--api-version V]`: a kind's fields as `kubectl explain` prints
them, read from the JSON Schemas the models generate (the ones `schemas --write` checks in under
schemas/): the kind and version, the field asked for with its type, its description and its
rules (bounds, pattern, values, default), then the fields under it, `-required-` after those a
document must set.

The configuration kinds are explained in the version `get` prints them in (`--api-version` for
another served one); `requests` is the request record (`status`, `get requests -o json`). The
other TYPEs are not documents and have no schema.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from capacity_launcher_cli import resource_types

# TYPE (plural) -> the kind and version it is explained in by default.
_KINDS = {
    "nodepools": ("capacity-launcher/v1", "NodePool"),
    "nodeclasses": ("capacity-launcher/v1", "NodeClass"),
    "ec2nodeclasses": ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    "capacityquotas": ("capacity-launcher/v1", "CapacityQuota"),
    "capacityreservations": ("ome.io/v1beta1", "CapacityReservation"),
    "clustercapacityreservations": ("ome.io/v1beta1", "ClusterCapacityReservation"),
    "priorityclasses": ("scheduling.k8s.io/v1", "PriorityClass"),
    "cohorts": ("kueue.x-k8s.io/v1beta1", "Cohort"),
}
_RECORD = ("capacity-launcher/v1", "RequestRecord")
_INDENT = "    "
_WIDTH = 76  # as kubectl wraps its descriptions, within 80 columns with the indent


class ExplainError(Exception):
    """What cannot be explained, said as kubectl says it."""


@dataclass(frozen=True)
class Field:
    """One property of a schema, its references resolved."""

    name: str
    schema: dict[str, Any]
    required: bool


def explain(args: argparse.Namespace) -> int:
    try:
        sys.stdout.write(text(args.target, args.api_version))
    except ExplainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def text(target: str, api_version: str | None = None) -> str:
    """What `explain TARGET` prints."""
    word, _, path = target.partition(".")
    try:
        plural = resource_types.lookup(word).plural
    except argparse.ArgumentTypeError as error:
        raise ExplainError(str(error)) from None
    version, kind, schema = _schema(plural, api_version)
    defs = schema.get("$defs", {})
    name, node, required = kind, schema, False
    for part in [p for p in path.split(".") if p] if path else []:
        under = {f.name: f for f in _fields(node, defs)}
        if part not in under:
            raise ExplainError(f'field "{part}" does not exist in {name}')
        found = under[part]
        name, node, required = part, _resolved(found.schema, defs), found.required
    lines = [f"KIND:       {kind}", f"VERSION:    {version}", ""]
    if path:
        lines += [f"FIELD: {name} <{_type(node, defs)}>{' -required-' if required else ''}", ""]
    lines += ["DESCRIPTION:", *_described(node, defs, _INDENT)]
    listed = list(_fields(node, defs))
    if listed:
        lines += ["", "FIELDS:"]
        for field in listed:
            resolved = _resolved(field.schema, defs)
            mark = " -required-" if field.required else ""
            lines.append(f"  {field.name}\t<{_type(field.schema, defs)}>{mark}")
            lines += [*_described(resolved, defs, _INDENT, own=field.schema), ""]
        lines.pop()
    return "\n".join(lines) + "\n"


def _schema(plural: str, api_version: str | None) -> tuple[str, str, dict[str, Any]]:
    from capacity_launcher.domain.apis.served_versions import REGISTRY
    from capacity_launcher.domain.errors import ConfigValidationError
    from capacity_launcher_cli.schemas import contract, contract_names, version_file

    if plural == "requests":
        if api_version not in (None, _RECORD[0]):
            raise ExplainError(f"requests are served as {_RECORD[0]} only")
        return *_RECORD, contract("request-record.json")
    if plural not in _KINDS:
        explained = ", ".join([*_KINDS, "requests"])
        raise ExplainError(f"{plural} are not documents and have no schema (explain: {explained})")
    version, kind = _KINDS[plural]
    if api_version is not None:
        hub = REGISTRY.version(version, kind).hub_kind
        try:
            served = REGISTRY.version_for(hub, api_version)
        except ConfigValidationError as error:
            raise ExplainError(f"--api-version: {error.errors[0].rule}") from None
        version, kind = served.api_version, served.kind
    file = version_file(version, kind)
    if file not in contract_names():  # the hub CapacityQuota's schema has its own name
        file = "capacity-quota.json"
    return version, kind, contract(file)  # that one schema: generating them all took most of it


def _resolved(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A schema with its `$ref` followed, and an optional `anyOf [X, null]` read as X (the field's
    own description and default kept)."""
    own = {k: v for k, v in schema.items() if k in ("description", "default")}
    options = [o for o in schema.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        return _resolved({**options[0], **own}, defs)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = dict(defs.get(ref.rsplit("/", 1)[-1], {}))
        return {**target, **own, "$ref": ref}
    return schema


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """kubectl's spelling of a field's type: string, integer, []Requirement, map[string]string,
    or the name of the object it is."""
    options = [o for o in schema.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        return _type(options[0], defs)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    kind = schema.get("type")
    if kind == "array":
        return "[]" + _type(schema.get("items", {}), defs)
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map[string]{_type(schema['additionalProperties'], defs)}"
    if "const" in schema:
        return "string"
    if options:
        return " or ".join(_type(o, defs) for o in options)
    return str(kind or "Object")


def _fields(schema: dict[str, Any], defs: dict[str, Any]) -> Iterator[Field]:
    """The properties under a field (an array's: its items'), in the schema's order."""
    node = _resolved(schema, defs)
    if node.get("type") == "array":
        node = _resolved(node.get("items", {}), defs)
    required = set(node.get("required", []))
    for name, field in node.get("properties", {}).items():
        yield Field(name, field, name in required)


def _described(
    schema: dict[str, Any], defs: dict[str, Any], indent: str, own: dict[str, Any] | None = None
) -> list[str]:
    """A field's description (its own, else its type's) and its rules, indented."""
    own = own or {}
    items = _resolved(schema.get("items", {}), defs) if schema.get("type") == "array" else {}
    description = (
        own.get("description") or schema.get("description") or items.get("description") or ""
    )
    paragraphs = [*str(description).split("\n\n"), _rules(schema)]
    lines = [
        line
        for paragraph in paragraphs
        if paragraph.strip()
        for line in textwrap.wrap(" ".join(paragraph.split()), _WIDTH)
    ]
    return [f"{indent}{line}" for line in lines] or [f"{indent}<empty>"]


def _rules(schema: dict[str, Any]) -> str:
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(str(v) for v in schema["enum"]))
    if "const" in schema:
        parts.append(f"must be {schema['const']}")
    for key, word in (("minimum", "at least"), ("maximum", "at most")):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    for key, word in (("minItems", "at least"), ("maxItems", "at most")):
        if key in schema:
            count = schema[key]
            parts.append(f"{word} {count} item{'' if count == 1 else 's'}")
    if "maxLength" in schema:
        parts.append(f"at most {schema['maxLength']} characters")
    if "pattern" in schema:
        parts.append(f"matches {schema['pattern']}")
    if schema.get("default") not in (None, [], {}):
        parts.append(f"default {json.dumps(schema['default'])}")
    return "; ".join(parts)
