"""A pool's items in the state table: its usage, its stored limits, and the layout of its partition.

A pool's partition `Limits#<pool>` sorts as `Lease#` < `Member#` < `Settled#` < `Usage`: open
leases and members (live work) form one key range, which is all a recount reads; the proof that
a lease settled (`Settled#<id>`, kept a week) lies outside it, so the history of past requests
never costs the sync a read.

Usage is only ever changed in the same transaction as the item that explains the change (a lease
put, settled or reclaimed: `pool_leases`; a member put or deleted under a condition:
`pool_members`), so usage always equals the unsettled leases plus the members of the pool, and
no instance is counted or released twice, whichever writer gets there first. Every change bumps
the usage item's `version`, which is what a recompute (`service/usage_recount.recount_pool`,
adapters/pool_usage_store.py) conditions on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, Protocol

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.config_items import POOL_SET_KEY
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.domain.accounting.pool_usage import Lease, Member
from capacity_launcher.domain.apis.documents import Revisions, is_revision
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import NodePoolChanged, NodePoolDeleted
from capacity_launcher.domain.quantities import (
    CPU,
    DIMENSIONS,
    GPU,
    INSTANCES,
    MEMORY,
    PoolLimits,
    Resources,
    limits_token,
)

USAGE = "Usage"
LEASE_PREFIX = "Lease#"
MEMBER_PREFIX = "Member#"
# A settled lease's proof of settlement: its own prefix, outside the live range below.
SETTLED_PREFIX = "Settled#"
# The live range's upper bound: '$' follows '#', so every `Member#...` key sorts below it.
_LIVE_UNTIL = "Member$"
# How long the proof of settlement is kept (longer than any redelivery).
SETTLED_MARKER_SECONDS = 7 * 24 * 3600
# An unsettled lease carries this (the sparse OpenLeases index's key): the sync reads only those.
OPEN_LEASES_INDEX = "OpenLeases"
OPEN_LEASE = "open"
# The instance types a lease narrowed to the room left covers (absent: every candidate).
LEASE_TYPES = "instanceTypes"
ATTRIBUTES = {CPU: "cpu", MEMORY: "memoryMiB", GPU: "gpu", INSTANCES: "instances"}
# (quota usage item, requester): where a lease or member is also counted for its quota.
QuotaHold = tuple[str, str] | None


class QuotaSource(Protocol):
    """Where leases and members read the quotas they decide with (the configuration store)."""

    def quota_set(self, *, fresh: bool = False) -> QuotaSet: ...

    def quota_generation(self, pool: str) -> int: ...

    # The container's copy noted: `pool`'s members held at quota generation `generation`.
    def note_members_held(self, pool: str, generation: int) -> None: ...


class NoQuotas:
    """No quota store: no quota governs, and no generation is checked."""

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        return QuotaSet(None)

    def quota_generation(self, pool: str) -> int:
        return 0

    def note_members_held(self, pool: str, generation: int) -> None:
        return None


def limits_pk(pool: str) -> str:
    return f"Limits#{pool}"


class PoolItems:
    """Reads and writes of one table's pool partitions, shared by the stores built on them."""

    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self.table = table_name
        self.db = dynamodb or client("dynamodb")

    def transact(self, items: list[dict[str, Any]]) -> None:
        with aws_call("TransactWriteItems"):
            self.db.transact_write_items(TransactItems=items)

    def usage_item(self, pool: str) -> tuple[Resources, int | None]:
        """The pool's usage and its version (None: never written), strongly consistent."""
        with aws_call("GetItem"):
            item = self.db.get_item(
                TableName=self.table, Key=key(limits_pk(pool), USAGE), ConsistentRead=True
            ).get("Item")
        if not item:
            return Resources.ZERO, None
        values = from_item(item)
        version = values.get("version")
        return resources_of(values), None if version is None else int(version)

    def live(self, pool: str) -> list[dict[str, Any]]:
        """The pool's open leases and members: one key range, never its settled history."""
        between = {":from": {"S": LEASE_PREFIX}, ":until": {"S": _LIVE_UNTIL}}
        return self._partition(pool, "sk BETWEEN :from AND :until", between)

    def members(self, pool: str) -> list[Member]:
        """Every instance counted in the pool's usage (one Query of the pool's partition)."""
        prefix = {":prefix": {"S": MEMBER_PREFIX}}
        return [member_of(i) for i in self._partition(pool, "begins_with(sk, :prefix)", prefix)]

    def _partition(
        self, pool: str, sk_condition: str, values: dict[str, Any]
    ) -> list[dict[str, Any]]:
        condition = "pk = :pk AND " + sk_condition
        values = {":pk": {"S": limits_pk(pool)}, **values}
        with aws_call("Query"):
            pages = all_pages(
                self.db.query,
                TableName=self.table,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                ConsistentRead=True,
            )
            return [from_item(i) for page in pages for i in page["Items"]]

    def stored(self, pool: str) -> tuple[bool, PoolLimits | None]:
        """Whether the pool is stored, and its limits as last applied (strongly consistent)."""
        found, limits, _ = self._stored(pool)
        return found, limits

    def _stored(self, pool: str) -> tuple[bool, PoolLimits | None, str | None]:
        with aws_call("GetItem"):
            item = self.db.get_item(
                TableName=self.table,
                Key=key("NodePool", pool),
                ConsistentRead=True,
                ProjectionExpression="pk, #limits, #revision",
                ExpressionAttributeNames={"#limits": "limits", "#revision": "revision"},
            ).get("Item")
        token = (item or {}).get("limits", {}).get("S")
        revision = (item or {}).get("revision", {}).get("S")
        dumped = json.loads(token) if token else None
        limits = None if dumped is None else PoolLimits.model_validate(dumped)
        return item is not None, limits, revision

    def limits_in_force(self, pool: str, seen: Revisions | None = None) -> PoolLimits | None:
        """The stored limits; NodePoolDeleted when the pool is no longer stored, NodePoolChanged
        when it is stored at another revision than `seen` (the copy the request was resolved
        with: its requirements, not only its limits, may be other now)."""
        found, limits, revision = self._stored(pool)
        if not found:
            raise NodePoolDeleted(pool)
        if seen is not None and revision is not None and revision != seen.pool:
            raise NodePoolChanged(pool)
        return limits

    def pools_generation(self) -> int:
        """The NodePools' generation as stored now (strongly consistent; 0: never bumped)."""
        with aws_call("GetItem"):
            item = self.db.get_item(
                TableName=self.table,
                Key=key(*POOL_SET_KEY),
                ConsistentRead=True,
                ProjectionExpression="version",
            ).get("Item")
        return int(from_item(item).get("version", 0)) if item else 0

    def limits_check(
        self, pool: str, limits: PoolLimits | None, seen: Revisions | None = None
    ) -> dict[str, Any]:
        """The lease holds only if the pool is still stored, with the limits it was sized by (a
        pool stored before limits were kept beside it is not checked): a copy of the pool that
        outlived its deletion must not take it for a pool without limits. With `seen`, only if
        it is still stored at the revision the request was resolved with (a pool stored before
        revisions were kept is not checked)."""
        condition = "attribute_exists(pk) AND (attribute_not_exists(#limits) OR #limits = :limits)"
        names = {"#limits": "limits"}
        values = {":limits": {"S": limits_token(limits)}}
        if seen is not None:
            condition += " AND (attribute_not_exists(#revision) OR #revision = :revision)"
            names["#revision"] = "revision"
            values[":revision"] = {"S": seen.pool}
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": key("NodePool", pool),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def node_class_check(self, seen: Revisions) -> dict[str, Any]:
        """The lease holds only if the pool's NodeClass is stored at the revision the request
        was resolved with (its subnets, images, templates), or was stored before revisions were
        kept, or not at all (a class a pool names cannot be deleted)."""
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": key("NodeClass", seen.node_class_name),
                "ConditionExpression": "attribute_not_exists(#revision) OR #revision = :revision",
                "ExpressionAttributeNames": {"#revision": "revision"},
                "ExpressionAttributeValues": {":revision": {"S": seen.node_class}},
            }
        }

    def lease_extension(self, pool: str, lease_id: str, now: int, until: int) -> dict[str, Any]:
        """An Update that extends a lease to `until`, only while it is still open (neither
        settled, in either format (see `PoolLeaseStore.lease`), nor reclaimed) and unexpired at
        `now`: the sync's reclaim is conditioned on the lease having expired, so a lease
        extended here is never reclaimed under the launch that took it up."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": key(limits_pk(pool), LEASE_PREFIX + lease_id),
                "UpdateExpression": "SET expiresAt = :until",
                "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(settled)"
                " AND expiresAt >= :now",
                "ExpressionAttributeValues": {":until": {"N": str(until)}, ":now": {"N": str(now)}},
            }
        }

    def as_stored(self, pool: str, seen: Revisions) -> Revisions | None:
        """`seen` as the stored items spell it, when the stored pool and class are the documents
        the request was resolved with, stored by a version of the service that spells them
        otherwise (strongly consistent); None when either is another document now."""
        pool_revision = self._stored_revision("NodePool", pool, seen.pool)
        class_revision = self._stored_revision("NodeClass", seen.node_class_name, seen.node_class)
        if pool_revision is None or class_revision is None:
            return None
        return replace(seen, pool=pool_revision, node_class=class_revision)

    def _stored_revision(self, kind: str, name: str, seen: str) -> str | None:
        """The item's revision if its document is the one of revision `seen` (`seen` itself
        when the item has none or is gone: the lease's checks pass on those, or fail alone)."""
        with aws_call("GetItem"):
            item = self.db.get_item(
                TableName=self.table,
                Key=key(kind, name),
                ConsistentRead=True,
                ProjectionExpression="#document, #revision",
                ExpressionAttributeNames={"#document": "document", "#revision": "revision"},
            ).get("Item")
        revision = (item or {}).get("revision", {}).get("S")
        if item is None or revision is None or revision == seen:
            return seen
        return revision if is_revision(item.get("document", {}).get("S", ""), seen) else None

    def add_update(self, pool: str, amount: Resources) -> dict[str, Any]:
        """ADD to usage; every change bumps `version` (what `recompute` is conditional on)."""
        names = {f"#{a}": a for a in ATTRIBUTES.values()}
        names["#version"] = "version"
        values = {f":{ATTRIBUTES[d]}": {"N": str(v)} for d, v in amount.amounts().items()}
        values[":one"] = {"N": "1"}
        adds = [f"#{a} :{a}" for a in ATTRIBUTES.values()]
        return {
            "TableName": self.table,
            "Key": key(limits_pk(pool), USAGE),
            "UpdateExpression": "ADD " + ", ".join([*adds, "#version :one"]),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def usage_updates(self, pool: str, amount: Resources, hold: QuotaHold) -> list[dict[str, Any]]:
        """The pool's usage change, and the same change to its quota usage when it holds one."""
        updates = [{"Update": self.add_update(pool, amount)}]
        if hold is not None:
            updates.append({"Update": quota_usage.update(self.table, *hold, amount)})
        return updates

    def member_puts(
        self,
        pool: str,
        instance_ids: Sequence[str],
        amounts: Mapping[str, Resources],
        hold: QuotaHold,
        now: int,
    ) -> list[dict[str, Any]]:
        """One member put per instance, each only if that instance is not counted yet."""
        return [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": to_item(
                        {
                            "pk": limits_pk(pool),
                            "sk": MEMBER_PREFIX + instance_id,
                            "countedAt": now,
                            **attributes_of(amounts[instance_id]),
                            **hold_attributes(hold),
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            }
            for instance_id in instance_ids
        ]


def attributes_of(amount: Resources) -> dict[str, Decimal]:
    return {ATTRIBUTES[d]: v for d, v in amount.amounts().items()}


def resources_of(item: Mapping[str, Any]) -> Resources:
    return Resources.from_amounts({d: item.get(a, 0) for d, a in ATTRIBUTES.items()})


def hold_attributes(hold: QuotaHold) -> dict[str, str]:
    return {} if hold is None else {"quotaUsage": hold[0], "requester": hold[1]}


def held_as_read(lease: Lease) -> tuple[str, dict[str, Any]]:
    """A condition that the lease item still holds the quota usage `lease` was read with, and
    its values (an admission's hold after an apply may move it: adapters/pool_members.py)."""
    if lease.quota_usage is None:
        return "attribute_not_exists(quotaUsage)", {}
    return "quotaUsage = :held", {":held": {"S": lease.quota_usage}}


def hold_of(counted: Lease | Member | None) -> QuotaHold:
    """Where a lease or member holds quota usage (None: nowhere)."""
    if counted is None or counted.quota_usage is None or counted.requester is None:
        return None
    return counted.quota_usage, counted.requester


def counted_in(items: Iterable[Mapping[str, Any]]) -> list[Lease | Member]:
    """What usage is made of, of the items of a pool's live range: members and unsettled leases
    (an old-format settled marker is a `Lease#` item marked `settled`, in the live range until
    its TTL; see `PoolLeaseStore.lease`)."""
    counted: list[Lease | Member] = []
    for item in items:
        sk = str(item["sk"])
        if sk.startswith(MEMBER_PREFIX):
            counted.append(member_of(item))
        elif sk.startswith(LEASE_PREFIX) and not item.get("settled"):
            counted.append(lease_of(item))
    return counted


def member_of(item: Mapping[str, Any]) -> Member:
    return Member(
        pool=str(item["pk"]).removeprefix("Limits#"),
        instance_id=str(item["sk"]).removeprefix(MEMBER_PREFIX),
        amount=resources_of(item),
        counted_at=int(item.get("countedAt", 0)),
        quota_usage=item.get("quotaUsage"),
        requester=item.get("requester"),
    )


def settled_of(item: Mapping[str, Any]) -> Lease:
    """A `Settled#` marker, as the settled lease it proves."""
    return Lease(
        pool=str(item["pk"]).removeprefix("Limits#"),
        lease_id=str(item["sk"]).removeprefix(SETTLED_PREFIX),
        count=int(item.get("count", 0)),
        amount=Resources.ZERO,
        expires_at=0,
        settled=True,
    )


def lease_of(item: Mapping[str, Any]) -> Lease:
    return Lease(
        pool=str(item["pk"]).removeprefix("Limits#"),
        lease_id=str(item["sk"]).removeprefix(LEASE_PREFIX),
        count=int(item.get("count", 0)),
        amount=resources_of(item),
        expires_at=int(item.get("expiresAt", 0)),
        settled=bool(item.get("settled", False)),
        quota_usage=item.get("quotaUsage"),
        requester=item.get("requester"),
        instance_types=_instance_types(item.get(LEASE_TYPES)),
    )


def lease_types_attributes(types: frozenset[str] | None) -> dict[str, list[str]]:
    """The instance types a narrowed lease covers, as its item holds them (none: every one)."""
    return {} if types is None else {LEASE_TYPES: sorted(types)}


def _instance_types(stored: Any) -> frozenset[str] | None:
    return None if stored is None else frozenset(str(t) for t in stored)


def within(update: dict[str, Any], limits: PoolLimits | None, amount: Resources) -> None:
    """Condition a usage ADD of `amount` (`PoolItems.add_update`) on each limited dimension's
    headroom: whatever was read, it never takes the pool's usage over its limits."""
    conditions = []
    for dimension in DIMENSIONS:
        bound = limits.limit_for(dimension) if limits else None
        if bound is None:
            continue
        name = ATTRIBUTES[dimension]
        conditions.append(f"(attribute_not_exists(#{name}) OR #{name} <= :max_{name})")
        update["ExpressionAttributeValues"][f":max_{name}"] = {
            "N": str(bound - amount.amount(dimension))
        }
    if conditions:
        update["ConditionExpression"] = " AND ".join(conditions)
