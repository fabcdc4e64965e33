"""Issue 3: the launch path from request to status, on moto + moto_capacity."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)

ZONE = "us-east-1a"


def reserve(
    cloud: Cloud, count: int, *, itype: str = "m5.large", zone: str = ZONE, **extra: Any
) -> str:
    response = cloud.ec2.create_capacity_reservation(
        InstanceType=itype,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
        **extra,
    )
    reservation_id = str(response["CapacityReservation"]["CapacityReservationId"])
    cloud.wait_until_active(reservation_id)
    return reservation_id


def available(cloud: Cloud, reservation_id: str) -> int:
    found = cloud.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return int(found["CapacityReservations"][0]["AvailableInstanceCount"])


def group_of(cloud: Cloud, *reservation_ids: str, name: str = "gpu-pool") -> str:
    rg = aws.client("resource-groups")
    arn = rg.create_group(
        Name=name,
        Configuration=[
            {
                "Type": "AWS::EC2::CapacityReservationPool",
            },
            {
                "Type": "AWS::ResourceGroups::Generic",
                "Parameters": [
                    {"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}
                ],
            },
        ],
    )["Group"]["GroupArn"]
    rg.group_resources(
        Group=arn,
        ResourceArns=[
            f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{r}" for r in reservation_ids
        ],
    )
    return str(arn)


def setup_pool(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    *,
    reservation_spec: dict[str, Any] | None = None,
    selector_terms: list[dict[str, Any]] | None = None,
    capacity_types: tuple[str, ...] = ("reserved", "on-demand"),
    types: tuple[str, ...] = ("m5.large",),
    zones: tuple[str, ...] = (ZONE,),
    pool: str = "general",
    klass: str = "standard",
    limits: dict[str, str] | None = None,
) -> None:
    spec: dict[str, Any] = {}
    if reservation_spec is not None:
        spec["capacityReservationSpec"] = reservation_spec
    if selector_terms is not None:
        spec["capacityReservationSelectorTerms"] = selector_terms
    pool_spec: dict[str, Any] = {
        "requirements": [capacity_type(*capacity_types), instance_type(*types)]
    }
    if limits:
        pool_spec["limits"] = limits
    spec["securityGroupIds"] = [default_security_group(cloud.ec2)]
    cloud.apply(
        node_class(klass, [subnets[z] for z in zones], image, **spec),
        node_pool(pool, klass, **pool_spec),
    )


def group_pool(cloud: Cloud, subnets: dict[str, str], image: str, arn: str, **setup: Any) -> None:
    """The pool `general` whose NodeClass targets the reservation group `arn`."""
    target = {"capacityReservationTarget": {"capacityReservationResourceGroupArn": arn}}
    setup_pool(cloud, subnets, image, reservation_spec=target, **setup)


def targeted_pool(
    cloud: Cloud, subnets: dict[str, str], image: str, count: int, **setup: Any
) -> str:
    """A targeted ODCR with room for `count`, and the pool `general` whose NodeClass targets it."""
    reservation = reserve(cloud, count, InstanceMatchCriteria="targeted")
    target = {"capacityReservationTarget": {"capacityReservationId": reservation}}
    setup_pool(cloud, subnets, image, reservation_spec=target, **setup)
    return reservation


def test_targeted_reservation_receives_the_instances_and_they_report_it(cloud, subnets, image):
    # Given a NodeClass targeting one ODCR with room for 3
    reservation = targeted_pool(cloud, subnets, image, 3)
    # When 2 instances are requested
    assert cloud.send(launch_request("r-targeted", nodePool="general", count=2)) == []
    # Then both land in the reservation, and EC2 says so
    record = cloud.record("r-targeted")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert {i.capacity_reservation_id for i in record.instances} == {reservation}
    assert {i.capacity_type for i in record.instances} == {"reserved"}
    # (the launcher located them by CreateFleet's answer: EC2 lists them once consistent)
    cloud.wait_out_consistency()
    described = cloud.ec2.describe_instances(InstanceIds=[i.instance_id for i in record.instances])
    reported = {
        i["CapacityReservationId"] for r in described["Reservations"] for i in r["Instances"]
    }
    assert reported == {reservation}
    assert available(cloud, reservation) == 1


def test_reservation_group_fills_its_members(cloud, subnets, image):
    # Given a group of two reservations of 1 each
    first, second = reserve(cloud, 1), reserve(cloud, 1)
    group_pool(cloud, subnets, image, group_of(cloud, first, second))
    # When 2 instances are requested
    cloud.send(launch_request("r-group", nodePool="general", count=2))
    # Then one lands in each member
    record = cloud.record("r-group")
    assert record is not None and record.launched == 2
    assert sorted(i.capacity_reservation_id or "" for i in record.instances) == sorted(
        [first, second]
    )


def test_open_preference_lands_in_an_open_reservation(cloud, subnets, image):
    # Given an open reservation and a NodeClass with the open preference, on-demand only
    reservation = reserve(cloud, 2, InstanceMatchCriteria="open")
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationPreference": "open"},
        capacity_types=("on-demand",),
    )
    cloud.send(launch_request("r-open", nodePool="general", count=1))
    record = cloud.record("r-open")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    assert record.instances[0].capacity_type == "reserved"


def closed_pool(cloud: Cloud, subnets: dict[str, str], image: str) -> str:
    """An open reservation of the pool's type and zone, and an on-demand pool whose NodeClass's
    preference is `none`; the reservation."""
    reservation = reserve(cloud, 2, InstanceMatchCriteria="open")
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationPreference": "none"},
        capacity_types=("on-demand",),
    )
    return reservation


def test_none_preference_never_lands_in_a_reservation(cloud, subnets, image):
    reservation = closed_pool(cloud, subnets, image)
    cloud.send(launch_request("r-none", nodePool="general", count=1))
    record = cloud.record("r-none")
    assert record is not None and record.launched == 1
    assert record.instances[0].capacity_reservation_id is None
    assert record.instances[0].capacity_type == "on-demand"
    assert available(cloud, reservation) == 2


def test_selector_terms_pick_reservations_by_tag(cloud, subnets, image):
    # Given two reservations, only one tagged team=ml
    tag = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    wanted = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=tag)
    other = reserve(cloud, 1, InstanceMatchCriteria="targeted")
    setup_pool(
        cloud,
        subnets,
        image,
        selector_terms=[{"tags": {"team": "ml"}}],
        capacity_types=("reserved",),
    )
    cloud.send(launch_request("r-selector", nodePool="general", count=1))
    record = cloud.record("r-selector")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [wanted]
    assert available(cloud, other) == 1


def test_launch_template_is_reused_across_requests_and_differs_across_targets(
    cloud, subnets, image
):
    first, second = reserve(cloud, 5), reserve(cloud, 5)
    setup_pool(
        cloud,
        subnets,
        image,
        klass="first",
        pool="first",
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": first}},
    )
    setup_pool(
        cloud,
        subnets,
        image,
        klass="second",
        pool="second",
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": second}},
    )
    cloud.send(launch_request("lt-1", nodePool="first"))
    cloud.send(launch_request("lt-2", nodePool="first"))
    cloud.send(launch_request("lt-3", nodePool="second"))
    templates = cloud.ec2.describe_launch_templates()["LaunchTemplates"]
    names = sorted(t["LaunchTemplateName"] for t in templates)
    assert len(names) == 2, names
    assert any("-first-" in n for n in names) and any("-second-" in n for n in names)
    # and a fresh container (no in-memory memo) still reuses it
    cloud.send(launch_request("lt-4", nodePool="first"), batch=cloud.fresh_batch())
    assert len(cloud.ec2.describe_launch_templates()["LaunchTemplates"]) == 2


def test_duplicate_delivery_launches_once_and_republishes(cloud, subnets, image, ec2_calls):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    request = launch_request("dup-1", nodePool="general", count=2)
    cloud.send(request)
    first_events = cloud.events()
    cloud.send(request)
    cloud.send(request, batch=cloud.fresh_batch())
    assert ec2_calls["CreateFleet"] == 1
    assert len(cloud.managed_instances()) == 2
    replays = cloud.events()
    assert [e["detail-type"] for e in first_events] == ["Launch Fulfilled"]
    assert [e["detail-type"] for e in replays] == ["Launch Fulfilled", "Launch Fulfilled"]
    assert {json.dumps(e["detail"], sort_keys=True) for e in replays} == {
        json.dumps(first_events[0]["detail"], sort_keys=True)
    }


def killed_after_create_fleet(
    cloud: Cloud, request: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deliver `request` to a worker that dies right after CreateFleet returned (before
    recording anything): its instances run, its intent and lease stay open."""
    from capacity_launcher.adapters.launch_records import LaunchRecords

    def die(*_: Any, **__: Any) -> None:
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "complete_intent", die)
        patch.setattr(LaunchRecords, "completion_updates", die)  # or its lease settle
        with pytest.raises(SystemExit):
            cloud.send(request)


