"""A pool's members: one item per instance counted in its usage (`Limits#<pool>`/`Member#<id>`).

Counting puts the member and adds its amount to the pool's usage (and to the quota usage that
governs its requester) in one transaction; uncounting deletes it and takes the amount back the
same way. Each is conditioned on the member's absence or presence, so whichever writer (a lease
settling, instance events, reconciliation) gets there first counts or releases an instance, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capacity_launcher.adapters import quota_usage
from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.config_items import members_held, pool_quota_generation_check
from capacity_launcher.adapters.dynamodb import batch_get, from_item, key, to_item
from capacity_launcher.adapters.launch_records import instance_pk
from capacity_launcher.adapters.pool_items import (
    LEASE_PREFIX,
    MEMBER_PREFIX,
    NoQuotas,
    PoolItems,
    QuotaHold,
    QuotaSource,
    counted_in,
    hold_of,
    limits_pk,
    member_of,
)
from capacity_launcher.domain.accounting.pool_usage import Lease, Member
from capacity_launcher.domain.accounting.quota_leases import governing
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import ConditionFailed, QuotaExceeded
from capacity_launcher.domain.quantities import Resources

INSTANCE_SK = "Instance"


class PoolMemberStore:
    def __init__(
        self,
        table_name: str,
        dynamodb: Any | None = None,
        *,
        clock: Callable[[], float],
        quotas: QuotaSource | None = None,
    ) -> None:
        self._items = PoolItems(table_name, dynamodb)
        self._clock = clock
        self._quotas = quotas or NoQuotas()

    def member(self, pool: str, instance_id: str) -> Member | None:
        with aws_call("GetItem"):
            item = self._items.db.get_item(
                TableName=self._items.table,
                Key=key(limits_pk(pool), MEMBER_PREFIX + instance_id),
                ConsistentRead=True,
            ).get("Item")
        return member_of(from_item(item)) if item else None

    def members(self, pool: str) -> list[Member]:
        """Every instance counted in the pool's usage (one Query of the pool's partition)."""
        return self._items.members(pool)

    def count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        *,
        unless_released: bool = False,
        requester: str | None = None,
    ) -> bool:
        """Count one instance in its pool's usage; False if it is counted already.

        With `unless_released`, also False if its instance item records a stop or termination
        (so a writer that saw the instance running before the event cannot count it back). When
        a quota governs `requester` in the pool, its quota usage counts it too, unconditionally:
        it runs (adopted, or started again), and counting the truth keeps new admissions out.
        """
        quotas = self._quotas.quota_set()
        try:
            return self._count(pool, instance_id, amount, unless_released, requester, quotas)
        except _QuotasMoved:
            # A quota naming the pool was applied or deleted since the copy the hold was
            # decided on: decided again on the stored quotas, once.
            fresh = self._quotas.quota_set(fresh=True)
            try:
                return self._count(pool, instance_id, amount, unless_released, requester, fresh)
            except _QuotasMoved:
                return False  # moving again: the next reconciliation counts it

    def _count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        unless_released: bool,
        requester: str | None,
        quotas: QuotaSet,
    ) -> bool:
        hold = _hold_in(quotas, requester, pool)
        now = int(self._clock())
        items = self._items.member_puts(pool, [instance_id], {instance_id: amount}, hold, now)
        items += self._items.usage_updates(pool, amount, hold)
        if unless_released:
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self._items.table,
                        "Key": key(instance_pk(instance_id), INSTANCE_SK),
                        "ConditionExpression": (
                            "attribute_exists(pk) AND attribute_not_exists(releasedAt)"
                        ),
                    }
                }
            )
        return self._written_under(items, quotas, pool)

    def hold(self, member: Member, requester: str, quotas: QuotaSet | None = None) -> bool:
        """Make a member count in the quota usage that governs `requester` in its pool now (under
        `quotas`, else the store's copy): one counted for its pool only (adopted, or its lease
        was reclaimed before it settled, or its quota was deleted and applied again) gains it;
        one whose quota changed cohort, or no longer covers it, moves or drops it. The member's
        change is conditioned on the hold it had and on the pool's quota generation the hold
        was decided at, and travels with both usage changes; False when nothing changed (or a
        concurrent writer, or an apply naming the pool, came first)."""
        quotas = quotas or self._quotas.quota_set()
        wanted = _hold_in(quotas, requester, member.pool)
        had = hold_of(member)
        if wanted == had:
            return False
        items = [{"Update": self._hold_update(member, had, wanted)}]
        return self._moved(items, had, wanted, member.amount, quotas, member.pool)

    def hold_all(self, pool: str, quotas: QuotaSet) -> bool:
        """Every member and open lease of `pool` made to hold the quota usage that governs its
        requester under `quotas`, then the pool's quota generation noted as the one its members
        are held at (docs/quotas.md, "Members held after an apply"). A member whose item names
        no requester (counted for its pool only) is known by its instance record's. False when
        the pool's quota generation moved meanwhile: the caller reads the quotas again."""
        counted = counted_in(self._items.live(pool))  # one Query: open leases and members
        members = [c for c in counted if isinstance(c, Member)]
        requesters = self._recorded_requesters([m for m in members if m.requester is None])
        for member in members:
            requester = member.requester or requesters.get(member.instance_id)
            if requester is not None:
                self.hold(member, requester, quotas)
        for lease in counted:
            if isinstance(lease, Lease) and lease.requester is not None:
                self._hold_lease(lease, lease.requester, quotas)
        generation = quotas.generation_in(pool)
        if generation is None:
            return True
        try:
            self._items.transact([{"Update": members_held(self._items.table, pool, generation)}])
        except ConditionFailed:
            return False
        return True

    def _hold_lease(self, lease: Lease, requester: str, quotas: QuotaSet) -> bool:
        """An open lease made to hold the quota usage governing `requester` under `quotas`
        (one admitted before a quota named its pool, or before its quota moved cohort), as
        `hold` does a member's; its settle, conditioned on the hold it read, reads it again."""
        wanted = _hold_in(quotas, requester, lease.pool)
        had = hold_of(lease)
        if wanted == had:
            return False
        condition = "attribute_exists(pk) AND attribute_not_exists(settled) AND "
        values: dict[str, Any] = {}
        if had is None:
            condition += "attribute_not_exists(quotaUsage)"
        else:
            condition += "quotaUsage = :had"
            values[":had"] = had[0]
        update: dict[str, Any] = {
            "TableName": self._items.table,
            "Key": key(limits_pk(lease.pool), LEASE_PREFIX + lease.lease_id),
            "UpdateExpression": "REMOVE quotaUsage",  # its requester stays named
            "ConditionExpression": condition,
        }
        if wanted is not None:
            update["UpdateExpression"] = "SET quotaUsage = :usage"
            values[":usage"] = wanted[0]
        if values:
            update["ExpressionAttributeValues"] = to_item(values)
        return self._moved([{"Update": update}], had, wanted, lease.amount, quotas, lease.pool)

    def _moved(
        self,
        items: list[dict[str, Any]],
        had: QuotaHold,
        wanted: QuotaHold,
        amount: Resources,
        quotas: QuotaSet,
        pool: str,
    ) -> bool:
        """`items` (a hold's change) with `amount` taken from the usage `had` and added to the
        one `wanted`, written under the pool's quota generation `quotas` were read at; False
        when a condition failed."""
        if had is not None:
            taken = Resources.ZERO - amount
            items.append({"Update": quota_usage.update(self._items.table, *had, taken)})
        if wanted is not None:
            items.append({"Update": quota_usage.update(self._items.table, *wanted, amount)})
        try:
            return self._written_under(items, quotas, pool)
        except _QuotasMoved:
            return False

    def _recorded_requesters(self, members: list[Member]) -> dict[str, str]:
        """The requester each member's instance record names (one BatchGetItem per 100)."""
        keys = [key(instance_pk(m.instance_id), INSTANCE_SK) for m in members]
        found = batch_get(self._items.db, self._items.table, keys) if keys else []
        return {str(i["instanceId"]): str(i["requester"]) for i in found if i.get("requester")}

    def _hold_update(self, member: Member, had: QuotaHold, wanted: QuotaHold) -> dict[str, Any]:
        """The member's hold moved from `had` to `wanted`, only if it still has `had`."""
        condition = "attribute_exists(sk) AND attribute_not_exists(quotaUsage)"
        values: dict[str, Any] = {}
        if had is not None:
            condition = "attribute_exists(sk) AND quotaUsage = :had"
            values[":had"] = had[0]
        if wanted is None:
            expression = "REMOVE quotaUsage, requester"
        else:
            expression = "SET quotaUsage = :usage, requester = :requester"
            values |= {":usage": wanted[0], ":requester": wanted[1]}
        return {
            "TableName": self._items.table,
            "Key": key(limits_pk(member.pool), MEMBER_PREFIX + member.instance_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
        }

    def uncount(self, member: Member) -> bool:
        """Take one counted instance out of its pool's usage; False if it was taken out before."""
        delete = {
            "Delete": {
                "TableName": self._items.table,
                "Key": key(limits_pk(member.pool), MEMBER_PREFIX + member.instance_id),
                "ConditionExpression": "attribute_exists(sk)",
            }
        }
        amount = Resources.ZERO - member.amount
        return self._written(
            [delete, *self._items.usage_updates(member.pool, amount, hold_of(member))]
        )

    def uncount_instance(self, pool: str, instance_id: str) -> bool:
        """`uncount` by id, for the amount the instance was counted for."""
        member = self.member(pool, instance_id)
        return member is not None and self.uncount(member)

    def _written(self, items: list[dict[str, Any]]) -> bool:
        """One transaction of `items`; False if one of its conditions failed."""
        try:
            self._items.transact(items)
        except ConditionFailed:
            return False
        return True

    def _written_under(self, items: list[dict[str, Any]], quotas: QuotaSet, pool: str) -> bool:
        """`_written`, conditioned on `pool`'s quota generation being the one `quotas` were read
        at (none read from a store: nothing to condition on); _QuotasMoved when that failed."""
        generation = quotas.generation_in(pool)
        if generation is None:
            return self._written(items)
        checked = [*items, pool_quota_generation_check(self._items.table, pool, generation)]
        try:
            self._items.transact(checked)
        except ConditionFailed as failed:
            if failed.failed_at(len(checked) - 1):
                raise _QuotasMoved from failed
            return False
        return True


class _QuotasMoved(Exception):
    """A hold's transaction failed on its pool's quota generation: decided on an older copy."""


def _hold_in(quotas: QuotaSet, requester: str | None, pool: str) -> QuotaHold:
    """Where an instance of `requester` in `pool` counts for its quota under `quotas` (None:
    nowhere)."""
    if requester is None:
        return None
    try:
        quota = governing(quotas.quotas, requester, pool)
    except QuotaExceeded:
        return None  # quotas name the pool, none covers it: it counts for the pool only
    if quota is None:
        return None
    return quota_usage.quota_usage_pk(quota.cohort_key, pool), requester
