"""IAM, proven: the functions' real calls in representative flows, evaluated against their roles in
the transformed template (tests/infrastructure/iam_audit.py). Every suite's calls are audited at
the end of the session too (tests/conftest.py); these flows make sure each kind of call is seen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws, launch_templates
from capacity_launcher.domain.records.status import RequestStatus
from local_cloud.lambda_runtime import LocalFunction
from tests.infrastructure.iam_audit import CallRecorder, Denial, Policies, audit
from tests.infrastructure.policy_checks import transform
from tests.integration.test_launch_into_reservations import ZONE, group_of, reserve, setup_pool
from tests.support.cloud import INSTANCE_VISIBILITY_SECONDS, Cloud, launch_request
from tests.support.template import load_template

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def policies() -> Policies:
    sam = load_template()
    return Policies(transform(sam), sam)


@pytest.fixture
def recorder() -> Iterator[CallRecorder]:
    with CallRecorder().recording() as calls:
        yield calls


def _function(cloud: Cloud, logical_id: str, monkeypatch: pytest.MonkeyPatch) -> LocalFunction:
    environment = cloud.names.environment(logical_id)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)  # the runtime sets them process-wide; put them back after
    return LocalFunction(
        logical_id, environment, account_id=cloud.names.account_id, host=cloud.host
    )


def _event(name: str, **detail: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / name).read_text())
    event["detail"].update(detail)
    return event  # type: ignore[no-any-return]


def _spot_flow(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("spot",), pool="spot", klass="spot")
    # A fresh container: a warm one keeps the configuration it read for a while.
    cloud.send(launch_request("audit-spot", nodePool="spot"), batch=cloud.fresh_batch())
    record = cloud.record("audit-spot")
    assert record is not None and record.launched == 1


def _seen(recorder: CallRecorder) -> set[tuple[str, str]]:
    return {(c.function.logical_id, a.action) for c in recorder.calls for a in c.authorizations}


def test_every_call_of_the_representative_flows_is_allowed(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    recorder: CallRecorder,
    policies: Policies,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given pools for reserved (by id and by group), on-demand with a gang minimum, and spot
    by_id = reserve(cloud, 1)
    grouped = group_of(cloud, reserve(cloud, 1), name="audit-group")
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": by_id}},
    )
    setup_pool(
        cloud,
        subnets,
        image,
        pool="grouped",
        klass="grouped",
        reservation_spec={
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": grouped}
        },
    )
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool="od", klass="od")
    # When the launcher serves one request each, two coalesced requests (one fleet, then each
    # request's tags), and a gang request that falls short and terminates what it got
    cloud.send(launch_request("audit-reserved", nodePool="general"))
    cloud.send(launch_request("audit-grouped", nodePool="grouped"))
    # (EC2 not knowing their instances in time: the sync's reconciliation tags them)
    moto_capacity.set_consistency(instance_visibility_seconds=60)
    cloud.send(
        launch_request("audit-coalesced-1", nodePool="od", tags={"team": "a"}),
        launch_request("audit-coalesced-2", nodePool="od", tags={"team": "b"}),
    )
    moto_capacity.advance_clock(60)
    moto_capacity.set_consistency(instance_visibility_seconds=INSTANCE_VISIBILITY_SECONDS)
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    cloud.send(launch_request("audit-gang", nodePool="od", count=3, minCount=3))
    _spot_flow(cloud, subnets, image)
    # And the reservation sync and instance events run as their functions
    sync = _function(cloud, "ReservationSyncFunction", monkeypatch)
    assert not sync.invoke(_event("schedule.json")).failed
    launched = cloud.record("audit-reserved")
    assert launched is not None and launched.instances
    instance_id = launched.instances[0].instance_id
    events = _function(cloud, "InstanceEventsFunction", monkeypatch)
    state_change = _event("ec2_instance_state_change.json", **{"instance-id": instance_id})
    assert not events.invoke(state_change).failed

    for request_id in ("audit-reserved", "audit-grouped", "audit-coalesced-1", "audit-coalesced-2"):
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED
    # Then each kind of call was made, by the function that needs it
    seen = _seen(recorder)
    for needed in [
        ("LauncherFunction", "ec2:CreateLaunchTemplate"),
        ("LauncherFunction", "ec2:CreateFleet"),
        ("LauncherFunction", "ec2:RunInstances"),
        ("LauncherFunction", "ec2:CreateTags"),
        ("LauncherFunction", "ec2:TerminateInstances"),
        ("LauncherFunction", "resource-groups:ListGroupResources"),
        ("LauncherFunction", "tag:GetResources"),
        ("LauncherFunction", "events:PutEvents"),
        ("ReservationSyncFunction", "ec2:DescribeCapacityReservations"),
        ("ReservationSyncFunction", "ec2:CreateTags"),
        ("ReservationSyncFunction", "events:PutEvents"),
        ("InstanceEventsFunction", "dynamodb:GetItem"),
    ]:
        assert needed in seen
    # And none of them would be denied on AWS
    assert [str(d) for d in audit(recorder.calls, policies)] == []


def test_the_audit_catches_untagged_spot_requests(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    recorder: CallRecorder,
    policies: Policies,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given spot launch templates that do not tag spot requests (issue 12, finding 1)
    tagged = launch_templates.template_data

    def untagged(*args: Any, **kwargs: Any) -> dict[str, Any]:
        data = tagged(*args, **kwargs)
        data["TagSpecifications"] = [
            s for s in data["TagSpecifications"] if s["ResourceType"] != "spot-instances-request"
        ]
        return data

    monkeypatch.setattr(launch_templates, "template_data", untagged)
    # When a spot request is served (moto, unlike AWS, lets it launch)
    _spot_flow(cloud, subnets, image)
    # Then the audit says AWS would deny creating the spot requests
    denials: list[Denial] = audit(recorder.calls, policies)
    assert denials
    assert {
        (d.authorization.action, d.authorization.resource.rsplit(":", 1)[-1]) for d in denials
    } == {
        ("ec2:CreateFleet", "spot-instances-request/*"),
        ("ec2:RunInstances", "spot-instances-request/*"),
    }


class _Killed(BaseException):
    """The worker dies (as the simulation's crash does): not an error the service handles."""


def test_a_launch_template_created_by_a_worker_killed_right_after_is_judged_by_its_tags(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    recorder: CallRecorder,
    policies: Policies,
) -> None:
    # Given a pool, and a worker killed just after EC2 created its launch template
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    ec2 = cloud.ec2
    killed: list[str] = []

    def kill(**_: Any) -> None:
        if not killed:
            killed.append("CreateLaunchTemplate")
            raise _Killed

    ec2.meta.events.register("after-call.ec2.CreateLaunchTemplate", kill)
    try:
        with pytest.raises(_Killed):
            cloud.send(
                launch_request("audit-killed", nodePool="general"), batch=cloud.fresh_batch()
            )
    finally:
        ec2.meta.events.unregister("after-call.ec2.CreateLaunchTemplate", kill)
    # When the message comes back to another worker after the dead one's claim expired, and it
    # launches from that template
    db = aws.client("dynamodb")
    for item in db.scan(TableName=cloud.names.idempotency_table)["Items"]:
        db.delete_item(TableName=cloud.names.idempotency_table, Key={"id": item["id"]})
    cloud.send(launch_request("audit-killed", nodePool="general"), batch=cloud.fresh_batch())
    record = cloud.record("audit-killed")
    assert killed and record is not None and record.status is RequestStatus.FULFILLED, record
    # Then the audit knows the template's tags: nothing is denied
    assert audit(recorder.calls, policies) == []


def test_a_launch_into_a_placement_groups_reservation_is_authorized_on_the_group(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    recorder: CallRecorder,
    policies: Policies,
) -> None:
    # Given a pool targeting a reservation in the cluster placement group `training`
    arn = f"arn:aws:ec2:us-east-1:{cloud.names.account_id}:placement-group/training"
    reservation = reserve(cloud, 1, InstanceMatchCriteria="targeted", PlacementGroupArn=arn)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
        capacity_types=("reserved",),
    )
    # When an instance is launched into it
    cloud.send(launch_request("audit-cpg", nodePool="general"), batch=cloud.fresh_batch())
    record = cloud.record("audit-cpg")
    assert record is not None and record.launched == 1
    # Then the launch is authorized on the placement group too, and the launcher's role allows it
    on_group = {
        a.action
        for c in recorder.calls
        for a in c.authorizations
        if a.resource == arn and c.function.logical_id == "LauncherFunction"
    }
    assert on_group == {"ec2:CreateFleet", "ec2:RunInstances"}
    assert audit(recorder.calls, policies) == []


