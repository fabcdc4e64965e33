"""PriorityClass documents in the state table (pk ``PriorityClass``): what an apply or delete
reads, and its write conditioned on what was read. What to write is decided in the domain
(`domain/apis/priority_class_changes.py`); the retries are the service's
(service/configuration.py).

Every apply or delete of a class bumps one version (``PRIORITY_CLASSES_KEY``), conditioned on the
version its check read. A delete is also conditioned on the quotas' generation it read the
reservations at (every reservation apply that changes one bumps it).
"""

from __future__ import annotations

import json

from capacity_launcher.adapters.config_items import (
    PRIORITY_CLASSES_KEY,
    QUOTA_SET_KEY,
    ConditionedWrites,
    kept_of,
    query_items,
    quota_generation_check,
    read_item,
    seen_version_bump,
)
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.domain.apis.priority_class_changes import (
    PriorityClassDelete,
    PriorityClassDeleteRead,
    PriorityClassesRead,
    PriorityClassPut,
)
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
    PriorityTable,
    named_class,
    parse_priority_class,
    priority_table,
)
from capacity_launcher.domain.errors import CapacityLauncherError, NotFound
from capacity_launcher.observability import logger


class PriorityClassStore(ConditionedWrites):
    """Reads and conditioned writes of PriorityClass items (a write returns False when what it
    was conditioned on moved)."""

    def read(self) -> PriorityClassesRead:
        """The classes' version, then every stored class that parses."""
        return PriorityClassesRead(self._version(), tuple(self.priority_classes()))

    def put(self, write: PriorityClassPut) -> bool:
        """Store the class, bumping the classes' version while it is `write.seen` (False: it
        moved)."""
        applied = write.applied
        item = {
            "pk": PRIORITY_CLASS,
            "sk": applied.name,
            "document": json.dumps(
                applied.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True
            ),
            "updatedAt": self._clock().isoformat(),
        }
        return self._transact(
            [
                {"Update": seen_version_bump(self._table, PRIORITY_CLASSES_KEY, write.seen)},
                {"Put": {"TableName": self._table, "Item": to_item(item)}},
            ]
        )

    def delete_read(self, name: str) -> PriorityClassDeleteRead:
        """The quotas' generation, then the classes' version, whether class `name` is stored,
        and the class each stored reservation names."""
        generation = int((read_item(self._db, self._table, *QUOTA_SET_KEY) or {}).get("version", 0))
        version = self._version()
        stored = read_item(self._db, self._table, PRIORITY_CLASS, name) is not None
        named_by = {
            str(item["sk"]): named_class(kept_of(item))
            for item in query_items(self._db, self._table, "CapacityQuota")
        }
        return PriorityClassDeleteRead(generation, version, stored, named_by)

    def delete(self, write: PriorityClassDelete) -> bool:
        """Delete the class while both versions are as read (False: one moved, or the class is
        gone)."""
        delete = {
            "TableName": self._table,
            "Key": key(PRIORITY_CLASS, write.name),
            "ConditionExpression": "attribute_exists(pk)",
        }
        return self._transact(
            [
                quota_generation_check(self._table, write.quota_generation),
                {"Update": seen_version_bump(self._table, PRIORITY_CLASSES_KEY, write.version)},
                {"Delete": delete},
            ]
        )

    def priority_classes(self) -> list[PriorityClass]:
        """Every stored class that parses, by name (one that does not is logged and skipped)."""
        found = []
        items = query_items(self._db, self._table, PRIORITY_CLASS)
        for item in sorted(items, key=lambda i: str(i["sk"])):
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

    def _version(self) -> int:
        return int(
            (read_item(self._db, self._table, *PRIORITY_CLASSES_KEY) or {}).get("version", 0)
        )
