"""Kueue Cohort documents in the state table: what an apply or delete reads, and its write
conditioned on what was read. What to write is decided in the domain
(`domain/apis/kueue/cohort_changes.py`); the retries are the service's
(service/configuration.py).

A Cohort is stored in the quotas' generations partition (``CapacityQuotas``, sort key
``Cohort#<name>``), beside the quota-set version and every NodePool's quota generation: the one
Query that reads the generations for a launcher's copy of the quotas reads the cohorts too
(`cohorts_of`), so serving the kind costs a lease no read. Every apply or delete bumps the
cohorts' version (``COHORTS_KEY``) conditioned on the one its check read, checks the quota set's
version it read the quotas at, and bumps the quota generation of every NodePool whose admissions
the change governs, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.config_items import (
    QUOTA_SET_KEY,
    ConditionedWrites,
    generation_bump,
    generation_check,
    parse_item,
    query_items,
    quota_pool_key,
    read_item,
    seen_version_bump,
)
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import (
    CapacityLauncherError,
    NotFound,
    StoredDocumentInvalid,
)
from capacity_launcher.observability import logger

if TYPE_CHECKING:  # the Kueue documents are the apply path's, and a launcher's only when stored
    from capacity_launcher.domain.apis.kueue.cohort_changes import (
        CohortDelete,
        CohortPut,
        CohortsRead,
    )
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort

COHORT_PREFIX = "Cohort#"
# The version every Cohort apply and delete checks and bumps (in the same partition, not a
# cohort: its sort key has no prefix).
COHORTS_KEY = (QUOTA_SET_KEY[0], "Cohorts")


def cohort_key(name: str) -> tuple[str, str]:
    return QUOTA_SET_KEY[0], COHORT_PREFIX + name


def cohorts_of(items: Iterable[dict[str, Any]]) -> dict[str, Cohort]:
    """The Cohorts among the items of the generations partition, by name; one that no longer
    parses is logged and skipped (its tree is then read as if it were not applied)."""
    stored = [i for i in items if str(i.get("sk", "")).startswith(COHORT_PREFIX)]
    if not stored:
        return {}
    from capacity_launcher.domain.apis.kueue.cohorts import parse_cohort

    found = {}
    for item in sorted(stored, key=lambda i: str(i["sk"])):
        name = str(item["sk"]).removeprefix(COHORT_PREFIX)
        try:
            cohort = parse_cohort(json.loads(str(item["document"])))
            if cohort.name != name:
                raise ValueError(f"stored as Cohort {name} but is Cohort {cohort.name}")
        except (CapacityLauncherError, ValueError, KeyError, TypeError) as error:
            logger.warning(
                "stored Cohort does not parse: skipped",
                extra={"documentName": name, "reason": str(error)},
            )
            continue
        found[name] = cohort
    return found


class CohortStore(ConditionedWrites):
    """Reads and conditioned writes of Cohort items (a write returns False when what it was
    conditioned on moved)."""

    def read(self) -> CohortsRead:
        """Both versions first, then every stored cohort and quota that parses."""
        from capacity_launcher.domain.apis.kueue.cohort_changes import CohortsRead

        items = query_items(self._db, self._table, QUOTA_SET_KEY[0])
        versions = {str(i["sk"]): int(i.get("version", 0)) for i in items}
        quotas = []
        for item in query_items(self._db, self._table, "CapacityQuota"):
            try:
                quotas.append(parse_item("CapacityQuota", item))
            except StoredDocumentInvalid:
                continue  # governs nothing
        return CohortsRead(
            versions.get(COHORTS_KEY[1], 0),
            versions.get(QUOTA_SET_KEY[1], 0),
            tuple(cohorts_of(items).values()),
            tuple(q for q in quotas if isinstance(q, CapacityQuota)),
        )

    def cohorts(self) -> list[Cohort]:
        """Every stored cohort that parses, by name."""
        items = query_items(self._db, self._table, QUOTA_SET_KEY[0])
        return list(cohorts_of(items).values())

    def cohort(self, name: str) -> Cohort:
        item = read_item(self._db, self._table, *cohort_key(name))
        found = cohorts_of([item]) if item is not None else {}
        if name not in found:
            raise NotFound("Cohort", name)
        return found[name]

    def put(self, write: CohortPut) -> bool:
        """Store the cohort while both versions are as read, bumping the cohorts' version and
        the quota generations of the pools it governs (False: a version moved)."""
        applied = write.applied
        item = {
            "pk": QUOTA_SET_KEY[0],
            "sk": COHORT_PREFIX + applied.name,
            "document": json.dumps(
                applied.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True
            ),
            "updatedAt": self._clock().isoformat(),
        }
        put = {"Put": {"TableName": self._table, "Item": to_item(item)}}
        return self._write(put, write.seen, write.quota_version, write.pools)

    def delete(self, write: CohortDelete) -> bool:
        """Delete the cohort while both versions are as read, bumping as an apply does (False:
        a version moved, or the cohort is gone)."""
        delete = {
            "Delete": {
                "TableName": self._table,
                "Key": key(*cohort_key(write.name)),
                "ConditionExpression": "attribute_exists(pk)",
            }
        }
        return self._write(delete, write.seen, write.quota_version, write.pools)

    def _write(
        self, write: dict[str, Any], seen: int, quota_version: int, pools: Iterable[str]
    ) -> bool:
        return self._transact(
            [
                {"Update": seen_version_bump(self._table, COHORTS_KEY, seen)},
                generation_check(self._table, QUOTA_SET_KEY, quota_version),
                write,
                *(generation_bump(self._table, quota_pool_key(pool)) for pool in pools),
            ]
        )
