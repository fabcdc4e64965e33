"""A producer's path: submit (bus or queue) -> the launcher -> status record and status event."""

from __future__ import annotations

import json
import time
from typing import Any

from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
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


def test_a_request_the_service_would_reject_is_not_sent(e2e_cloud: E2eCloud) -> None:
    # Given requests the launcher would reject: no count, count 0, an unknown pool, and a
    # requirement the pool does not allow
    cases = {
        "missing count": (["--node-pool", E2E_POOL], "count: is required"),
        "count 0": (["--node-pool", E2E_POOL, "--count", "0"], "count: "),
        "unknown pool": (["--node-pool", "no-such-pool", "--count", "1"], "nodePool: no NodePool"),
        "spot": (
            ["--node-pool", E2E_POOL, "--count", "1",
             "--requirement", "karpenter.sh/capacity-type=In:spot"],
            "requirements[karpenter.sh/capacity-type]",
        ),
    }  # fmt: skip
    for case, (flags, named) in cases.items():
        rid = request_id("refused")

        # When each is submitted
        submitted = run_cli("submit", "--request-id", rid, *flags, "--wait")

        # Then it is refused here, naming the field, and nothing is sent
        assert submitted.code == 1, case
        assert f"error: not sent: {named}" in submitted.err, (case, submitted.err)
        assert run_cli("status", rid).code == 1, case
        assert e2e_cloud.events.for_request(rid, timeout=0.5) == [], case


def test_a_producer_that_may_not_read_the_pools_still_submits(
    e2e_cloud: E2eCloud, faults: Any
) -> None:
    # Given IAM refuses the CLI's read of the pool (a role with only the producers' policy):
    # the next GetItem fails. The served cloud's own calls (the instance events of an earlier
    # test's instances, on this worker's cloud) may take that one fault first: then the
    # request was checked and sent as usual, and the refusal is tried again, at most 3 times
    for _ in range(3):
        faults.inject_fault("dynamodb:GetItem", "AccessDeniedException", "not authorized", times=1)
        rid = request_id("no-read")

        # When a valid request is submitted
        submitted = run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "1")
        assert submitted.code == 0, submitted.err
        if "warning: the pool was not checked" in submitted.err:
            break  # (else the fault, one call's, was taken by another call: it is gone)

    # Then it says the pool was not checked, sends it, and the launcher serves it
    assert "warning: the pool was not checked" in submitted.err
    assert run_cli("status", rid, "--wait", "--timeout", "60").json()["status"] == "Fulfilled"


def test_status_exits_non_zero_for_a_rejected_request_as_submit_wait_does(
    e2e_cloud: E2eCloud,
) -> None:
    # Given a request another producer sent straight to the queue, which the launcher rejects
    rid = request_id("reject")
    body = {"requestId": rid, "nodePool": "no-such-pool", "count": 1}
    e2e_cloud.client("sqs").send_message(
        QueueUrl=e2e_cloud.deployment.launch_queue_url, MessageBody=json.dumps(body)
    )

    # When its status is asked for, waiting and then not
    waited = run_cli("status", rid, "--wait", "--timeout", "60")
    asked = run_cli("status", rid)

    # Then both print the record and exit 1, and Launch Rejected was published
    assert (waited.code, asked.code) == (1, 1)
    assert waited.json() == asked.json()
    assert asked.json()["status"] == "Rejected"
    assert asked.json()["errors"][0]["code"] == "UnknownNodePool"
    events = e2e_cloud.events.for_request(rid)
    assert [e["detail-type"] for e in events] == ["Launch Rejected"]


