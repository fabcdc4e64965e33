"""Quota usage per cohort and flavor: one item, each requester's use per resource, and a version.

Admission reads the item strongly consistent, decides with ``quota_admission``, and writes the
lease together with an ADD to the item conditioned on the version it read (docs/quotas.md), so
two admissions in one cohort and flavor never both decide on the same reading. Every change to
the item bumps the version; releases are unconditioned ADDs that travel with the deletion of the
lease or member that explains them, so a release happens once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, to_item
from capacity_launcher.domain.apis.quotas import usage_item_key
from capacity_launcher.domain.quantities import CPU, GPU, INSTANCES, MEMORY, Resources

PREFIX = "QuotaUsage#"
SK = "Usage"
# Attribute per requester and resource: "u:<attribute>:<requester>" (the attribute has no colon).
_ATTRIBUTES = {CPU: "cpu", MEMORY: "memoryMiB", GPU: "gpu", INSTANCES: "instances"}
_DIMENSIONS = {attribute: dimension for dimension, attribute in _ATTRIBUTES.items()}


def quota_usage_pk(cohort: str, flavor: str) -> str:
    return usage_item_key(cohort, flavor)


# What one item says: its version (None: never written) and use by (requester, flavor).
Reading = tuple[int | None, dict[tuple[str, str], Resources]]


def read(db: Any, table: str, pk: str, flavor: str) -> Reading:
    """The item's version (None: never written) and use by (requester, flavor)."""
    item = db.get_item(TableName=table, Key=key(pk, SK), ConsistentRead=True).get("Item")
    return _parsed(from_item(item) if item else {}, flavor)


def read_many(db: Any, table: str, items: Sequence[tuple[str, str]]) -> dict[str, Reading]:
    """``read`` of each (key, flavor) of ``items``, strongly consistent, in one BatchGetItem."""
    found = {str(i["pk"]): i for i in batch_get(db, table, [key(pk, SK) for pk, _ in items])}
    return {pk: _parsed(found.get(pk, {}), flavor) for pk, flavor in items}


def _parsed(values: Mapping[str, Any], flavor: str) -> Reading:
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
    if conditioned:
        _while_version(item, read_version)
    return item


def _while_version(request: dict[str, Any], read_version: int | None) -> dict[str, Any]:
    """Condition ``request`` (it names ``#version``) on the item's version being still
    ``read_version`` (None: the item had none)."""
    if read_version is None:
        request["ConditionExpression"] = "attribute_not_exists(#version)"
        return request
    request["ConditionExpression"] = "#version = :read"
    values = request.setdefault("ExpressionAttributeValues", {})
    values[":read"] = {"N": str(read_version)}
    return request


def unchanged(table: str, pk: str, read_version: int | None) -> dict[str, Any]:
    """A ConditionCheck that the item's version is still ``read_version`` (None: it had none):
    a decision that read the item holds only if no admission or release changed it since."""
    check = {
        "TableName": table,
        "Key": key(pk, SK),
        "ExpressionAttributeNames": {"#version": "version"},
    }
    return {"ConditionCheck": _while_version(check, read_version)}


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
    put = {
        "TableName": table,
        "Item": to_item(values),
        "ExpressionAttributeNames": {"#version": "version"},
    }
    return _while_version(put, read_version)
