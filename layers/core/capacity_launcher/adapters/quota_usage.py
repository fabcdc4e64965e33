"""Quota usage per cohort and flavor: one item, each requester's use per resource, and a version.

Admission reads the item strongly consistent, decides with ``quota_admission``, and writes the
lease together with an ADD to the item conditioned on the version it read (docs/quotas.md), so
two admissions in one cohort and flavor never both decide on the same reading. Every change to
the item bumps the version; releases are unconditioned ADDs that travel with the deletion of the
lease or member that explains them, so a release happens once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.quantities import CPU, GPU, INSTANCES, MEMORY, Resources
from capacity_launcher.domain.quotas import usage_item_key

PREFIX = "QuotaUsage#"
SK = "Usage"
# Attribute per requester and resource: "u:<attribute>:<requester>" (the attribute has no colon).
_ATTRIBUTES = {CPU: "cpu", MEMORY: "memoryMiB", GPU: "gpu", INSTANCES: "instances"}
_DIMENSIONS = {attribute: dimension for dimension, attribute in _ATTRIBUTES.items()}


def quota_usage_pk(cohort: str, flavor: str) -> str:
    return usage_item_key(cohort, flavor)


def read(
    db: Any, table: str, pk: str, flavor: str
) -> tuple[int | None, dict[tuple[str, str], Resources]]:
    """The item's version (None: never written) and use by (requester, flavor)."""
    item = db.get_item(TableName=table, Key=key(pk, SK), ConsistentRead=True).get("Item")
    values = from_item(item) if item else {}
    amounts: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if not name.startswith("u:"):
            continue
        attribute, requester = name[2:].split(":", 1)
        amounts.setdefault(requester, {})[_DIMENSIONS[attribute]] = value
    usage = {(r, flavor): Resources.from_amounts(a) for r, a in amounts.items()}
    version = values.get("version")
    return (None if version is None else int(version)), usage


def update(
    table: str,
    pk: str,
    requester: str,
    amount: Resources,
    *,
    read_version: int | None = None,
    conditioned: bool = False,
) -> dict[str, Any]:
    """ADD ``amount`` to ``requester``'s use and bump the version; ``conditioned``: only if the
    version is still ``read_version`` (None: the item had none)."""
    names: dict[str, str] = {"#version": "version"}
    values: dict[str, Any] = {":one": {"N": "1"}}
    adds = ["#version :one"]
    for index, (dimension, value) in enumerate(sorted(amount.amounts().items())):
        names[f"#u{index}"] = f"u:{_ATTRIBUTES[dimension]}:{requester}"
        values[f":u{index}"] = {"N": str(value)}
        adds.append(f"#u{index} :u{index}")
    item: dict[str, Any] = {
        "TableName": table,
        "Key": key(pk, SK),
        "UpdateExpression": "ADD " + ", ".join(adds),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if conditioned and read_version is None:
        item["ConditionExpression"] = "attribute_not_exists(#version)"
    elif conditioned:
        item["ConditionExpression"] = "#version = :read"
        values[":read"] = {"N": str(read_version)}
    return item


def replacement(
    table: str, pk: str, usage: Mapping[tuple[str, str], Resources], read_version: int | None
) -> dict[str, Any]:
    """A PutItem writing ``usage`` (by requester) as the whole item, if its version is still
    ``read_version`` (None: the item had none); the version is bumped like any change."""
    values: dict[str, Any] = {"pk": pk, "sk": SK, "version": (read_version or 0) + 1}
    for (requester, _), amount in sorted(usage.items()):
        for dimension, value in amount.amounts().items():
            if value:
                values[f"u:{_ATTRIBUTES[dimension]}:{requester}"] = value
    put: dict[str, Any] = {
        "TableName": table,
        "Item": to_item(values),
        "ExpressionAttributeNames": {"#version": "version"},
    }
    if read_version is None:
        put["ConditionExpression"] = "attribute_not_exists(#version)"
    else:
        put["ConditionExpression"] = "#version = :read"
        put["ExpressionAttributeValues"] = {":read": {"N": str(read_version)}}
    return put
