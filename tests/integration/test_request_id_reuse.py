"""A requestId is bound to the first body it arrives with: another body under it is Rejected
(`RequestIdReused`), published but not stored, never retried, and never finishes, counts or
records for the first request (whatever state that one is in)."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_capacity_and_limits import tagged_ids
from tests.integration.test_launch_into_reservations import expire_idempotency_claims, setup_pool
from tests.integration.test_reconciliation import usage_store
from tests.support.cloud import Cloud, launch_request


def reuse_rejections(cloud: Cloud, request_id: str) -> list[dict[str, Any]]:
    return [
        e["detail"]
        for e in cloud.events()
        if e["detail"]["requestId"] == request_id
        and any(err["code"] == "RequestIdReused" for err in e["detail"]["errors"])
    ]


def assert_names_the_rule(rejection: dict[str, Any], request_id: str) -> None:
    assert rejection["status"] == "Rejected"
    (error,) = rejection["errors"]
    assert f"requestId {request_id}" in error["message"]
    assert "bound to the first body" in error["message"]


def test_another_body_never_finishes_a_crashed_first_delivery(cloud, subnets, image, monkeypatch):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    first = launch_request("reused-1", nodePool="general", count=3)

    # Given a first delivery that died right after CreateFleet returned (before recording)
    def die(*_: Any, **__: Any) -> None:
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "complete_intent", die)
        patch.setattr(LaunchRecords, "completion_updates", die)  # or its lease settle
        with pytest.raises(SystemExit):
            cloud.send(first)
    launched = {i["InstanceId"] for i in cloud.managed_instances()}
    assert len(launched) == 3
    cloud.events()
    # When another body with the same requestId arrives first, once the claim expired
    expire_idempotency_claims(cloud)
    second = launch_request("reused-1", nodePool="general", count=1)
    handed_back = cloud.send(second, batch=cloud.fresh_batch())
    # Then it is Rejected and not retried, with an error naming the requestId and the rule,
    # and the first request's instances, record and limits are left as they were
    assert handed_back == []
    assert cloud.record("reused-1") is None
    (rejection,) = reuse_rejections(cloud, "reused-1")
    assert_names_the_rule(rejection, "reused-1")
    assert rejection["requested"] == 1
    assert {i["InstanceId"] for i in cloud.managed_instances()} == launched
    assert tagged_ids(cloud, "reused-1") == launched
    # And the first body, delivered again, finishes its own launch: all 3 of its instances
    assert cloud.send(first, batch=cloud.fresh_batch()) == []
    record = cloud.record("reused-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert record.requested == 3
    assert {i.instance_id for i in record.instances} == launched
    assert usage_store().usage("general").instances == 3


def test_another_body_after_the_first_finished_is_rejected_and_the_record_kept(
    cloud, subnets, image
):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    # Given a request that was fulfilled
    assert cloud.send(launch_request("reused-2", nodePool="general", count=2)) == []
    before = cloud.record("reused-2")
    assert before is not None and before.launched == 2
    cloud.events()
    # When another body with its requestId arrives (in the idempotency window, and after it)
    changed = launch_request("reused-2", nodePool="general", count=5, tags={"x": "y"})
    in_window = cloud.send(changed)
    expire_idempotency_claims(cloud)
    after_window = cloud.send(changed, batch=cloud.fresh_batch())
    # Then each delivery is Rejected, never retried, and nothing launched or was recorded
    assert in_window == after_window == []
    rejections = reuse_rejections(cloud, "reused-2")
    assert len(rejections) == 2
    for rejection in rejections:
        assert_names_the_rule(rejection, "reused-2")
    assert cloud.record("reused-2") == before
    assert len(cloud.managed_instances()) == 2


def test_the_same_request_resent_in_another_form_is_still_a_duplicate(cloud, subnets, image):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    # Given a request that was fulfilled
    assert cloud.send(launch_request("same-1", nodePool="general", count=2)) == []
    first = cloud.record("same-1")
    cloud.events()
    # When it is sent again spelling its defaults out, inside an EventBridge event
    again = {
        "detail-type": "Launch Requested",
        "source": "team-a.scheduler",
        "detail": {"nodePool": "general", "minCount": 1, "count": 2, "requestId": "same-1"},
    }
    assert cloud.send(again) == []
    # Then it is a duplicate: its recorded outcome is re-published, nothing is refused
    events = cloud.events()
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled"]
    assert cloud.record("same-1") == first
