"""`get quotas`: each CapacityQuota with its status, computed now from what runs (read-only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.domain.config import to_document
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.quota_admission import UsageKey
from capacity_launcher.domain.quota_status import quota_status
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment


def usage_by_requester(
    limits: PoolLimitsStore, instances: InstanceRecords, pools: Iterable[str]
) -> dict[UsageKey, Resources]:
    """What each requester runs in each pool: the pools' counted members, by their instance
    items' requester. In-flight leases carry no requester and are left out."""
    usage: dict[UsageKey, Resources] = {}
    for pool in sorted(set(pools)):
        members = limits.members(pool)
        items = instances.many([m.instance_id for m in members])
        for member in members:
            record = items.get(member.instance_id)
            requester = record.requester if record else None
            if requester:
                key = (str(requester), pool)
                usage[key] = usage.get(key, Resources.ZERO) + member.amount
    return usage


def get_quotas(args: argparse.Namespace, deployment: Deployment) -> int:
    dynamodb = deployment.client("dynamodb")
    store = ConfigStore(deployment.state_table, dynamodb)
    quotas = store.capacity_quotas()
    invalid = [d for d in store.invalid() if d.kind == "CapacityQuota"]
    pools = {p.name for p in store.node_pools()}
    limits = PoolLimitsStore(deployment.state_table, deployment.limit_lease_seconds, dynamodb)
    named = {f.name for q in quotas for f in q.flavors()} & pools
    usage = usage_by_requester(limits, InstanceRecords(deployment.state_table, dynamodb), named)
    shown: list[dict[str, Any]] = [
        {**to_document(q), "status": quota_status(q, quotas, usage, pools)}
        for q in sorted(quotas, key=lambda q: q.name)
    ]
    if args.output == "json":
        views.print_json(
            [
                *shown,
                *(
                    {"kind": d.kind, "metadata": {"name": d.name}, "status": {"invalid": d.reason}}
                    for d in invalid
                ),
            ]
        )
        return 0
    views.console().print(views.quotas(shown))
    for document in invalid:
        print(
            f"warning: {document.kind} {document.name} is stored but invalid "
            f"(re-apply or delete it): {document.reason}",
            file=sys.stderr,
        )
    return 0
