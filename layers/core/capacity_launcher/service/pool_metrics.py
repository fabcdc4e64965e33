"""Each NodePool's usage against its limits, as a metric the sync emits each minute
(`PoolUsageOfLimit`, 0..1: at 1 the pool launches no more of that resource), by pool and limited
resource: what the dashboard plots beside the quotas' usage of nominal, as Karpenter's dashboards
plot a NodePool's usage against its limits."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.quantities import DIMENSIONS, PoolLimits, Resources
from capacity_launcher.observability import MetricUnit, emit_single

POOL_USAGE_OF_LIMIT = "PoolUsageOfLimit"


def usage_of_limit(limits: PoolLimits, used: Resources) -> Iterator[tuple[str, float]]:
    """(resource, used / limit) for each resource the limits bound above zero (`unready` is no
    resource; a zero limit has no ratio)."""
    for dimension in DIMENSIONS:
        bound = limits.limit_for(dimension)
        if bound is not None and bound > 0:
            yield dimension, float(used.amount(dimension) / bound)


def emit_pool_usage(pools: Sequence[NodePool], usage: Mapping[str, Resources]) -> None:
    """The ratio of every limited resource of every pool whose usage was read (`usage`)."""
    for pool in sorted(pools, key=lambda p: p.metadata.name):
        name, limits = pool.metadata.name, pool.spec.limits
        if limits is None or name not in usage:
            continue
        for resource, ratio in usage_of_limit(limits, usage[name]):
            emit_single(
                POOL_USAGE_OF_LIMIT,
                MetricUnit.NoUnit,
                ratio,
                {"nodePool": name, "resource": resource},
            )


__all__ = ["POOL_USAGE_OF_LIMIT", "emit_pool_usage", "usage_of_limit"]
