"""Issue 27, item 2: TerminateInstances fails whole on one id EC2 no longer has (and, under the
tag-scoped policy, answers UnauthorizedOperation); the fleet adapter terminates what is still
there, skips what is gone, and sends at most 1000 ids a call."""

from __future__ import annotations

from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import fleet as fleet_module
from capacity_launcher.adapters.fleet import MAX_TERMINATED_PER_CALL, Fleet
from capacity_launcher.domain.errors import LaunchFailed
from tests.support.cloud import INSTANCE_VISIBILITY_SECONDS, Cloud

MANAGED = "capacity-launcher:managed"


def _launch(cloud: Cloud, image: str, count: int, tags: dict[str, str]) -> list[str]:
    answer = cloud.ec2.run_instances(
        ImageId=image,
        MinCount=count,
        MaxCount=count,
        InstanceType="m5.large",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    moto_capacity.advance_clock(INSTANCE_VISIBILITY_SECONDS)  # EC2 knows them by now
    return [i["InstanceId"] for i in answer["Instances"]]


def _state(cloud: Cloud, instance_id: str) -> str:
    found = cloud.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"])


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_module, "pause", lambda _: None)


@pytest.mark.parametrize("scope", [True, False], ids=["tag-scoped", "unscoped"])
def test_terminate_skips_an_instance_already_gone_and_terminates_the_others(
    cloud: Cloud, image: str, scope: bool
) -> None:
    # Given a managed instance EC2 forgot (terminated over an hour ago) and a live one
    if scope:
        moto_capacity.set_termination_scope(MANAGED, "true")
    gone, live = _launch(cloud, image, 2, {MANAGED: "true"})
    cloud.ec2.terminate_instances(InstanceIds=[gone])
    moto_capacity.advance_clock(3601)

    # When both are terminated
    skipped = Fleet(cloud.ec2).terminate([gone, live])

    # Then the live one is terminated, and the gone one reported as such
    assert skipped == [gone]
    assert _state(cloud, live) == "terminated"


def test_terminate_skips_an_instance_already_terminated_and_still_listed(
    cloud: Cloud, image: str
) -> None:
    # Given the scope, a managed instance terminated a minute ago, and a live unmanaged one
    moto_capacity.set_termination_scope(MANAGED, "true")
    (terminated,) = _launch(cloud, image, 1, {MANAGED: "true"})
    cloud.ec2.terminate_instances(InstanceIds=[terminated])
    # When terminating it again, then nothing is refused: EC2 terminates it again (no-op)
    assert Fleet(cloud.ec2).terminate([terminated]) == []


def test_terminate_refusal_stands_when_every_instance_is_still_there(
    cloud: Cloud, image: str
) -> None:
    # Given the scope and a live instance we did not launch (no managed tag)
    moto_capacity.set_termination_scope(MANAGED, "true")
    (foreign,) = _launch(cloud, image, 1, {"team": "other"})

    # When terminating it, then the refusal is raised, and it still runs
    with pytest.raises(LaunchFailed) as refused:
        Fleet(cloud.ec2).terminate([foreign])
    assert refused.value.code == "UnauthorizedOperation"
    assert _state(cloud, foreign) == "running"


def test_terminate_sends_at_most_1000_ids_a_call(cloud: Cloud, image: str) -> None:
    # Given 1001 ids for EC2 (counted per call by the emulator)
    calls: list[int] = []

    class Counting:
        def __init__(self, ec2: Any) -> None:
            self._ec2 = ec2

        def terminate_instances(self, InstanceIds: list[str]) -> Any:
            calls.append(len(InstanceIds))
            return self._ec2.terminate_instances(InstanceIds=InstanceIds)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._ec2, name)

    ids = _launch(cloud, image, 1001, {MANAGED: "true"})

    # When all are terminated
    assert Fleet(Counting(cloud.ec2)).terminate(ids) == []

    # Then in two calls of at most 1000 ids, and every one is terminated
    assert calls == [MAX_TERMINATED_PER_CALL, 1]
    terminated = [{"Name": "instance-state-name", "Values": ["terminated"]}]
    listed = cloud.ec2.describe_instances(Filters=terminated)
    assert len({i["InstanceId"] for r in listed["Reservations"] for i in r["Instances"]}) == 1001


def test_fresh_ids_ec2_does_not_list_yet_are_not_taken_for_gone(cloud: Cloud, image: str) -> None:
    # Given ids CreateFleet just returned, that EC2 will not know for a while yet
    moto_capacity.set_consistency(instance_visibility_seconds=3600)
    answer = cloud.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large")
    (fresh,) = [i["InstanceId"] for i in answer["Instances"]]

    # When a gang rollback terminates them, then the refusal stands (the request is retried)
    with pytest.raises(LaunchFailed) as refused:
        Fleet(cloud.ec2).terminate([fresh], fresh=True)
    assert refused.value.code == "InvalidInstanceID.NotFound"
    # and once EC2 knows it, it is terminated
    moto_capacity.advance_clock(3600)
    assert Fleet(cloud.ec2).terminate([fresh], fresh=True) == []
    assert _state(cloud, fresh) == "terminated"