def test_dry_run_says_what_a_request_would_get_and_sends_nothing(e2e_cloud: E2eCloud) -> None:
    # Given the shared ICE cache knows on-demand m5.large is dry in us-east-1a
    settings = e2e_cloud.deployment.settings()
    cache = UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        dynamodb=e2e_cloud.client("dynamodb"),
        clock=time.time,
    )
    dry = "on-demand:m5.large:us-east-1a"
    cache.mark([(dry, "InsufficientInstanceCapacity", "dry for the test")])
    rid = request_id("dry")
    try:
        # When a request for the e2e pool is submitted with --dry-run
        answer = run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "2",
                         "--dry-run")  # fmt: skip
    finally:
        cache.clear(dry)

    # Then it names the pool, the offerings it would try in order without the dry one, that
    # one in its way, and the headroom; and nothing was sent or launched
    assert answer.code == 0, answer.err
    preview = answer.json()
    assert preview["requestId"] == rid
    assert preview["rejected"] is None
    (pool,) = preview["pools"]
    assert (pool["nodePool"], pool["nodeClass"], pool["refusal"]) == (E2E_POOL, E2E_POOL, None)
    (attempt,) = pool["attempts"]
    assert attempt["capacityType"] == "on-demand"
    assert "m5.large us-east-1b" in attempt["offerings"]
    assert "m5.large us-east-1a" not in attempt["offerings"]
    assert [(u["zone"], u["reason"]) for u in pool["unavailableOfferings"]] == [
        ("us-east-1a", "InsufficientInstanceCapacity")
    ]
    assert pool["headroom"]["limits"] is None  # the e2e pool sets no limits
    assert pool["headroom"]["perInstance"] == {"cpu": "2", "memory": "8Gi", "instances": "1"}
    assert run_cli("status", rid).code == 1
    assert e2e_cloud.events.for_request(rid, timeout=0.5) == []


def test_dry_run_of_a_pool_with_limits_says_how_many_more_fit(e2e_cloud: E2eCloud) -> None:
    answer = run_cli("submit", "--node-pool", "general", "--count", "1", "--dry-run")

    (pool,) = answer.json()["pools"]
    used = run_cli("get", "nodepools", "-o", "json").json()["items"]
    general = next(p for p in used if p["metadata"]["name"] == "general")
    instances_used = int(general["status"]["used"].get("instances", "0"))
    # general: limits cpu 16, instances 8; each m5.large 2 cpu. The e2e tests share one cloud,
    # so what earlier ones left running may have filled it: then the dry run says it would
    # not launch (exit 1), with no headroom left
    fit = min(8 - instances_used, (16 - 2 * instances_used) // 2)
    assert pool["headroom"]["limits"] == fit
    assert answer.code == (0 if fit > 0 else 1), answer.err


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
    (instance,) = [i for i in instances.json()["items"] if i["requestId"] == rid]
    assert instance["instanceId"].startswith("i-")
    assert instance["state"] == "running"
    assert instance["nodePool"] == E2E_POOL
    assert "status" not in instance


def test_dry_run_says_what_the_requesters_quota_admits(e2e_cloud: E2eCloud) -> None:
    # Given the examples' quotas: team-ml's nominal quota in training is 8 instances
    assert run_cli("apply", "-f", str(REPO / "examples" / "quotas")).code == 0
    try:
        # When team-ml, and a requester no quota of the pool covers, ask what they would get
        ml = run_cli("submit", "--node-pool", "training", "--count", "2", "--requester",
                     "team-ml", "--dry-run")  # fmt: skip
        nobody = run_cli("submit", "--node-pool", "training", "--count", "2", "--requester",
                         "nobody", "--dry-run")  # fmt: skip
    finally:
        for name in ("team-ml", "team-research", "team-batch"):
            run_cli("delete", "capacityquota", name)

    # Then team-ml's quota admits both; the other is refused by name, and would launch nothing
    assert ml.code == 0, ml.err
    assert nobody.code == 1
    (pool,) = ml.json()["pools"]
    assert (pool["headroom"]["quota"], pool["headroom"]["quotaAdmits"]) == ("team-ml", 2)
    (other,) = nobody.json()["pools"]
    assert other["headroom"]["quotaAdmits"] == 0
    assert (
        "requester 'nobody' is covered by none of the quotas" in other["headroom"]["quotaRefusal"]
    )
