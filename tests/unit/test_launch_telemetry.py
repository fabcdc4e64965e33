"""The launcher's metrics count outcomes once: a re-check that still waits is not a new wait."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.observability import metrics
from capacity_launcher.service.launch import LaunchReport
from capacity_launcher.service.telemetry import (
    LAUNCH_FULFILLED,
    LAUNCH_WAITING,
    REQUEST_LATENCY,
    REQUEST_OUTCOME,
    LaunchTelemetry,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)


def quota(name: str, requesters: list[str], prefixes: tuple[str, ...] = ()) -> CapacityQuota:
    resources = [{"name": "cpu", "nominalQuota": "8"}]
    return parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": {
                "requesters": requesters,
                "requesterPrefixes": list(prefixes),
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "training", "resources": resources}],
                    }
                ],
            },
        }
    )


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


def _emitted(output: str, name: str) -> list[dict[str, object]]:
    """The EMF documents single metrics printed for `name`: dimensions and value, by document."""
    found = []
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        document = json.loads(line)
        definitions = document["_aws"]["CloudWatchMetrics"][0]
        if [m["Name"] for m in definitions["Metrics"]] == [name]:
            found.append(document)
    return found


def test_each_outcome_is_counted_by_pool_and_requester_with_its_latency(
    counted, capsys, monkeypatch
) -> None:
    # (as the template sets it for every function)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "capacity-launcher")
    # Given a fulfilled request of the ml team in pool training, 42 s from receipt to record, and a
    # Waiting one without a requester
    done = record("r-done", RequestStatus.FULFILLED).model_copy(
        update={
            "node_pool": "training",
            "requester": "ml-team",
            "finished_at": NOW + timedelta(seconds=42),
        }
    )
    waiting = record("r-wait", RequestStatus.WAITING).model_copy(update={"node_pool": "batch"})
    # When the group is counted, with a quota declaring the ml team
    quotas = (quota("ml", ["ml-team"]),)
    LaunchTelemetry(lambda: quotas).served(
        LaunchReport(records={"r-done": done, "r-wait": waiting})
    )
    output = capsys.readouterr().out
    # Then each outcome carries its pool, requester and status as dimensions
    outcomes = _emitted(output, REQUEST_OUTCOME)
    assert sorted(
        (o["nodePool"], o["requester"], o["status"], o[REQUEST_OUTCOME]) for o in outcomes
    ) == [("batch", "none", "Waiting", [1.0]), ("training", "ml-team", "Fulfilled", [1.0])]
    dimensions = outcomes[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
    assert set(dimensions) == {"service", "nodePool", "requester", "status"}
    # And only the finished request has a latency, in seconds
    (latency,) = _emitted(output, REQUEST_LATENCY)
    assert (latency["nodePool"], latency["requester"], latency[REQUEST_LATENCY]) == (
        "training", "ml-team", [42.0],
    )  # fmt: skip
    assert latency["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] == "Seconds"


def test_the_requester_dimension_takes_only_values_the_quotas_declare(counted, capsys) -> None:
    # Given quotas declaring team-ml by name and the CI teams by the prefix ci-
    quotas = (quota("ml", ["team-ml"]), quota("ci", ["ci-main"], prefixes=("ci-",)))
    # And requests from team-ml, a CI team, a team no quota knows and one in non-ASCII free text
    requesters = {"r-ml": "team-ml", "r-ci": "ci-nightly-42", "r-x": "someone", "r-u": "équipe"}
    records = {
        request_id: record(request_id, RequestStatus.FULFILLED).model_copy(
            update={"node_pool": "training", "requester": requester}
        )
        for request_id, requester in requesters.items()
    }
    # When the group is counted
    LaunchTelemetry(lambda: quotas).served(LaunchReport(records=records))
    # Then the dimension names a declared requester, a declared prefix, or `other`: never the
    # free text itself (each new value would be a new billed metric; CloudWatch takes ASCII only)
    outcomes = _emitted(capsys.readouterr().out, REQUEST_OUTCOME)
    assert sorted(o["requester"] for o in outcomes) == ["ci-*", "other", "other", "team-ml"]