def test_crash_after_create_fleet_then_retry_launches_once(cloud, subnets, image, monkeypatch):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    request = launch_request("crash-1", nodePool="general", count=3)

    # Given a worker that dies right after CreateFleet returned (before recording anything)
    killed_after_create_fleet(cloud, request, monkeypatch)
    assert len(cloud.managed_instances()) == 3
    # When the message is delivered again to a new container, after the claim expired
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then the intent is replayed: still 3 instances, and the record names exactly those
    record = cloud.record("crash-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    running = {i["InstanceId"] for i in cloud.managed_instances()}
    assert len(running) == 3
    assert {i.instance_id for i in record.instances} == running


def expire_idempotency_claims(cloud: Cloud) -> None:
    db = aws.client("dynamodb")
    for item in db.scan(TableName=cloud.names.idempotency_table)["Items"]:
        db.delete_item(TableName=cloud.names.idempotency_table, Key={"id": item["id"]})


@pytest.mark.parametrize(
    ("body", "request_id", "why"),
    [
        ("{not json", None, "body"),
        (json.dumps({"requestId": "bad-1", "count": 0}), "bad-1", "count"),
        (json.dumps({"requestId": "bad-2", "count": 1, "imageId": "ami-123"}), "bad-2", "imageId"),
        (json.dumps({"requestId": "bad-3", "count": 1, "tags": {"aws:x": "y"}}), "bad-3", "tags"),
        (
            json.dumps({"requestId": "bad-4", "count": 1, "nodePool": "missing"}),
            "bad-4",
            "nodePool",
        ),
        (
            json.dumps(
                {
                    "requestId": "bad-5",
                    "count": 1,
                    "nodePool": "general",
                    "requirements": [capacity_type("spot")],
                }
            ),
            "bad-5",
            "karpenter.sh/capacity-type",
        ),
        (
            json.dumps(
                {
                    "requestId": "bad-6",
                    "count": 1,
                    "nodePool": "general",
                    "requirements": [instance_type("p5.48xlarge")],
                }
            ),
            "bad-6",
            "node.kubernetes.io/instance-type",
        ),
    ],
)
def test_invalid_input_is_rejected_published_and_not_retried(
    cloud, subnets, image, ec2_calls, body, request_id, why
):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    ec2_calls.clear()
    assert cloud.send(body) == [], "an invalid request must never go back to the queue"
    assert ec2_calls["CreateFleet"] == 0
    events = cloud.events()
    if request_id is None:
        assert events == []
        return
    assert [e["detail-type"] for e in events] == ["Launch Rejected"]
    detail = events[0]["detail"]
    assert detail["status"] == "Rejected" and detail["requestId"] == request_id
    assert any(why in e["message"] for e in detail["errors"]), detail["errors"]
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.REJECTED


def test_a_rejected_record_keeps_the_valid_node_pool_and_count_its_body_carried(
    cloud, subnets, image
):
    # Given schema-invalid bodies (a field requesters may not set; a count out of range)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    kept = {"requestId": "bad-kept", "count": 3, "nodePool": "general", "imageId": "ami-1"}
    lost = {"requestId": "bad-lost", "count": 0, "nodePool": "Not A Name!"}
    # When they arrive
    cloud.send(json.dumps(kept))
    cloud.send(json.dumps(lost))
    # Then each record shows what was valid of its body, and nothing that was not
    record = cloud.record("bad-kept")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert (record.node_pool, record.requested) == ("general", 3)
    record = cloud.record("bad-lost")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert (record.node_pool, record.requested) == (None, 0)


def test_published_event_matches_the_status_contract(cloud, subnets, image):
    reservation = reserve(cloud, 1)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    cloud.send(launch_request("contract-1", nodePool="general", count=2, requester="team-a"))
    (event,) = cloud.events()
    assert event["source"] == "capacity-launcher"
    assert event["detail-type"] == "Launch Fulfilled"
    detail = event["detail"]
    assert set(detail) == {
        "requestId",
        "nodePool",
        "requester",
        "status",
        "requested",
        "launched",
        "instances",
        "unavailableOfferings",
        "errors",
        "receivedAt",
        "finishedAt",
        "waitForCapacityUntil",
        "waitingFor",
        "detailTruncated",
        "candidatesLeftOut",
    }
    assert detail["waitForCapacityUntil"] is None and detail["waitingFor"] == []
    assert detail["candidatesLeftOut"] is None
    assert detail["requester"] == "team-a" and detail["requested"] == 2 and detail["launched"] == 2
    for instance in detail["instances"]:
        assert set(instance) == {
            "instanceId",
            "instanceType",
            "zone",
            "capacityType",
            "capacityReservationId",
            "capacityReservationType",
            "capacityReservationStartDate",
            "capacityReservationEndDate",
        }
        # A reserved instance names its reservation's type and dates; others carry nulls.
        reserved = instance["capacityType"] == "reserved"
        assert (instance["capacityReservationType"] == "default") is reserved
        assert (instance["capacityReservationStartDate"] is not None) is reserved
    kinds = Counter(i["capacityType"] for i in detail["instances"])
    assert kinds == {"reserved": 1, "on-demand": 1}
    assert detail["receivedAt"].endswith("Z") and detail["finishedAt"].endswith("Z")


def test_a_replayed_reserved_launch_keeps_the_reservation_it_landed_in(
    cloud, subnets, image, monkeypatch
):
    # Given a reserved-only pool whose NodeClass targets one ODCR, and a worker that dies right
    # after CreateFleet put 2 instances in it (its intent stays pending)
    reservation = targeted_pool(cloud, subnets, image, 2, capacity_types=("reserved",))
    request = launch_request("crash-reserved", nodePool="general", count=2)
    killed_after_create_fleet(cloud, request, monkeypatch)
    # When the reservation is cancelled before the retry: EC2 User Guide, "Cancel a Capacity
    # Reservation" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-release.html):
    # "the instances continue to run normally outside of the capacity reservation at standard
    # On-Demand Instance rates"; the emulator then no longer names the reservation on them
    cloud.ec2.cancel_capacity_reservation(CapacityReservationId=reservation)
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then the record says how they were launched: in the reservation, not On-Demand in a
    # reserved-only pool
    record = cloud.record("crash-reserved")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert {(i.capacity_type, i.capacity_reservation_id) for i in record.instances} == {
        ("reserved", reservation)
    }


def test_a_vanished_group_member_does_not_empty_the_group_on_the_stale_snapshot_path(
    cloud, subnets, image
):
    """Issue 27: with no fresh snapshot, the launcher describes the group's members itself; a
    member EC2 no longer knows fails that call whole (InvalidCapacityReservationId.NotFound,
    EC2 API Reference, "Error codes for the Amazon EC2 API"), and must cost only that member."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    from moto_capacity.ec2.models.backend import capacity_backend

    # Given a group of two reservations of 1 each, one of which EC2 has since forgotten (the
    # group still lists it), and no sync yet (the launcher reads EC2 itself)
    vanished, live = reserve(cloud, 1), reserve(cloud, 1)
    arn = group_of(cloud, vanished, live)
    del capacity_backend(ec2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]).reservations[vanished]
    group_pool(cloud, subnets, image, arn, capacity_types=("reserved",))
    # When 1 instance is requested
    cloud.send(launch_request("r-vanished", nodePool="general", count=1))
    # Then it lands in the member still there
    record = cloud.record("r-vanished")
    assert record is not None and record.launched == 1, record
    assert [i.capacity_reservation_id for i in record.instances] == [live]
