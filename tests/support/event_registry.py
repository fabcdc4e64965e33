"""Every event the service publishes, held to its schema in the EventBridge schema registry
(schemas/eventbridge/, the template's AWS::EventSchemas::Schema contents): the tests' clouds
check each event they capture."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from capacity_launcher_cli.event_registry import SCHEMAS

REGISTRY = Path(__file__).resolve().parents[2] / "schemas" / "eventbridge"


@cache
def _validators() -> dict[str, jsonschema.Draft4Validator]:
    validators = {}
    for schema in SCHEMAS:
        content = json.loads((REGISTRY / schema.file_name).read_text(encoding="utf-8"))
        for detail_type in schema.detail_types:
            validators[detail_type] = jsonschema.Draft4Validator(content)
    return validators


def check_registered(event: dict[str, Any]) -> None:
    """AssertionError naming the event and what its schema refuses, when it does."""
    detail_type = event.get("detail-type")
    validator = _validators().get(str(detail_type))
    assert validator is not None, f"no registry schema for detail-type {detail_type!r}"
    problems = [
        f"{'/'.join(map(str, e.absolute_path)) or '(event)'}: {e.message}"
        for e in validator.iter_errors(event)
    ]
    assert not problems, f"{detail_type} breaks its registry schema: {problems}"
