"""A producer's path: submit (bus or queue) -> the launcher -> status record and status event."""

from __future__ import annotations

import json

from tests.e2e.conftest import E2E_POOL, REPO, E2eCloud, request_id, run_cli


def test_submit_on_the_bus_waits_for_the_record_and_the_status_event(e2e_cloud: E2eCloud) -> None:
    # Given a request for the example pool "general"
    rid = request_id("bus")

    # When it is submitted on the bus and followed to the end
    submitted = run_cli(
        "submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "2",
        "--requirement", "topology.kubernetes.io/zone=In:us-east-1b", "--tag", "project=e2e",
        "--wait",
    )  # fmt: skip

    # Then the printed record, `status` and the published event all tell the same outcome
    assert submitted.code == 0, submitted.err
    record = submitted.json()
    assert record["status"] == "Fulfilled"
    assert record["launched"] == 2
    assert {i["zone"] for i in record["instances"]} == {"us-east-1b"}
    status = run_cli("status", rid)
    assert status.code == 0
    assert status.json() == record
    events = e2e_cloud.events.for_request(rid)
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled"]
    assert events[0]["detail"] == record


def test_submit_through_the_queue_from_a_file(e2e_cloud: E2eCloud, tmp_path) -> None:
    # Given the example launch request, with a fresh id
    request = json.loads((REPO / "examples" / "launch-request.json").read_text())
    request["requestId"] = request_id("queue")
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))

    # When it is sent straight to the launch queue
    submitted = run_cli("submit", "-f", str(path), "--via", "queue", "--wait")

    # Then the training pool served it (no reservation here: on-demand, as the pool allows)
    assert submitted.code == 0, submitted.err
    record = submitted.json()
    assert record["requestId"] == request["requestId"]
    assert record["nodePool"] == "training"
    assert record["status"] == "Fulfilled"
    assert [i["capacityType"] for i in record["instances"]] == ["on-demand", "on-demand"]


def test_a_rejected_request_exits_non_zero_and_publishes_launch_rejected(
    e2e_cloud: E2eCloud,
) -> None:
    rid = request_id("reject")

    submitted = run_cli("submit", "--request-id", rid, "--node-pool", "no-such-pool",
                        "--count", "1", "--wait")  # fmt: skip

    assert submitted.code == 1
    assert submitted.json()["status"] == "Rejected"
    assert submitted.json()["errors"][0]["code"] == "UnknownNodePool"
    events = e2e_cloud.events.for_request(rid)
    assert [e["detail-type"] for e in events] == ["Launch Rejected"]


def test_another_request_under_a_used_request_id_is_rejected_and_the_first_kept(
    e2e_cloud: E2eCloud,
) -> None:
    # Given a request that was fulfilled
    rid = request_id("reused")
    assert run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "1",
                   "--wait").code == 0  # fmt: skip

    # When another request is submitted under its id
    submitted = run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "2",
                        "--wait")  # fmt: skip

    # Then it is Rejected with RequestIdReused, and the id's record is still the first request's
    assert submitted.code == 1
    refusal = submitted.json()
    assert refusal["status"] == "Rejected"
    assert [e["code"] for e in refusal["errors"]] == ["RequestIdReused"]
    assert f"requestId {rid}" in refusal["errors"][0]["message"]
    status = run_cli("status", rid).json()
    assert (status["status"], status["requested"], status["launched"]) == ("Fulfilled", 1, 1)
    events = e2e_cloud.events.for_request(rid, "Launch Rejected")
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled", "Launch Rejected"]
    assert events[1]["detail"]["errors"][0]["code"] == "RequestIdReused"


def test_status_of_an_unknown_request_says_so(e2e_cloud: E2eCloud) -> None:
    result = run_cli("status", request_id("never-sent"))

    assert result.code == 1
    assert "no record for" in result.err


def test_get_tables_show_the_requests_and_their_instances(e2e_cloud: E2eCloud) -> None:
    rid = request_id("tables")
    assert run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "1",
                   "--wait").code == 0  # fmt: skip

    requests = run_cli("get", "requests")
    instances = run_cli("get", "instances", "-o", "json")

    assert rid in requests.out
    assert "Fulfilled" in requests.out
    (instance,) = [i for i in instances.json() if i["requestId"] == rid]
    assert instance["instanceId"].startswith("i-")
    assert instance["state"] == "running"
    assert instance["nodePool"] == E2E_POOL
    assert "status" not in instance
