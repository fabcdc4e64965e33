"""Reconciliation: pool usage recomputed from the instances that really exist, plus live leases.

Runs inside the reservation sync. What it repairs: leases of dead workers (reclaimed), usage that
leaked (a lost termination event, a crash between launch and settle), instances a crashed worker
launched but never recorded (adopted from their `capacity-launcher:request-id` tag). What it
reports: drift, the difference between stored and recomputed usage, in instances.

Reads are ordered so that a race with a concurrent launcher can only overcount, never undercount
(an overcount is safe and repaired a minute later): stored usage first, then leases, then
instances; the repair is applied as a delta (DynamoDB ADD), so limits reserved after the reads
are kept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from capacity_launcher.adapters.instance_records import item_resources
from capacity_launcher.adapters.pool_limits import Lease
from capacity_launcher.domain.config import NodePool
from capacity_launcher.domain.instance_types import InstanceTypeInfo
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.tags import NODE_CLASS, NODE_POOL, REQUEST_ID, REQUESTER
from capacity_launcher.observability import logger

# Instances that hold usage; stopping and stopped ones released it when their event arrived.
LIVE_STATES = frozenset({"pending", "running"})
# A released instance seen running this much later was started again, not described late.
REARM_AFTER_SECONDS = 300


class PoolUsage(Protocol):
    def usage(self, pool: str) -> Resources: ...
    def leases(self) -> list[Lease]: ...
    def reclaim(self, lease: Lease) -> bool: ...
    def release(self, pool: str, amount: Resources) -> None: ...


class ManagedInstances(Protocol):
    def find_managed(
        self, tag_filters: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]: ...


class InstanceItems(Protocol):
    def many(self, instance_ids: Sequence[str]) -> dict[str, dict[str, Any]]: ...
    def adopt(self, items: Sequence[Mapping[str, Any]]) -> list[str]: ...
    def rearm(self, instance_id: str) -> None: ...


class InstanceFacts(Protocol):
    def offered(
        self, zones: Sequence[str], names: Sequence[str] | None = None
    ) -> list[InstanceTypeInfo]: ...


class Pools(Protocol):
    def node_pools(self) -> list[NodePool]: ...


@dataclass
class ReconciliationReport:
    drift: dict[str, int] = field(default_factory=dict)
    reclaimed: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    # reservation id -> requester -> live instances of ours in it
    usage_by_reservation: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total_drift(self) -> int:
        return sum(self.drift.values())


class Reconciliation:
    def __init__(
        self,
        limits: PoolUsage,
        instances: ManagedInstances,
        items: InstanceItems,
        facts: InstanceFacts,
        pools: Pools,
        now: Callable[[], datetime],
    ) -> None:
        self._limits = limits
        self._instances = instances
        self._items = items
        self._facts = facts
        self._pools = pools
        self._now = now

    def run(self) -> ReconciliationReport:
        report = ReconciliationReport()
        stored = {
            p.metadata.name: self._limits.usage(p.metadata.name) for p in self._pools.node_pools()
        }
        reclaimed: dict[str, Resources] = defaultdict(lambda: Resources.ZERO)
        recomputed: dict[str, Resources] = defaultdict(lambda: Resources.ZERO)
        now_epoch = int(self._now().timestamp())
        for lease in self._limits.leases():
            if lease.expires_at < now_epoch and self._limits.reclaim(lease):
                reclaimed[lease.pool] += lease.amount
                report.reclaimed.append(f"{lease.pool}/{lease.lease_id}")
            elif lease.expires_at >= now_epoch:
                recomputed[lease.pool] += lease.amount
        live = [
            i
            for i in self._instances.find_managed()
            if i.get("State", {}).get("Name") in LIVE_STATES
        ]
        items = self._items.many([i["InstanceId"] for i in live])
        orphans = [i for i in live if i["InstanceId"] not in items]
        adopted_items = self._adoptable(orphans)
        report.adopted = self._items.adopt(list(adopted_items.values()))
        for instance in live:
            instance_id = instance["InstanceId"]
            item = items.get(instance_id) or adopted_items.get(instance_id)
            tags = _tags(instance)
            pool = (item or {}).get("nodePool") or tags.get(NODE_POOL)
            if item is not None and item.get("releasedAt"):
                if not _long_ago(str(item["releasedAt"]), self._now()):
                    continue  # its stop is recent: EC2's list may lag behind the event
                # Released on a stop, running again (started outside our control): count it again.
                self._items.rearm(instance_id)
            if pool:
                recomputed[pool] += item_resources(item) if item else Resources(instances=1)
            reservation = instance.get("CapacityReservationId")
            if reservation:
                requester = (item or {}).get("requester") or tags.get(REQUESTER)
                by_requester = report.usage_by_reservation.setdefault(reservation, {})
                if requester:  # no requester, no key: usage is never keyed on an absent value
                    by_requester[requester] = by_requester.get(requester, 0) + 1
        for pool in sorted(set(stored) | set(recomputed)):
            before = (stored[pool] if pool in stored else self._limits.usage(pool)) - reclaimed[
                pool
            ]
            after = recomputed[pool]
            if before != after:
                self._limits.release(pool, before - after)
                report.drift[pool] = abs(before.instances - after.instances)
                logger.warning(
                    "pool usage repaired",
                    extra={"nodePool": pool, "stored": str(before), "recomputed": str(after)},
                )
            else:
                report.drift[pool] = 0
        return report

    def _adoptable(self, orphans: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Instance items for orphans that name their request: what the crashed worker missed."""
        adoptable = [o for o in orphans if _tags(o).get(REQUEST_ID)]
        if not adoptable:
            return {}
        zones = sorted({o.get("Placement", {}).get("AvailabilityZone", "") for o in adoptable})
        names = sorted({o["InstanceType"] for o in adoptable})
        facts = {f.name: f for f in self._facts.offered(zones, names)}
        return {
            o["InstanceId"]: _adopted_item(o, facts.get(o["InstanceType"]), self._now())
            for o in adoptable
        }


def _long_ago(timestamp: str, now: datetime) -> bool:
    try:
        released = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return True
    return (now - released).total_seconds() > REARM_AFTER_SECONDS


def _tags(instance: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _adopted_item(
    instance: Mapping[str, Any], info: InstanceTypeInfo | None, now: datetime
) -> dict[str, Any]:
    tags = _tags(instance)
    resources = info.resources() if info else Resources(instances=1)
    reservation = instance.get("CapacityReservationId")
    capacity_type = "on-demand"
    if instance.get("InstanceLifecycle") == "spot":
        capacity_type = "spot"
    elif reservation:
        capacity_type = "reserved"
    launched_at = instance.get("LaunchTime")
    return {
        "instanceId": instance["InstanceId"],
        "requestId": tags.get(REQUEST_ID),
        "nodePool": tags.get(NODE_POOL),
        "nodeClass": tags.get(NODE_CLASS),
        "requester": tags.get(REQUESTER),
        "instanceType": instance["InstanceType"],
        "zone": instance.get("Placement", {}).get("AvailabilityZone"),
        "capacityType": capacity_type,
        "capacityReservationId": reservation,
        "cpu": resources.cpu,
        "memoryMiB": resources.memory_mib,
        "gpu": resources.gpu,
        "state": instance.get("State", {}).get("Name", "running"),
        "launchedAt": launched_at.isoformat() if isinstance(launched_at, datetime) else None,
        "adoptedAt": now.isoformat(),
    }
