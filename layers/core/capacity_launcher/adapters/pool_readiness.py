"""limits.unready: which of a pool's instances are ready, and the lease's gate on the rest.

An instance is **unready** from its lease until the sync has seen it `running` with both EC2
status checks `ok` (DescribeInstanceStatus); a lease not yet settled counts as its `count`
unready instances (the refusal is the domain's `unready_refusal`, asked by
service/admission.py). The sync marks each ready member with a `Ready#<instance>` item in the
pool's partition, in a transaction that bumps the pool usage item's `version`. Every lease,
settle and release bumps that version too, so a lease that counted the unready instances
conditions its usage update on the version it read: whatever changed the count since makes it
decide again (docs/provisioner.md, "limits.unready").
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import all_pages, aws_call, error_code, error_message
from capacity_launcher.adapters.dynamodb import from_item, key
from capacity_launcher.adapters.pool_items import (
    LEASE_PREFIX,
    MEMBER_PREFIX,
    USAGE,
    limits_pk,
)
from capacity_launcher.domain.accounting.pool_usage import Readiness
from capacity_launcher.domain.aws_errors import unknown_instance_ids
from capacity_launcher.domain.errors import ConditionFailed, LaunchFailed

READY_PREFIX = "Ready#"
_LIVE_UNTIL = "Member$"
_READY_UNTIL = "Ready$"
# DescribeInstanceStatus takes at most 100 instance ids per call.
_IDS_PER_CALL = 100


class PoolReadiness:
    """The pool partition's Ready# items, read and written beside its leases and members."""

    def __init__(self, table_name: str, dynamodb: Any, ec2: Any = None) -> None:
        self._table = table_name
        self._db = dynamodb
        self._ec2 = ec2

    def reading(self, pool: str) -> tuple[Readiness, int | None]:
        """The pool's count for `limits.unready`, and the usage item's version read before it
        (None before the first lease): a lease it admits conditions its usage update on that
        version (adapters/lease_admission.py), so whatever changed the count since makes the
        admission decide again."""
        version = self._version(pool)
        return self.count(pool), version

    def count(self, pool: str) -> Readiness:
        """The pool's instances launching or counted, and those of them not yet ready."""
        live = self._range(pool, LEASE_PREFIX, _LIVE_UNTIL)
        leased = sum(int(i.get("count", 0)) for i in live if i["sk"].startswith(LEASE_PREFIX))
        members = [i["sk"][len(MEMBER_PREFIX) :] for i in live if i["sk"].startswith(MEMBER_PREFIX)]
        return Readiness.of(leased, members, self._ready(pool))

    def mark_ready(self, pool: str) -> list[str]:
        """Mark the pool's members EC2 reports running with both status checks ok; forget the
        marks of members gone. Returns the instances marked now. The members and the marks
        are one key range (`Member#` sorts just before `Ready#`): one Query, and no more when
        every member is marked already (issue 38: the quiet minute's case)."""
        both = self._range(pool, MEMBER_PREFIX, _READY_UNTIL)
        members = _named(both, MEMBER_PREFIX)
        ready = _named(both, READY_PREFIX)
        for gone in sorted(ready - members):
            with aws_call("DeleteItem"):
                self._db.delete_item(
                    TableName=self._table, Key=key(limits_pk(pool), READY_PREFIX + gone)
                )
        marked = []
        for instance_id in sorted(self._passing(sorted(members - ready))):
            if self._mark(pool, instance_id):
                marked.append(instance_id)
        return marked

    def _mark(self, pool: str, instance_id: str) -> bool:
        items = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        **key(limits_pk(pool), READY_PREFIX + instance_id),
                        "instanceId": {"S": instance_id},
                    },
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": key(limits_pk(pool), MEMBER_PREFIX + instance_id),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key(limits_pk(pool), USAGE),
                    "UpdateExpression": "ADD #version :one",
                    "ExpressionAttributeNames": {"#version": "version"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        ]
        try:
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=items)
        except ConditionFailed:
            return False  # marked by another sync, or released meanwhile
        return True

    def _passing(self, instance_ids: list[str]) -> set[str]:
        """Those of the instances running with both status checks ok."""
        found: set[str] = set()
        for start in range(0, len(instance_ids), _IDS_PER_CALL):
            ids = instance_ids[start : start + _IDS_PER_CALL]
            with aws_call("DescribeInstanceStatus", fatal=LaunchFailed):
                statuses = self._statuses(ids)
            found |= {s["InstanceId"] for s in statuses if _passes(s)}
        return found

    def _statuses(self, ids: list[str]) -> list[dict[str, Any]]:
        """The statuses of `ids` EC2 knows. EC2 refuses the whole call for one id it does not
        know yet (a launch seconds ago: "Eventual consistency in the Amazon EC2 API") or any
        more; those are not ready, so they are left out and the others asked again, and the
        next sync looks at them again. Ids the refusal does not name are asked one by one."""
        asked = list(ids)
        while asked:
            try:
                pages = all_pages(
                    self._ec2.describe_instance_status, InstanceIds=asked, IncludeAllInstances=True
                )
                return [s for page in pages for s in page.get("InstanceStatuses", [])]
            except ClientError as error:
                unknown = unknown_instance_ids(error_code(error), error_message(error))
                if unknown is None or len(asked) == 1:
                    if unknown is not None:
                        return []
                    raise
                if not set(unknown) & set(asked):
                    return [s for one in asked for s in self._statuses([one])]
                asked = [i for i in asked if i not in set(unknown)]
        return []

    def _version(self, pool: str) -> int | None:
        """The pool usage item's version (None before its first lease)."""
        usage = self._range(pool, USAGE, USAGE)
        version = usage[0].get("version") if usage else None
        return None if version is None else int(version)

    def _ready(self, pool: str) -> set[str]:
        return _named(self._range(pool, READY_PREFIX, _READY_UNTIL), READY_PREFIX)

    def _range(self, pool: str, start: str, until: str) -> list[dict[str, Any]]:
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :until",
                ExpressionAttributeValues={
                    ":pk": {"S": limits_pk(pool)},
                    ":from": {"S": start},
                    ":until": {"S": until},
                },
                ConsistentRead=True,
            )
            return [from_item(i) for page in pages for i in page["Items"]]


def _named(items: list[dict[str, Any]], prefix: str) -> set[str]:
    """The instance ids of the items of `prefix` (`Member#<id>`, `Ready#<id>`)."""
    return {str(i["sk"])[len(prefix) :] for i in items if str(i["sk"]).startswith(prefix)}


def _passes(status: dict[str, Any]) -> bool:
    return bool(
        status.get("InstanceState", {}).get("Name") == "running"
        and status.get("InstanceStatus", {}).get("Status") == "ok"
        and status.get("SystemStatus", {}).get("Status") == "ok"
    )
