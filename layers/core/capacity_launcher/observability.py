"""The one Logger and Metrics of the service; every module imports them from here.

There is no Powertools Tracer: it needs aws-xray-sdk, which brings its own 30 MB botocore into
the layer and adds ~0.3 s to every cold start. Lambda's active tracing (Tracing: Active in the
template) still records each invocation in X-Ray.
"""

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "capacity-launcher"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="CapacityLauncher", service=SERVICE)

__all__ = ["SERVICE", "MetricUnit", "logger", "metrics"]
