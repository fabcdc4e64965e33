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
from capacity_launcher.adapters.dynamodb import from_item, key, to_item
from capacity_launcher.adapters.launch_records import instance_pk
from capacity_launcher.adapters.pool_items import (
    MEMBER_PREFIX,
    NoQuotas,
    PoolItems,
    QuotaHold,
    QuotaSource,
    hold_of,
    limits_pk,
    member_of,
)
from capacity_launcher.domain.accounting.pool_usage import Member
from capacity_launcher.domain.accounting.quota_leases import governing
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
        hold = self._hold_for(requester, pool)
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
        return self._written(items)

    def hold(self, member: Member, requester: str) -> bool:
        """Make a member count in the quota usage that governs `requester` in its pool now: one
        counted for its pool only (adopted, or its lease was reclaimed before it settled) gains
        it; one whose quota changed cohort, or no longer covers it, moves or drops it. The
        member's change is conditioned on the hold it had, and travels with both usage changes;
        False when nothing changed (or a concurrent writer changed the member first)."""
        wanted = self._hold_for(requester, member.pool)
        had = hold_of(member)
        if wanted == had:
            return False
        items = [{"Update": self._hold_update(member, had, wanted)}]
        if had is not None:
            amount = Resources.ZERO - member.amount
            items.append({"Update": quota_usage.update(self._items.table, *had, amount)})
        if wanted is not None:
            items.append({"Update": quota_usage.update(self._items.table, *wanted, member.amount)})
        return self._written(items)

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

    def _hold_for(self, requester: str | None, pool: str) -> QuotaHold:
        """Where an instance of `requester` in `pool` counts for its quota (None: nowhere)."""
        if requester is None:
            return None
        try:
            quota = governing(self._quotas.quota_set().quotas, requester, pool)
        except QuotaExceeded:
            return None  # quotas name the pool, none covers it: it counts for the pool only
        if quota is None:
            return None
        return quota_usage.quota_usage_pk(quota.cohort_key, pool), requester

    def _written(self, items: list[dict[str, Any]]) -> bool:
        """One transaction of `items`; False if one of its conditions failed."""
        try:
            self._items.transact(items)
        except ConditionFailed:
            return False
        return True
