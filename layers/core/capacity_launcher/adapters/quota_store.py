"""CapacityQuota items in the state table: what an apply or delete reads, and its write, in
named items conditioned on what was read. What to write is decided in the domain
(`domain/apis/quota_changes.py`); the retries are the service's (service/configuration.py).

Every apply that changes a CapacityQuota bumps one quota-set version, conditioned on the
version its cross-quota check read; every delete of one bumps it too. In the same transaction
they bump the quota generation of each NodePool the stored and the new document name
(`quota_pool_key`): what decides a lease in a pool is the quotas naming that pool, so a lease
conditions its transaction on its pool's generation as its decision read it (`quota_set`), and
an apply or delete that returned governs every lease written after it, whatever copy a warm
container holds, while a lease in a pool the change does not name is left alone. A quota naming
more pools than a transaction holds has the rest bumped right after, marked outstanding in the
first transaction until they are (`OUTSTANDING_BUMPS_PK`).

A quota naming a PriorityClass is written conditioned on the classes' version its apply read
(`PRIORITY_CLASSES_KEY`), so it never stores a priority, or a mark of waiting for its class
(`unresolvedPriorityClass`), that a class applied or deleted meanwhile has made wrong.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.config_items import (
    OUTSTANDING_BUMPS_PK,
    PRIORITY_CLASSES_KEY,
    QUOTA_SET_KEY,
    UNRESOLVED,
    generation_bump,
    generation_check,
    kept_of,
    outstanding_bumps_put,
    parse_item,
    query_items,
    quota_pool_key,
    read_item,
    seen_version_bump,
)
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.domain.accounting.quota_admission import TRANSACTION_ITEMS
from capacity_launcher.domain.apis.quota_changes import (
    OutstandingBumps,
    QuotaApplyRead,
    QuotaDelete,
    QuotaDeleteRead,
    QuotaPut,
    StoredQuota,
    pools_named,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota

if TYPE_CHECKING:  # PriorityClasses are the apply path's (a launcher reads none)
    from capacity_launcher.domain.apis.priority_classes import PriorityClass
from capacity_launcher.domain.apis.documents import StoredDocument
from capacity_launcher.domain.errors import (
    CapacityLauncherError,
    ConditionFailed,
    StoredDocumentInvalid,
)


class QuotaStore:
    """Reads and conditioned writes of CapacityQuota items (ConditionFailed: something read
    moved)."""

    def __init__(self, table_name: str, dynamodb: Any, *, clock: Callable[[], datetime]) -> None:
        self._table = table_name
        self._db = dynamodb
        self._clock = clock

    def apply_read(self, name: str, priority_class: str | None = None) -> QuotaApplyRead:
        """The quota set's version first (a quota applied after it bumps it), then the valid
        stored quotas, quota `name` as stored and its outstanding bumps; naming
        `priority_class`, the classes' version and then that class as stored (None: not)."""
        version = int((self._read_one(*QUOTA_SET_KEY) or {}).get("version", 0))
        classes_version, named = 0, None
        if priority_class is not None:
            classes_version = int((self._read_one(*PRIORITY_CLASSES_KEY) or {}).get("version", 0))
            named = _class_of(self._read_one("PriorityClass", priority_class))
        items = query_items(self._db, self._table, "CapacityQuota")
        stored = next((i for i in items if str(i["sk"]) == name), None)
        return QuotaApplyRead(
            version=version,
            quotas=tuple(q for q in map(_quota_of, items) if q is not None),
            stored=_stored_quota(stored),
            outstanding=self._outstanding(name),
            classes_version=classes_version,
            named=named,
        )

    def waiting_for(self, priority_class: str) -> list[StoredDocument]:
        """The stored quotas marked waiting for `priority_class`, with their kept fields (only
        those are parsed)."""
        found = []
        for item in query_items(self._db, self._table, "CapacityQuota"):
            if item.get(UNRESOLVED) != priority_class:
                continue
            quota = _quota_of(item)
            if quota is not None:
                found.append(StoredDocument(quota, kept_of(item)))
        return sorted(found, key=lambda s: s.document.name)

    def waited_for(self) -> set[str]:
        """The PriorityClasses some stored quota is marked waiting for (one Query; no document
        parsed): what the sync's minute looks for among the classes applied."""
        items = query_items(self._db, self._table, "CapacityQuota")
        return {str(i[UNRESOLVED]) for i in items if i.get(UNRESOLVED)}

    def delete_read(self, name: str) -> QuotaDeleteRead:
        """Quota `name` as stored and its outstanding bumps."""
        stored = _stored_quota(self._read_one("CapacityQuota", name))
        return QuotaDeleteRead(stored, self._outstanding(name))

    def put(self, write: QuotaPut) -> None:
        """The quota's item, with the version check and bumps `write` names, in one transaction
        (the pools that do not fit beside them right after)."""
        item = {
            "pk": "CapacityQuota",
            "sk": write.name,
            "document": write.body,
            "updatedAt": self._clock().isoformat(),
        }
        if write.kept is not None:
            item["kept"] = write.kept
        waiting = write.priority_class if write.unresolved else None
        if waiting is not None:
            item[UNRESOLVED] = waiting
        put = {"TableName": self._table, "Item": to_item(item)}
        unchanged = _while_stored_as(put, write.body, write.kept, waiting)
        writes: list[dict[str, Any]] = [{"Put": unchanged}]
        if write.seen is not None:
            guard = seen_version_bump(self._table, QUOTA_SET_KEY, write.seen)
            writes = [{"Update": guard}, {"Put": put}]
        if write.classes_seen is not None:
            # No class applied or deleted since its priority (or its wait) was decided.
            writes.append(generation_check(self._table, PRIORITY_CLASSES_KEY, write.classes_seen))
        writes, mine = self._marked(writes, write.name, list(write.pools))
        self._write_with_pool_bumps(writes, list(write.pools))
        self._bumps_done(write.name, mine or write.outstanding)

    def delete(self, write: QuotaDelete) -> None:
        """Delete the quota while stored as read, bumping the quota set's version and the pools'
        generations in one transaction; or, when it is deleted already, finish the bumps."""
        writes: list[dict[str, Any]] = []
        mine = write.outstanding
        if write.body is not None:
            delete = {
                "TableName": self._table,
                "Key": key("CapacityQuota", write.name),
                "ConditionExpression": "#document = :document",
                "ExpressionAttributeNames": {"#document": "document"},
                "ExpressionAttributeValues": {":document": {"S": write.body}},
            }
            writes = [generation_bump(self._table, QUOTA_SET_KEY), {"Delete": delete}]
            writes, mine = self._marked(writes, write.name, list(write.pools))
        self._write_with_pool_bumps(writes, list(write.pools))
        self._bumps_done(write.name, mine)

    def _outstanding(self, name: str) -> OutstandingBumps:
        """The pools an apply or delete of quota `name` left to bump (its later transactions
        failed), and whose they are (`_marked`)."""
        item = self._read_one(OUTSTANDING_BUMPS_PK, name)
        if item is None:
            return OutstandingBumps()
        pools = tuple(sorted(str(p) for p in item.get("pools", [])))
        return OutstandingBumps(pools, str(item.get("token", "")))

    def _marked(
        self, writes: list[dict[str, Any]], name: str, pools: list[str]
    ) -> tuple[list[dict[str, Any]], str | None]:
        """`writes`, and when the bumps of `pools` do not all fit beside them, the put of the
        pools bumped after their transaction (`OUTSTANDING_BUMPS_PK`), and its token."""
        room = TRANSACTION_ITEMS - len(writes) - 1
        if len(pools) <= room + 1:
            return writes, None
        token = uuid.uuid4().hex
        return [*writes, outstanding_bumps_put(self._table, name, pools[room:], token)], token

    def _bumps_done(self, name: str, token: str | None) -> None:
        """Every bump of an apply or delete is written: the pools it marked outstanding are not
        (unless another apply or delete marked its own since)."""
        if token is None:
            return
        try:
            with aws_call("DeleteItem"):
                self._db.delete_item(
                    TableName=self._table,
                    Key=key(OUTSTANDING_BUMPS_PK, name),
                    ConditionExpression="#token = :token",
                    ExpressionAttributeNames={"#token": "token"},
                    ExpressionAttributeValues={":token": {"S": token}},
                )
        except ConditionFailed:
            pass  # another apply or delete's, which it removes when its own bumps are done

    def _write_with_pool_bumps(self, writes: list[dict[str, Any]], pools: list[str]) -> None:
        """`writes` in one transaction with the quota generation bumps of `pools` that fit
        beside them; the rest (a quota naming more pools than a transaction holds) right after,
        before the apply or delete returns. A failure between leaves those pools' leases decided
        on a copy as old as the launcher's cache (CONFIG_CACHE_SECONDS) at most."""
        bumps = [generation_bump(self._table, quota_pool_key(pool)) for pool in pools]
        room = TRANSACTION_ITEMS - len(writes)
        with aws_call("TransactWriteItems"):
            self._db.transact_write_items(TransactItems=[*writes, *bumps[:room]])
        for start in range(room, len(bumps), TRANSACTION_ITEMS):
            with aws_call("TransactWriteItems"):
                chunk = bumps[start : start + TRANSACTION_ITEMS]
                self._db.transact_write_items(TransactItems=chunk)

    def _read_one(self, kind: str, name: str) -> dict[str, Any] | None:
        return read_item(self._db, self._table, kind, name)


