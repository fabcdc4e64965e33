"""The EventBridge schema registry's schemas: every event on the service's bus, whole (source,
detail-type, detail), in JSON Schema draft 4 (one of the two types the registry takes; schemas/
holds draft 2020-12 for everything else).

`capacity-launcher schemas --write` writes them to schemas/eventbridge/ and into template.yaml's
generated section (`AWS::EventSchemas::Schema` resources, one per event family, in the
stack's registry); a test holds the template, the files and the models equal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capacity_launcher.domain.records.status import (
    ALL_DETAIL_TYPES,
    BLOCK_END_DETAIL_TYPES,
    DETAIL_TYPES,
    EVENT_SOURCE,
    INSTANCE_TERMINATED,
    LAUNCH_REQUESTED,
    RECLAIM_CLOSED,
    RECLAIM_REQUESTED,
    RESERVATION_DETAIL_TYPES,
)

DRAFT4 = "http://json-schema.org/draft-04/schema#"
REGISTRY_TYPE = "JSONSchemaDraft4"
BEGIN = "  # BEGIN generated: the event schema registry (capacity-launcher schemas --write)"
END = "  # END generated: the event schema registry"
_SECTION = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END) + r"\n", re.DOTALL)


@dataclass(frozen=True)
class RegistrySchema:
    """One schema in the registry: the events of one detail model."""

    logical_id: str
    name: str  # the registry's SchemaName
    detail_types: tuple[str, ...]
    detail_file: str  # the detail's schema in schemas/
    description: str
    # None: the service's own source; a producer's event carries its own (never ours).
    source: str | None = EVENT_SOURCE

    @property
    def file_name(self) -> str:
        return f"{self.name.replace('@', '.')}.json"


SCHEMAS: tuple[RegistrySchema, ...] = (
    RegistrySchema(
        "LaunchRequestedSchema",
        "capacity-launcher@LaunchRequested",
        (LAUNCH_REQUESTED,),
        "launch-request.json",
        "A launch request a producer puts on the bus (its own source).",
        source=None,
    ),
    RegistrySchema(
        "LaunchStatusSchema",
        "capacity-launcher@LaunchStatus",
        tuple(DETAIL_TYPES.values()),
        "request-record.json",
        "A request's status record: Launch Fulfilled, Partially Fulfilled, Failed, Rejected, "
        "Waiting.",
    ),
    RegistrySchema(
        "CapacityReservationEventSchema",
        "capacity-launcher@CapacityReservationEvent",
        RESERVATION_DETAIL_TYPES,
        "reservation-event.json",
        "A reservation crossing a threshold, changing state or ending, as the sync saw it.",
    ),
    RegistrySchema(
        "InstanceTerminatedSchema",
        "capacity-launcher@InstanceTerminated",
        (INSTANCE_TERMINATED,),
        "instance-terminated.json",
        "One of the service's instances stopped, terminated or interrupted; its limits freed.",
    ),
    RegistrySchema(
        "CapacityReclaimRequestedSchema",
        "capacity-launcher@CapacityReclaimRequested",
        (RECLAIM_REQUESTED,),
        "reclaim-requested.json",
        "A lender quota asks for its lent-out nominal quota back.",
    ),
    RegistrySchema(
        "CapacityReclaimClosedSchema",
        "capacity-launcher@CapacityReclaimClosed",
        (RECLAIM_CLOSED,),
        "reclaim-closed.json",
        "How the sync closed an open reclaim.",
    ),
    RegistrySchema(
        "CapacityBlockEndSchema",
        "capacity-launcher@CapacityBlockEnd",
        BLOCK_END_DETAIL_TYPES,
        "block-end-event.json",
        "What a static pool, or requests that opted in, did before a Capacity Block ends, and why.",
    ),
)


def unregistered() -> set[str]:
    """Detail-types the service publishes that no registry schema describes (none, by test)."""
    return set(ALL_DETAIL_TYPES) - {
        t for s in SCHEMAS if s.source is not None for t in s.detail_types
    }


def _draft4(node: Any) -> Any:
    """A 2020-12 schema node in draft 4's words: `definitions` for `$defs`, `enum` for
    `const`, boolean exclusive bounds."""
    if isinstance(node, list):
        return [_draft4(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            converted[key] = value.replace("#/$defs/", "#/definitions/")
        elif key == "const":
            converted["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            converted["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            converted[key] = True
        elif key in ("$defs", "$schema"):
            continue
        else:
            converted[key] = _draft4(value)
    return converted


def registry_schema(schema: RegistrySchema, detail: dict[str, Any]) -> dict[str, Any]:
    """The whole event, its detail by `detail`'s model (a draft 2020-12 schema from schemas/)."""
    title = str(detail.get("title", "Detail"))
    definitions = {name: _draft4(d) for name, d in detail.get("$defs", {}).items()}
    definitions[title] = _draft4(detail)
    source: dict[str, Any] = (
        {"type": "string", "enum": [schema.source]}
        if schema.source is not None
        else {"type": "string", "not": {"enum": [EVENT_SOURCE]}}
    )
    return {
        "$schema": DRAFT4,
        "title": schema.name.partition("@")[2],
        "description": schema.description,
        "type": "object",
        "required": ["detail-type", "source", "detail"],
        "properties": {
            "detail-type": {"type": "string", "enum": list(schema.detail_types)},
            "source": source,
            "detail": {"$ref": f"#/definitions/{title}"},
        },
        "definitions": definitions,
    }


def registry_schemas(contracts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """File name (in schemas/eventbridge/) -> the registry schema, for every event."""
    return {s.file_name: registry_schema(s, contracts[s.detail_file]) for s in SCHEMAS}


def compact(schema: dict[str, Any]) -> str:
    """The registry schema's Content: the file's JSON, compact."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def template_section(contracts: dict[str, dict[str, Any]]) -> str:
    """template.yaml's generated resources: the registry and one schema per event family."""
    schemas = registry_schemas(contracts)
    lines = [
        BEGIN,
        "  EventSchemaRegistry:",
        "    Type: AWS::EventSchemas::Registry",
        "    Properties:",
        '      RegistryName: !Sub "${AWS::StackName}-events"',
        "      Description: Every event on the launch bus, whole (schemas/eventbridge/).",
    ]
    for schema in SCHEMAS:
        lines += [
            f"  {schema.logical_id}:",
            "    Type: AWS::EventSchemas::Schema",
            "    Properties:",
            "      RegistryName: !GetAtt EventSchemaRegistry.RegistryName",
            f"      SchemaName: {schema.name}",
            f"      Type: {REGISTRY_TYPE}",
            f"      Description: {json.dumps(schema.description)}",
            f"      Content: {json.dumps(compact(schemas[schema.file_name]))}",
        ]
    return "\n".join([*lines, END]) + "\n"


def write_template(path: str | Path, contracts: dict[str, dict[str, Any]]) -> bool:
    """Replace the generated section of the template; False when it has none."""
    target = Path(path)
    text = target.read_text(encoding="utf-8")
    if not _SECTION.search(text):
        return False
    section = template_section(contracts)
    target.write_text(_SECTION.sub(lambda _: section, text), encoding="utf-8")
    return True
