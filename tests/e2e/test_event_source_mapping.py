"""The launch queue's event source mapping, as the template declares it: partial batch failures
hand back only the failed message, a message that keeps failing lands in the DLQ after
maxReceiveCount receives, and an idle mapping waits in a long poll."""

from __future__ import annotations

import json
import time
from typing import Any

import moto_capacity
from local_cloud.event_sources import QueueEventSource
from local_cloud.template import load_template
from tests.e2e.conftest import (
    E2E_POOL,
    VISIBILITY_TIMEOUT_SECONDS,
    WAIT_SECONDS,
    E2eCloud,
    request_id,
    run_cli,
)


def _max_receive_count() -> int:
    queue = load_template()["Resources"]["LaunchQueue"]["Properties"]
    return int(queue["RedrivePolicy"]["maxReceiveCount"])


def _dead_letters(
    e2e_cloud: E2eCloud, wanted: str, mapping: QueueEventSource
) -> list[dict[str, Any]]:
    """The DLQ's messages naming `wanted`, once there. Each message the mapping hands back comes
    back after the queue's visibility timeout, on the emulator's clock: once the delivery is over
    (the messages it served deleted, only those handed back in flight) the clock is moved past
    it, rather than waited for."""
    sqs = e2e_cloud.client("sqs")
    seen = len(mapping.history)
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=e2e_cloud.deployment.dead_letter_queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
        )
        found = [m for m in response.get("Messages", []) if wanted in m["Body"]]
        if found:
            return found
        outcomes = list(mapping.history)
        if len(outcomes) > seen and _only_in_flight(e2e_cloud, len(outcomes[-1].failed_ids)):
            seen = len(outcomes)
            moto_capacity.advance_clock(VISIBILITY_TIMEOUT_SECONDS)
        time.sleep(0.1)
    return []


def _only_in_flight(e2e_cloud: E2eCloud, handed_back: int) -> bool:
    """Whether the launch queue holds just the `handed_back` messages, in flight."""
    attributes = e2e_cloud.client("sqs").get_queue_attributes(
        QueueUrl=e2e_cloud.deployment.launch_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    counts = (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )
    return counts == (0, handed_back)


def test_one_failing_message_is_handed_back_alone_then_redriven_to_the_dlq(
    e2e_cloud: E2eCloud, faults: Any
) -> None:
    # Given the reservation group of the "batch" pool cannot be read for now (an outage that
    # outlasts every delivery; a refusal for good would fail the request, naming the field),
    faults.inject_fault(
        "resource-groups:ListGroupResources", "ServiceUnavailableException", rate=1.0
    )
    good, bad = request_id("good"), request_id("bad")
    mapping = next(
        s for s in e2e_cloud.cloud.queue_sources if s.function.logical_id == "LauncherFunction"
    )
    already = len(mapping.history)

    # When a good and a failing request arrive in one batch
    e2e_cloud.client("sqs").send_message_batch(
        QueueUrl=e2e_cloud.deployment.launch_queue_url,
        Entries=[
            {"Id": "good", "MessageBody": json.dumps({"requestId": good, "nodePool": E2E_POOL,
                                                      "count": 1})},
            {"Id": "bad", "MessageBody": json.dumps({"requestId": bad, "nodePool": "batch",
                                                     "count": 1})},
        ],
    )  # fmt: skip

    # Then the failing one reaches the DLQ after maxReceiveCount receives...
    dead = _dead_letters(e2e_cloud, bad, mapping)
    assert len(dead) == 1
    # ...the good one was served once and deleted, never handed back
    assert run_cli("status", good).json()["status"] == "Fulfilled"
    assert run_cli("status", bad).code == 1
    outcomes = list(mapping.history)[already:]
    good_id = next(o for o in outcomes if len(o.message_ids) == 2)
    assert len(good_id.failed_ids) == 1  # a partial batch failure, not a whole-batch one
    bad_message = next(iter(good_id.failed_ids))
    carried = [o for o in outcomes if bad_message in o.message_ids]
    assert all(bad_message in o.failed_ids for o in carried)
    assert len(carried) == _max_receive_count()


def _receives() -> int:
    operations: dict[str, dict[str, int]] = moto_capacity.state()["operations"]  # type: ignore[assignment]
    return operations.get("sqs:ReceiveMessage", {}).get("calls", 0)


def test_an_idle_served_cloud_waits_in_long_polls_instead_of_polling(e2e_cloud: E2eCloud) -> None:
    # Lambda's SQS pollers long-poll (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html):
    # idle, each of the cloud's queue mappings asks about once a second; short polls 0.2 s apart
    # would ask ten times as often.
    mappings = len(e2e_cloud.cloud.queue_sources)
    before = _receives()
    time.sleep(2)

    assert _receives() - before <= 2 * mappings + 4