def _quota_of(item: dict[str, Any]) -> CapacityQuota | None:
    """The quota a stored item holds (None: it no longer parses, listed by `invalid()`)."""
    try:
        quota = parse_item("CapacityQuota", item)
    except StoredDocumentInvalid:
        return None
    assert isinstance(quota, CapacityQuota)
    return quota


def _stored_quota(item: dict[str, Any] | None) -> StoredQuota | None:
    """A quota's item as stored, with the pools it names (one that does not parse governs
    nothing: none)."""
    if item is None:
        return None
    quota = _quota_of(item)
    pools = () if quota is None else pools_named(quota)
    kept = item.get("kept")
    waiting = item.get(UNRESOLVED)
    return StoredQuota(
        str(item["document"]),
        None if kept is None else str(kept),
        pools,
        None if waiting is None else str(waiting),
    )


def _class_of(item: dict[str, Any] | None) -> PriorityClass | None:
    """The class a stored item holds (None: not stored, or it no longer parses)."""
    from capacity_launcher.domain.apis.priority_classes import parse_priority_class

    if item is None:
        return None
    try:
        return parse_priority_class(json.loads(str(item["document"])))
    except (CapacityLauncherError, KeyError, TypeError, ValueError):
        return None


def _while_stored_as(
    put: dict[str, Any], body: str, kept_body: str | None, waiting: str | None
) -> dict[str, Any]:
    """`put` only if the item is stored with `body`, `kept_body` and the mark of waiting for
    a class still (an apply that changes nothing: any write meanwhile sends it back to be
    checked and bumped)."""
    values: dict[str, Any] = {":document": {"S": body}}
    condition = "#document = :document AND "
    if kept_body is None:
        condition += "attribute_not_exists(kept)"
    else:
        condition += "kept = :kept"
        values[":kept"] = {"S": kept_body}
    if waiting is None:
        condition += f" AND attribute_not_exists({UNRESOLVED})"
    else:
        condition += f" AND {UNRESOLVED} = :waiting"
        values[":waiting"] = {"S": waiting}
    return {
        **put,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#document": "document"},
        "ExpressionAttributeValues": values,
    }
