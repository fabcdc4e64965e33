"""`get quotas`: each CapacityQuota with the status the sync last stored (read-only).

The sync computes every quota's status each minute from the cohort-and-flavor quota usage items
admission keeps (service/quota_sync.py). A quota the sync has not seen yet (applied within the
last minute) gets its status computed now from the same items.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.quota_statuses import QuotaStatuses
from capacity_launcher.adapters.quota_usage_store import QuotaUsageStore
from capacity_launcher.domain.documents import to_document
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.quota_admission import UsageKey
from capacity_launcher.domain.quota_status import quota_status
from capacity_launcher.domain.quotas import CapacityQuota
from capacity_launcher.domain.status import format_timestamp
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import requirements_of, selected_names
from capacity_launcher_cli.output_formats import TABLES


def quota_usage(
    items: QuotaUsageStore, quotas: Iterable[CapacityQuota]
) -> dict[UsageKey, Resources]:
    """What each requester uses in each pool, from the quota usage items (one GetItem each)."""
    usage: dict[UsageKey, Resources] = {}
    for pk, pool in sorted({(q.usage_item(f.name), f.name) for q in quotas for f in q.flavors()}):
        for where, amount in items.quota_usage(pk, pool).items():
            usage[where] = usage.get(where, Resources.ZERO) + amount
    return usage


def quota_statuses(deployment: Deployment, store: ConfigStore) -> dict[str, dict[str, Any]]:
    """Each stored quota's status: as the sync last stored it, or computed now if it has not."""
    quotas = store.capacity_quotas()
    dynamodb = deployment.client("dynamodb")
    stored = QuotaStatuses(deployment.state_table, dynamodb).read()
    unseen = [q for q in quotas if q.name not in stored]
    if unseen:
        pools = {p.name for p in store.node_pools()}
        usage = quota_usage(QuotaUsageStore(deployment.state_table, dynamodb), quotas)
        now = format_timestamp(datetime.now(UTC))
        for quota in unseen:
            stored[quota.name] = {**quota_status(quota, quotas, usage, pools), "observedAt": now}
    return stored


def get_quotas(args: argparse.Namespace, deployment: Deployment) -> int:
    store = ConfigStore(deployment.state_table, deployment.client("dynamodb"))
    names = selected_names(store, "CapacityQuota", requirements_of(args))
    quotas = [q for q in store.capacity_quotas() if names is None or q.name in names]
    invalid = [d for d in store.invalid() if d.kind == "CapacityQuota"]
    stored = quota_statuses(deployment, store)
    shown: list[dict[str, Any]] = [
        {**to_document(q), "status": stored[q.name]} for q in sorted(quotas, key=lambda q: q.name)
    ]
    if args.output not in TABLES:
        views.emit(
            [
                *shown,
                *(
                    {"kind": d.kind, "metadata": {"name": d.name}, "status": {"invalid": d.reason}}
                    for d in invalid
                ),
            ],
            args,
        )
        return 0
    views.show(views.quotas(shown))
    for document in invalid:
        print(
            f"warning: {document.kind} {document.name} is stored but invalid "
            f"(re-apply or delete it): {document.reason}",
            file=sys.stderr,
        )
    return 0
