"""The launcher's metrics (EMF through Powertools), named once so dashboards and alarms agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capacity_launcher.domain.apis.quota_sets import NO_REQUESTER, requester_dimension
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.observability import MetricUnit, emit_sets, emit_single, metrics

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from capacity_launcher.domain.apis.quotas import CapacityQuota
    from capacity_launcher.service.launch.progress import LaunchReport

INSTANCES_LAUNCHED = "InstancesLaunched"
LAUNCH_FULFILLED = "LaunchFulfilled"
LAUNCH_PARTIALLY_FULFILLED = "LaunchPartiallyFulfilled"
LAUNCH_FAILED = "LaunchFailed"
LAUNCH_REJECTED = "LaunchRejected"
# Bodies without a valid requestId: no record or event can be keyed, so only this counts them.
LAUNCH_DROPPED = "LaunchDropped"
LAUNCH_WAITING = "LaunchWaiting"
LAUNCH_THROTTLED = "LaunchThrottled"
CREATE_FLEET_CALLS = "CreateFleetCalls"
ICE_CACHE_HIT = "UnavailableOfferingHit"
ICE_CACHE_WRITE = "UnavailableOfferingWrite"
FALLBACK_TO_ON_DEMAND = "FallbackToOnDemand"
LIMIT_REJECTED = "LimitRejected"
# Shared fleets' instances left without their request's tags (reconciliation tags them later).
INSTANCES_LEFT_UNTAGGED = "InstancesLeftUntagged"
# Per served request, by pool and requester (the team): its outcome (dimension `status`), and for
# a finished one, seconds from its receipt to its record. The dashboard and on-call read these.
# The requester is bounded to what the quotas declare (domain.apis.quota_sets.requester_dimension).
REQUEST_OUTCOME = "RequestOutcome"
REQUEST_LATENCY = "RequestLatency"
# A dimension value for a request without a pool or requester (a dimension cannot be empty).
NO_VALUE = NO_REQUESTER

_BY_STATUS = {
    RequestStatus.FULFILLED: LAUNCH_FULFILLED,
    RequestStatus.PARTIALLY_FULFILLED: LAUNCH_PARTIALLY_FULFILLED,
    RequestStatus.FAILED: LAUNCH_FAILED,
    RequestStatus.REJECTED: LAUNCH_REJECTED,
    RequestStatus.WAITING: LAUNCH_WAITING,
}


class LaunchTelemetry:
    def __init__(self, quotas: Callable[[], Sequence[CapacityQuota]] = tuple) -> None:
        # The quotas whose requesters name the requester dimension (none known: all `other`).
        self._quotas = quotas

    def rejected(self) -> None:
        metrics.add_metric(name=LAUNCH_REJECTED, unit=MetricUnit.Count, value=1)

    def dropped(self) -> None:
        metrics.add_metric(name=LAUNCH_DROPPED, unit=MetricUnit.Count, value=1)

    def throttled(self) -> None:
        metrics.add_metric(name=LAUNCH_THROTTLED, unit=MetricUnit.Count, value=1)

    def served(self, report: LaunchReport, waiting_already: Collection[str] = ()) -> None:
        """Count a served group's outcomes; a re-check of a request that was Waiting already and
        still waits is not a new wait (its Launch Waiting event was published once too)."""
        metrics.add_metric(name=CREATE_FLEET_CALLS, unit=MetricUnit.Count, value=report.fleet_calls)
        if report.fallbacks_to_on_demand:
            metrics.add_metric(
                name=FALLBACK_TO_ON_DEMAND,
                unit=MetricUnit.Count,
                value=report.fallbacks_to_on_demand,
            )
        if report.untagged:
            metrics.add_metric(
                name=INSTANCES_LEFT_UNTAGGED, unit=MetricUnit.Count, value=len(report.untagged)
            )
        launched: dict[str, int] = {}
        quotas = self._quotas() if report.records else ()
        for request_id, record in report.records.items():
            if request_id in report.replayed:
                continue
            if record.status is RequestStatus.WAITING and request_id in waiting_already:
                continue
            metrics.add_metric(name=_BY_STATUS[record.status], unit=MetricUnit.Count, value=1)
            _by_pool_and_requester(record, requester_dimension(quotas, record.requester))
            if any(e.code == "LimitExceeded" for e in record.errors):
                metrics.add_metric(name=LIMIT_REJECTED, unit=MetricUnit.Count, value=1)
            for instance in record.instances:
                launched[instance.capacity_type] = launched.get(instance.capacity_type, 0) + 1
        _by_capacity_type(INSTANCES_LAUNCHED, launched)
        _by_capacity_type(ICE_CACHE_HIT, report.cache_hits)
        _by_capacity_type(ICE_CACHE_WRITE, report.cache_writes)


def _by_capacity_type(name: str, counts: dict[str, int]) -> None:
    for capacity_type, value in counts.items():
        emit_single(name, MetricUnit.Count, value, {"capacityType": capacity_type})


def _by_pool_and_requester(record: RequestRecord, requester: str) -> None:
    """The request's outcome and (once it has ended) its latency, by pool and requester; the
    latency also by pool alone, by requester alone and over all requests, so the dashboard's
    percentiles (p50, p90, p99) are each one series's own."""
    pool = record.node_pool or NO_VALUE
    dimensions = {"nodePool": pool, "requester": requester}
    outcome = {**dimensions, "status": str(record.status)}
    emit_single(REQUEST_OUTCOME, MetricUnit.Count, 1, outcome)
    if record.is_final:
        seconds = max((record.finished_at - record.received_at).total_seconds(), 0.0)
        sets: tuple[dict[str, str], ...] = (
            dimensions,
            {"nodePool": pool},
            {"requester": requester},
            {},
        )
        emit_sets(REQUEST_LATENCY, MetricUnit.Seconds, seconds, sets)
