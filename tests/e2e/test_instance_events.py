"""The lifecycle path: moto emits no EC2 events, the local cloud synthesizes the state change
AWS would send, and InstanceEventsFunction releases the instance and says so on the bus."""

from __future__ import annotations

from capacity_launcher.domain.records.status import INSTANCE_TERMINATED
from tests.e2e.conftest import E2E_POOL, E2eCloud, request_id, run_cli


def test_terminating_an_instance_publishes_instance_terminated(e2e_cloud: E2eCloud) -> None:
    # Given a fulfilled request
    rid = request_id("lifecycle")
    submitted = run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "1",
                        "--wait")  # fmt: skip
    assert submitted.code == 0, submitted.err
    (instance,) = submitted.json()["instances"]

    # When its instance is terminated outside the service
    e2e_cloud.client("ec2").terminate_instances(InstanceIds=[instance["instanceId"]])

    # Then the service hears of it and publishes Instance Terminated for that request
    events = e2e_cloud.events.for_request(rid, INSTANCE_TERMINATED)
    terminated = [e for e in events if e["detail-type"] == INSTANCE_TERMINATED]
    assert len(terminated) == 1
    assert terminated[0]["detail"]["instanceId"] == instance["instanceId"]
    assert terminated[0]["detail"]["state"] == "terminated"
