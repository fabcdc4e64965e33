"""Each CapacityQuota's usage against its nominal quota, as a metric the sync emits each minute
(`QuotaUsageOfNominal`, 0..n: above 1 the quota borrows), by quota, NodePool and resource: what
the dashboard plots and an on-call engineer compares a team's use with."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from capacity_launcher.domain.apis.quotas import parse_amount
from capacity_launcher.observability import MetricUnit, emit_single

QUOTA_USAGE_OF_NOMINAL = "QuotaUsageOfNominal"


def usage_of_nominal(status: Mapping[str, Any]) -> Iterator[tuple[str, str, float]]:
    """(NodePool, resource, used / nominal) for each resource of a quota's status with a nominal
    quota above zero (a borrow-only resource has no ratio)."""
    used = {
        (flavor["name"], r["name"]): r["total"]
        for flavor in status.get("usage", [])
        for r in flavor["resources"]
    }
    for flavor in status.get("capacity", []):
        for r in flavor["resources"]:
            nominal = parse_amount(r["name"], r["total"])
            if nominal > 0:
                amount = parse_amount(r["name"], used.get((flavor["name"], r["name"]), "0"))
                yield flavor["name"], r["name"], float(amount / nominal)


def emit_quota_usage(statuses: Mapping[str, Mapping[str, Any]]) -> None:
    for quota, status in sorted(statuses.items()):
        for pool, resource, ratio in usage_of_nominal(status):
            emit_single(
                QUOTA_USAGE_OF_NOMINAL,
                MetricUnit.NoUnit,
                ratio,
                {"quota": quota, "nodePool": pool, "resource": resource},
            )


__all__ = ["QUOTA_USAGE_OF_NOMINAL", "emit_quota_usage", "usage_of_nominal"]
