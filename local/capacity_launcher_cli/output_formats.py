"""`get -o FORMAT`: which formats there are, checked when the command line is read (a bad
jsonpath template is a usage error before anything runs). Standard library only."""

from __future__ import annotations

import argparse
from typing import Any

from capacity_launcher_cli import jsonpath, resource_types

TABLES = ("table", "wide")
FORMATS = (*TABLES, "json", "yaml", "name", "jsonpath=")
JSONPATH = "jsonpath="


def output_format(text: str) -> str:
    """argparse `type` of `get -o`."""
    if text in FORMATS and text != JSONPATH:
        return text
    if text.startswith(JSONPATH):
        try:
            jsonpath.parse(text.removeprefix(JSONPATH))
        except jsonpath.TemplateError as error:
            raise argparse.ArgumentTypeError(f"jsonpath: {error}") from None
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: one of table, wide, json, yaml, name, jsonpath=TEMPLATE"
    )


def name_of(item: dict[str, Any], resource: str) -> str:
    """An item's name (`-o name`): the field its type names it by, else its metadata.name."""
    field = resource_types.lookup(resource).name_field
    if field is not None:
        return str(item.get(field))
    return str((item.get("metadata") or {}).get("name"))


def jsonpath_text(output: str, found: Any) -> str:
    """`-o jsonpath=T` of one document (a dict) or of a listing (as kubectl's `List`)."""
    if not isinstance(found, dict):
        found = {"apiVersion": "v1", "kind": "List", "items": found}
    return jsonpath.render(jsonpath.parse(output.removeprefix(JSONPATH)), found)
