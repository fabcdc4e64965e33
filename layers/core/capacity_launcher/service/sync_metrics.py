"""What the reservation sync's minute publishes as metrics, beside its work: each reservation's
counts, reconciliation's drift, and how many requests wait and for how long, by team.

The waiting gauges read every live wait once a minute (the sparse WaitingRequests index, one
Query per shard: docs/queueing.md "Visible"), so their cost grows with the requests waiting, not
with history; the series are bounded by domain/records/wait_gauges.py (TOP_TEAMS and the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from capacity_launcher.domain.apis.quota_sets import requester_dimension
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.capacity.idle_reservations import idle_hours_at
from capacity_launcher.domain.capacity.reservation_state import StoredReservation
from capacity_launcher.domain.launch_request import MAX_CAPACITY_WAIT
from capacity_launcher.domain.records.wait_gauges import WaitGauge, total, wait_gauges
from capacity_launcher.observability import MetricUnit, emit_single, metrics
from capacity_launcher.service.ports import HeldWaits
from capacity_launcher.service.reconciliation import Reconciliation, ReconciliationReport

RESERVATION_TOTAL = "ReservationTotal"
RESERVATION_AVAILABLE = "ReservationAvailable"
RESERVATION_UTILIZATION = "ReservationUtilization"
# Paid and unused instance-hours since the sync first saw the reservation, and one datapoint per
# Capacity Reservation Underutilized published (ReservationUnderutilizedAlarm reads it).
RESERVATION_IDLE_HOURS = "ReservationIdleInstanceHours"
RESERVATIONS_UNDERUTILIZED = "ReservationsUnderutilized"
RECONCILIATION_DRIFT = "ReconciliationDrift"
# Instances whose tags disagreed with their records, tagged again (and those EC2 refused).
INSTANCES_RETAGGED = "InstancesRetagged"
INSTANCES_RETAG_FAILED = "InstancesRetagFailed"
# Requests Waiting, and the age of the oldest (since it was received): over all (dimension
# `service` only) and per team (dimension `requester`: the quotas' bounded requester dimension,
# as RequestOutcome's; never a producer's free text).
REQUESTS_WAITING = "RequestsWaiting"
OLDEST_WAIT = "OldestWaitSeconds"


def run_reconciliation(reconciliation: Reconciliation) -> ReconciliationReport:
    """Reconcile membership, and emit its drift and retag metrics."""
    report = reconciliation.run()
    metrics.add_metric(name=RECONCILIATION_DRIFT, unit=MetricUnit.Count, value=report.total_drift)
    for name, instances in (
        (INSTANCES_RETAGGED, report.retagged),
        (INSTANCES_RETAG_FAILED, report.retag_failed),
    ):
        if instances:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=len(instances))
    return report


def emit_reservation(stored: StoredReservation, now: datetime) -> None:
    """Per-reservation EMF metrics (dimension reservationId), as alarms and dashboard read them."""
    snapshot = stored.snapshot
    for name, unit, value in (
        (RESERVATION_TOTAL, MetricUnit.Count, float(snapshot.total)),
        (RESERVATION_AVAILABLE, MetricUnit.Count, float(snapshot.available)),
        (RESERVATION_UTILIZATION, MetricUnit.NoUnit, snapshot.utilization),
        (RESERVATION_IDLE_HOURS, MetricUnit.NoUnit, round(idle_hours_at(stored.idle, now), 4)),
    ):
        emit_single(name, unit, value, {"reservationId": snapshot.reservation_id})


class WaitGauges:
    """The minute's waiting gauges: every live wait read once, counted by team, published."""

    def __init__(
        self,
        waits: HeldWaits,
        quotas: Callable[[], Sequence[CapacityQuota]],
        now: Callable[[], datetime],
    ) -> None:
        self._waits = waits
        self._quotas = quotas
        self._now = now

    def run(self, waits: HeldWaits | None = None) -> list[WaitGauge]:
        """`waits`: the minute's read of the waits, shared with the backstop
        (service/minute_waits.py), else the store."""
        now = self._now()
        # Every live wait: none lasts past MAX_CAPACITY_WAIT from its receipt.
        live = (waits or self._waits).overdue_waits(now + MAX_CAPACITY_WAIT)
        team_of = partial(requester_dimension, self._quotas() if live else ())
        gauges = wait_gauges((wait.record for wait in live), now, team_of)
        every = total(gauges)
        # Published when nothing waits too: a flat 0 on the dashboard, not a gap.
        for gauge, dimensions in [(every, {}), *((g, {"requester": g.team}) for g in gauges)]:
            emit_single(REQUESTS_WAITING, MetricUnit.Count, float(gauge.waiting), dimensions)
            emit_single(OLDEST_WAIT, MetricUnit.Seconds, round(gauge.oldest_seconds, 1), dimensions)
        return gauges
