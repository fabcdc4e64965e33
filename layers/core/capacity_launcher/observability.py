"""The one Logger and Metrics of the service; every module imports them from here.

There is no Powertools Tracer: it needs aws-xray-sdk, which brings its own 30 MB botocore into
the layer and adds ~0.3 s to every cold start. Lambda's active tracing (Tracing: Active in the
template) still records each invocation in X-Ray.
"""

import warnings
from collections.abc import Mapping, Sequence

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

SERVICE = "capacity-launcher"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="CapacityLauncher", service=SERVICE)

# The sync and instance-events functions often have nothing to count (raise_on_empty_metrics
# stays False): Powertools then warns on every invocation. Only that one warning is silenced.
EMPTY_METRICS_WARNING = "No application metrics to publish"
warnings.filterwarnings("ignore", message=EMPTY_METRICS_WARNING, category=UserWarning)


def emit_single(name: str, unit: MetricUnit, value: float, dimensions: Mapping[str, str]) -> None:
    """One metric with dimensions of its own (beside `service`), flushed at once: for series split
    by pool, reservation, quota... which the shared `metrics` (one dimension set) cannot carry."""
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=metrics.namespace,
        default_dimensions=metrics.default_dimensions,
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)


def emit_sets(
    name: str, unit: MetricUnit, value: float, dimension_sets: Sequence[Mapping[str, str]]
) -> None:
    """One value of a metric counted under several dimension sets at once (`service` is added to
    each), in one EMF document (a Dimensions array per set), flushed at once: one metric per
    set in CloudWatch, so a percentile can be read per pool, per team and over all (percentiles
    of separate series cannot be combined later)."""
    emf = AmazonCloudWatchEMFProvider(namespace=metrics.namespace, service=SERVICE)
    emf.add_metric(name=name, unit=unit, value=value)
    first, *others = dimension_sets
    for key, dimension in first.items():
        emf.add_dimension(name=key, value=dimension)
    for dimensions in others:
        emf.add_dimensions(**{**dimensions, "service": SERVICE})
    emf.flush_metrics()


__all__ = ["SERVICE", "MetricUnit", "emit_sets", "emit_single", "logger", "metrics"]
