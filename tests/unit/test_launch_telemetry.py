"""The launcher's metrics count outcomes once: a re-check that still waits is not a new wait."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from capacity_launcher.domain.status import RequestRecord, RequestStatus
from capacity_launcher.observability import metrics
from capacity_launcher.service.launch import LaunchReport
from capacity_launcher.service.telemetry import LAUNCH_FULFILLED, LAUNCH_WAITING, LaunchTelemetry

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)


def record(request_id: str, status: RequestStatus) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        status=status,
        requested=1,
        launched=0,
        received_at=NOW,
        finished_at=NOW,
    )


@pytest.fixture
def counted() -> Iterator[Callable[[], dict[str, float]]]:
    metrics.clear_metrics()

    def totals() -> dict[str, float]:
        return {name: sum(m["Value"]) for name, m in metrics.metric_set.items()}

    yield totals
    metrics.clear_metrics()


def test_a_request_that_still_waits_is_not_counted_as_a_new_wait(counted) -> None:
    # Given a group with a new wait, a re-checked wait and a fulfilled request
    report = LaunchReport(
        records={
            "r-new": record("r-new", RequestStatus.WAITING),
            "r-again": record("r-again", RequestStatus.WAITING),
            "r-done": record("r-done", RequestStatus.FULFILLED),
        }
    )
    # When it is counted, r-again having been Waiting when its delivery came
    LaunchTelemetry().served(report, {"r-again"})
    # Then one wait is counted (the new one) and the fulfilled request as before
    totals = counted()
    assert totals[LAUNCH_WAITING] == 1
    assert totals[LAUNCH_FULFILLED] == 1


def test_a_waiting_request_that_launches_on_its_recheck_is_counted(counted) -> None:
    # Given a request that was Waiting and is Fulfilled on its re-check
    report = LaunchReport(records={"r-wait": record("r-wait", RequestStatus.FULFILLED)})
    LaunchTelemetry().served(report, {"r-wait"})
    # Then its outcome counts, and no wait does
    totals = counted()
    assert totals[LAUNCH_FULFILLED] == 1
    assert LAUNCH_WAITING not in totals
