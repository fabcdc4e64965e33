"""`get TYPE NAME...` shows only the named items, one NAME as the object itself, and reports a
missing name as kubectl does (exit 1), unless --ignore-not-found (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import E2E_POOL, E2eCloud, run_cli, submit_through_queue


@pytest.fixture(scope="module")
def launched(e2e_cloud: E2eCloud, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fulfilled request with one instance, beside whatever else the suite submitted."""
    folder: Path = tmp_path_factory.mktemp("get-by-name")
    submit_through_queue(folder, {"nodePool": E2E_POOL, "count": 1})  # another record
    record = submit_through_queue(folder, {"nodePool": E2E_POOL, "count": 1})
    assert record["status"] == "Fulfilled", record
    return record


def test_a_request_by_its_id_is_that_record(launched: dict[str, Any]) -> None:
    request_id = launched["requestId"]

    as_json = run_cli("get", "request", request_id, "-o", "json")
    status = run_cli("get", "req", request_id, "-o", "jsonpath={.status}")
    table = run_cli("get", "requests", request_id)

    assert as_json.code == 0, as_json.err
    assert as_json.json()["requestId"] == request_id
    assert (status.code, status.out) == (0, "Fulfilled")
    rows = table.out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == [request_id]


def test_an_instance_by_its_id_is_that_instance(launched: dict[str, Any]) -> None:
    instance_id = launched["instances"][0]["instanceId"]

    found = run_cli("get", "instance", instance_id, "-o", "json")
    table = run_cli("get", "instances", instance_id)

    assert found.code == 0, found.err
    assert found.json()["instanceId"] == instance_id
    assert found.json()["requestId"] == launched["requestId"]
    assert [row.split()[0] for row in table.out.splitlines()[1:]] == [instance_id]


def test_a_reservation_by_its_id_is_that_reservation(e2e_cloud: E2eCloud) -> None:
    ec2 = e2e_cloud.client("ec2")
    for _ in range(2):  # targeted: no launch of another test lands in them
        ec2.create_capacity_reservation(
            InstanceType="t3.nano",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=1,
            InstanceMatchCriteria="targeted",
        )
    every = run_cli("get", "reservations", "-o", "json").json()["items"]
    assert len(every) > 1
    wanted = every[-1]["capacityReservationId"]

    found = run_cli("get", "reservation", wanted, "-o", "json")
    names = run_cli("get", "reservations", wanted, every[0]["capacityReservationId"], "-o", "name")

    assert found.code == 0, found.err
    assert found.json() == every[-1]
    assert sorted(names.out.split()) == sorted(
        f"reservation/{r['capacityReservationId']}" for r in (every[0], every[-1])
    )


@pytest.mark.parametrize(
    ("typed", "plural"),
    [
        ("request", "requests"),
        ("instance", "instances"),
        ("reservation", "reservations"),
        ("unavailable-offering", "unavailable-offerings"),
        ("nodepool", "nodepools"),
        ("ec2nodeclass", "ec2nodeclasses"),
        ("capacityquota", "capacityquotas"),
        ("capacityreservation", "capacityreservations"),
        ("priorityclass", "priorityclasses"),
        ("cohort", "cohorts"),
        ("nodeclaim", "nodeclaims"),
    ],
)
def test_a_missing_name_is_not_found_as_kubectl_says(
    e2e_cloud: E2eCloud, typed: str, plural: str
) -> None:
    missing = run_cli("get", typed, "does-not-exist")
    ignored = run_cli("get", typed, "does-not-exist", "--ignore-not-found", "-o", "json")

    assert (missing.code, missing.out) == (1, "")
    assert missing.err == f'Error from server (NotFound): {plural} "does-not-exist" not found\n'
    assert (ignored.code, ignored.out, ignored.err) == (0, "", "")


def test_found_names_print_and_each_missing_one_is_reported(launched: dict[str, Any]) -> None:
    request_id = launched["requestId"]

    result = run_cli("get", "requests", request_id, "nope", "-o", "name")

    assert (result.code, result.out) == (1, f"request/{request_id}\n")
    assert result.err == 'Error from server (NotFound): requests "nope" not found\n'


def test_types_of_one_name_refuse_several(e2e_cloud: E2eCloud) -> None:
    result = run_cli("get", "nodepool", "general", "e2e")

    assert result.code == 2
    assert "get nodepools takes one NAME" in result.err
