"""The one Logger, Tracer and Metrics of the service; every module imports them from here."""

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "capacity-launcher"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace="CapacityLauncher", service=SERVICE)

__all__ = ["SERVICE", "MetricUnit", "logger", "metrics", "tracer"]
