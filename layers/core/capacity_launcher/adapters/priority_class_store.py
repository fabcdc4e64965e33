"""PriorityClass documents in the state table (pk ``PriorityClass``): apply, list, delete.

Every apply or delete of a class checks and bumps one version (``PRIORITY_CLASSES_KEY``), so two
applies that are fine alone but not together (two global defaults) cannot both succeed. A class's
value never changes once applied. A class a stored reservation names is not deleted: the delete
is conditioned on the quotas' generation it read the reservations at (every reservation apply
bumps it, and checks in the same transaction that the class it names is stored).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.config_items import (
    QUOTA_SET_KEY,
    kept_of,
    quota_generation_check,
    seen_version_bump,
)
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
    PriorityTable,
    check_change,
    check_global_default,
    named_class,
    parse_priority_class,
    priority_table,
)
from capacity_launcher.domain.errors import (
    CapacityLauncherError,
    ConditionFailed,
    ConfigConflict,
    NotFound,
)
from capacity_launcher.observability import logger

PRIORITY_CLASSES_KEY = ("PriorityClasses", "Version")
_TRIES = 3


class PriorityClassStore:
    def __init__(
        self, table_name: str, dynamodb: Any | None = None, *, clock: Callable[[], datetime]
    ) -> None:
        """`clock`: the composition root's, that each class's `updatedAt` is stamped with."""
        self._table = table_name
        self._clock = clock
        self._db = dynamodb or client("dynamodb")

    def apply(self, applied: PriorityClass) -> None:
        """Create or replace a class: refused (ConfigConflict naming the field) if it changes the
        value, or makes a second global default."""
        for _ in range(_TRIES):
            version = int((self._read_one(*PRIORITY_CLASSES_KEY) or {}).get("version", 0))
            stored = {c.name: c for c in self.priority_classes()}
            check_change(stored.get(applied.name), applied)
            check_global_default(stored.values(), applied)
            item = {
                "pk": PRIORITY_CLASS,
                "sk": applied.name,
                "document": json.dumps(
                    applied.model_dump(mode="json", by_alias=True, exclude_none=True),
                    sort_keys=True,
                ),
                "updatedAt": self._clock().isoformat(),
            }
            try:
                with aws_call("TransactWriteItems"):
                    self._db.transact_write_items(
                        TransactItems=[
                            {"Update": self._bump(version)},
                            {"Put": {"TableName": self._table, "Item": to_item(item)}},
                        ]
                    )
                return
            except ConditionFailed:
                continue  # another class was applied or deleted meanwhile: check again
        raise ConfigConflict(
            f"PriorityClass {applied.name}: other classes kept changing while it was applied; "
            "try again"
        )

    def priority_classes(self) -> list[PriorityClass]:
        """Every stored class that parses, by name (one that does not is logged and skipped)."""
        found = []
        for item in sorted(self._query(PRIORITY_CLASS), key=lambda i: str(i["sk"])):
            try:
                found.append(parse_priority_class(json.loads(str(item["document"]))))
            except (CapacityLauncherError, ValueError, KeyError, TypeError) as error:
                logger.warning(
                    "stored PriorityClass does not parse: skipped",
                    extra={"documentName": str(item.get("sk", "")), "reason": str(error)},
                )
        return found

    def priority_class(self, name: str) -> PriorityClass:
        for found in self.priority_classes():
            if found.name == name:
                return found
        raise NotFound(PRIORITY_CLASS, name)

    def table(self) -> PriorityTable:
        return priority_table(self.priority_classes())

    def delete(self, name: str) -> None:
        """Delete a class no stored reservation names (ConfigConflict naming those that do)."""
        for _ in range(_TRIES):
            generation = int((self._read_one(*QUOTA_SET_KEY) or {}).get("version", 0))
            version = int((self._read_one(*PRIORITY_CLASSES_KEY) or {}).get("version", 0))
            users = sorted(
                str(item["sk"])
                for item in self._query("CapacityQuota")
                if named_class(kept_of(item)) == name
            )
            if users:
                raise ConfigConflict(
                    f"PriorityClass {name} is named by reservation(s) {', '.join(users)} "
                    "(spec.priorityClassName); delete them or name another class first"
                )
            delete = {
                "TableName": self._table,
                "Key": key(PRIORITY_CLASS, name),
                "ConditionExpression": "attribute_exists(pk)",
            }
            try:
                with aws_call("TransactWriteItems"):
                    self._db.transact_write_items(
                        TransactItems=[
                            quota_generation_check(self._table, generation),
                            {"Update": self._bump(version)},
                            {"Delete": delete},
                        ]
                    )
                return
            except ConditionFailed as failed:
                if self._read_one(PRIORITY_CLASS, name) is None:
                    raise NotFound(PRIORITY_CLASS, name) from failed
        raise ConfigConflict(f"PriorityClass {name} kept changing while it was deleted; try again")

    def _bump(self, seen: int) -> dict[str, Any]:
        return seen_version_bump(self._table, PRIORITY_CLASSES_KEY, seen)

    def _read_one(self, pk: str, sk: str) -> dict[str, Any] | None:
        with aws_call("GetItem"):
            item = self._db.get_item(
                TableName=self._table, Key=key(pk, sk), ConsistentRead=True
            ).get("Item")
        return from_item(item) if item else None

    def _query(self, pk: str) -> list[dict[str, Any]]:
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": pk}},
                ConsistentRead=True,
            )
            return [from_item(i) for page in pages for i in page["Items"]]