def test_a_node_class_role_s_instance_profile_calls_are_allowed(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    recorder: CallRecorder,
    policies: Policies,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a class naming a role under the default NodeRolePrefix
    role = "KarpenterNodeRole-audit"
    aws.client("iam").create_role(RoleName=role, AssumeRolePolicyDocument="{}")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool="roled", klass="roled")
    stored = cloud.adapters().config_store().node_class("roled")
    document = stored.model_dump(mode="json", by_alias=True, exclude_none=True)
    document["spec"]["role"] = role
    cloud.apply(document)
    # When the launcher makes its profile and launches with it, then the class is deleted and
    # the sync, as its function, deletes the profile
    cloud.send(launch_request("audit-role", nodePool="roled"), batch=cloud.fresh_batch())
    record = cloud.record("audit-role")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    cloud.delete("NodePool", "roled")
    cloud.delete("NodeClass", "roled")
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    aws.client("ec2").terminate_instances(InstanceIds=running)  # its profile is kept until then
    sync = _function(cloud, "ReservationSyncFunction", monkeypatch)
    assert not sync.invoke(_event("schedule.json")).failed
    # Then each IAM call was made, by the function that needs it
    seen = _seen(recorder)
    for needed in [
        ("LauncherFunction", "iam:GetRole"),
        ("LauncherFunction", "iam:CreateInstanceProfile"),
        ("LauncherFunction", "iam:TagInstanceProfile"),
        ("LauncherFunction", "iam:AddRoleToInstanceProfile"),
        ("LauncherFunction", "iam:PassRole"),
        ("ReservationSyncFunction", "iam:ListInstanceProfiles"),
        ("ReservationSyncFunction", "iam:RemoveRoleFromInstanceProfile"),
        ("ReservationSyncFunction", "iam:DeleteInstanceProfile"),
    ]:
        assert needed in seen, needed
    # And none of them would be denied on AWS
    assert [str(d) for d in audit(recorder.calls, policies)] == []
