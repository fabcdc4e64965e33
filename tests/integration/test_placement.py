"""Issue 15: placement that serves gangs and pools, through the local cloud (moto + extension)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch import Message
from local_cloud.lambda_runtime import outside_functions
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_reservations import ZONE, available, reserve, setup_pool
from tests.support.cloud import (
    Cloud,
    capacity_type,
    emulator_seconds,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)

OTHER_ZONE = "us-east-1b"


def instance_states(cloud: Cloud, *instance_ids: str) -> dict[str, str]:
    found = cloud.ec2.describe_instances(InstanceIds=list(instance_ids))
    return {
        i["InstanceId"]: i["State"]["Name"] for r in found["Reservations"] for i in r["Instances"]
    }


def cache_dry(cloud: Cloud, *offerings: str) -> None:
    """Offerings another worker found dry a moment ago (the shared ICE cache)."""
    for offering in offerings:
        aws.client("dynamodb").put_item(
            TableName=cloud.names.unavailable_offerings_table,
            Item={
                "offering": {"S": offering},
                "reason": {"S": "InsufficientInstanceCapacity"},
                "message": {"S": "dry"},
                "cachedAt": {"S": "2026-01-01T00:00:00Z"},
                "expiresAt": {"N": str(int(time.time()) + 180)},
            },
        )


def flexible_pool(cloud: Cloud, subnets: dict[str, str], image: str, **requirement: Any) -> None:
    sg = cloud.ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
    cloud.apply(
        node_class("flexible", [subnets[ZONE], subnets[OTHER_ZONE]], image, securityGroupIds=[sg]),
        node_pool(
            "flexible",
            "flexible",
            requirements=[
                capacity_type("on-demand"),
                {"key": "node.kubernetes.io/instance-type", **requirement},
            ],
        ),
    )


def test_a_single_zone_gang_leaves_a_zone_that_falls_short_and_lands_whole_in_another(
    cloud, subnets, image
):
    # Given one reserved slot in us-east-1a, on-demand dry there (EC2 knows, the cache not yet),
    # and on-demand open in us-east-1b
    reservation = reserve(cloud, 1)
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
        zones=(ZONE, OTHER_ZONE),
    )
    # When a gang of 3 asks for one zone
    cloud.send(
        launch_request("gang-zone", nodePool="general", count=3, minCount=3, singleZone=True)
    )
    # Then it lands whole in us-east-1b, and the instance us-east-1a got was taken back
    record = cloud.record("gang-zone")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert {i.zone for i in record.instances} == {OTHER_ZONE}
    (rolled_back,) = [e for e in record.errors if e.code == "ZoneRolledBack"]
    assert f"{ZONE} held 1 of minCount=3" in rolled_back.message
    first = rolled_back.message.split("terminated ")[1].split(" ")[0]
    assert instance_states(cloud, first)[first] in ("shutting-down", "terminated")


def test_among_reservations_the_one_with_the_most_available_is_used_first(cloud, subnets, image):
    # Given two reservations a NodeClass selects; the one listed first (by id) has 1 free, the
    # other 3 (a competitor took 2 of the first)
    first, second = sorted([reserve(cloud, 3), reserve(cloud, 3)])
    with outside_functions():
        cloud.ec2.run_instances(
            ImageId=image,
            InstanceType="m5.large",
            MinCount=2,
            MaxCount=2,
            SubnetId=subnets[ZONE],
            CapacityReservationSpecification={
                "CapacityReservationTarget": {"CapacityReservationId": first}
            },
        )
    setup_pool(cloud, subnets, image, selector_terms=[{"id": first}, {"id": second}])
    # When one instance is requested
    cloud.send(launch_request("most-available", nodePool="general"))
    # Then it goes to the one with 3 free, leaving room for gangs (Karpenter's rule)
    record = cloud.record("most-available")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [second]


def test_min_values_is_kept_when_the_cache_leaves_too_few_instance_types(
    cloud, subnets, image, fleet_inputs
):
    # Given a pool asking for at least 2 instance types, and c5.large dry everywhere
    flexible_pool(
        cloud, subnets, image, operator="In", values=["m5.large", "c5.large"], minValues=2
    )
    cache_dry(cloud, *(f"on-demand:c5.large:{z}" for z in (ZONE, OTHER_ZONE)))
    # When a request comes
    cloud.send(launch_request("inflexible", nodePool="flexible"))
    # Then nothing is launched with less flexibility than asked, and the record says why
    record = cloud.record("inflexible")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert fleet_inputs == []
    (error,) = [e for e in record.errors if e.code == "MinValuesNotMet"]
    assert "minValues=2" in error.message and "m5.large" in error.message


def test_min_values_offers_every_instance_type_to_one_fleet(cloud, subnets, image, fleet_inputs):
    flexible_pool(
        cloud, subnets, image, operator="In", values=["m5.large", "c5.large"], minValues=2
    )

    cloud.send(launch_request("flexible-1", nodePool="flexible"))

    record = cloud.record("flexible-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    offered = {o["InstanceType"] for o in fleet_inputs[0]["LaunchTemplateConfigs"][0]["Overrides"]}
    assert offered == {"m5.large", "c5.large"}


def test_a_request_narrowing_a_pool_below_its_min_values_is_rejected(cloud, subnets, image):
    flexible_pool(
        cloud, subnets, image, operator="In", values=["m5.large", "c5.large"], minValues=2
    )
    narrowing = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
    ]

    cloud.send(launch_request("too-narrow", nodePool="flexible", requirements=narrowing))

    record = cloud.record("too-narrow")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert "minValues=2 needs at least 2 values" in record.errors[0].message


def two_pools(cloud: Cloud, subnets: dict[str, str], image: str, **primary_spec: Any) -> None:
    """`primary` (weight 10, m5.large only) and `secondary` (weight 1, m5.large or c5.large)."""
    sg = cloud.ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
    on_demand = capacity_type("on-demand")
    cloud.apply(
        node_class("shared", [subnets[ZONE], subnets[OTHER_ZONE]], image, securityGroupIds=[sg]),
        node_pool(
            "primary",
            "shared",
            weight=10,
            requirements=[on_demand, instance_type("m5.large")],
            **primary_spec,
        ),
        node_pool(
            "secondary",
            "shared",
            weight=1,
            requirements=[on_demand, instance_type("m5.large", "c5.large")],
        ),
    )


def passed_over(record: Any) -> list[str]:
    return [e.message for e in record.errors if e.code == "NodePoolPassedOver"]


def test_a_request_naming_no_pool_falls_back_by_weight_when_the_first_is_full(
    cloud, subnets, image
):
    # Given the heaviest pool has room for one instance, and it is taken
    two_pools(cloud, subnets, image, limits={"instances": "1"})
    cloud.send(launch_request("fills-primary"))
    first = cloud.record("fills-primary")
    assert first is not None and first.node_pool == "primary", first.to_detail()
    # When another request names no pool
    cloud.send(launch_request("falls-back"))
    # Then the lower-weight pool serves it, and the record says why the first did not
    record = cloud.record("falls-back")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "secondary"
    (why,) = passed_over(record)
    assert why.startswith("nodePool primary:") and "limits" in why


def test_a_pool_whose_offerings_are_all_dry_passes_the_request_on(cloud, subnets, image):
    two_pools(cloud, subnets, image)
    cache_dry(cloud, *(f"on-demand:m5.large:{z}" for z in (ZONE, OTHER_ZONE)))

    cloud.send(launch_request("dry-primary"))

    record = cloud.record("dry-primary")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "secondary"
    assert [i.instance_type for i in record.instances] == ["c5.large"]
    (why,) = passed_over(record)
    assert "every offering is unavailable now (InsufficientInstanceCapacity)" in why


def reserved_only_over_general(
    cloud: Cloud, subnets: dict[str, str], image: str, reservation: str | None = None
) -> None:
    """`reserved-only` (weight 10, no reservation exists, or it targets `reservation`) over
    `general` (weight 1, on-demand)."""
    sg = cloud.ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
    target = {"capacityReservationTarget": {"capacityReservationId": reservation}}
    cloud.apply(
        node_class("shared", [subnets[ZONE]], image, securityGroupIds=[sg]),
        node_class(
            "targeted",
            [subnets[ZONE]],
            image,
            securityGroupIds=[sg],
            **({"capacityReservationSpec": target} if reservation else {}),
        ),
        node_pool(
            "reserved-only",
            "targeted" if reservation else "shared",
            weight=10,
            requirements=[capacity_type("reserved"), instance_type("m5.large")],
        ),
        node_pool(
            "general",
            "shared",
            weight=1,
            requirements=[capacity_type("on-demand"), instance_type("m5.large")],
        ),
    )


def test_a_pool_with_no_offering_now_passes_the_request_on(cloud, subnets, image):
    # Given the heaviest pool launches only into reservations, and none is active
    reserved_only_over_general(cloud, subnets, image)
    # When a request names no pool
    cloud.send(launch_request("no-reservation-yet"))
    # Then the lower-weight pool serves it, and the record says why the first did not
    record = cloud.record("no-reservation-yet")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general"
    (why,) = passed_over(record)
    assert why.startswith("nodePool reserved-only: no reservation node class")


def test_a_request_naming_no_pool_falls_back_even_when_coalesced_with_one_naming_it(
    cloud, subnets, image
):
    # Given one batch with a request naming the heaviest pool and one naming none: both
    # resolve to it, with the same requirements, so they are served together
    reserved_only_over_general(cloud, subnets, image)
    cloud.send(launch_request("names-it", nodePool="reserved-only"), launch_request("names-none"))
    # Then the one that named it gets that pool's answer, and the other still falls back
    named = cloud.record("names-it")
    assert named is not None and named.status is RequestStatus.FAILED, named.to_detail()
    assert named.node_pool == "reserved-only" and named.errors[-1].code == "NoOffering"
    record = cloud.record("names-none")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general"
    (why,) = passed_over(record)
    assert why.startswith("nodePool reserved-only:")


def test_a_pool_that_can_never_fit_the_gang_passes_it_on(cloud, subnets, image):
    two_pools(cloud, subnets, image, limits={"instances": "1"})

    cloud.send(launch_request("big-gang", count=2, minCount=2))

    record = cloud.record("big-gang")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "secondary" and record.launched == 2
    (why,) = passed_over(record)
    assert "can never fit" in why


def test_a_request_naming_its_pool_never_falls_back(cloud, subnets, image):
    two_pools(cloud, subnets, image, limits={"instances": "1"})
    cloud.send(launch_request("fills", nodePool="primary"))

    cloud.send(launch_request("stays", nodePool="primary"))

    record = cloud.record("stays")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.node_pool == "primary" and passed_over(record) == []
    assert record.errors[0].code == "LimitExceeded"


def test_a_redelivery_after_falling_back_finishes_in_the_pool_it_fell_back_to(
    cloud, subnets, image, monkeypatch
):
    # Given the heaviest pool is full, and a worker killed right after its CreateFleet in the
    # lower-weight pool (the intent is written, the record is not)
    two_pools(cloud, subnets, image, limits={"instances": "1"})
    cloud.send(launch_request("fills-primary-2"))
    with monkeypatch.context() as patch:

        def killed(*_: object, **__: object) -> None:
            raise SystemExit("worker killed")

        patch.setattr(LaunchRecords, "complete_intent", killed)
        patch.setattr(LaunchRecords, "completion_updates", killed)  # or its settle
        with pytest.raises(SystemExit):
            cloud.fresh_batch().process(
                [Message("m-1", json.dumps(launch_request("crashed")), datetime.now(UTC))],
                lambda: 1,  # its idempotency claim has expired by the redelivery
            )
    # When the heaviest pool has room again (its limit raised) and the request comes again
    two_pools(cloud, subnets, image, limits={"instances": "4"})
    cloud.send(launch_request("crashed"), batch=cloud.fresh_batch())
    # Then it ends in the pool its intent launched for, with the instance that intent made
    record = cloud.record("crashed")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "secondary" and record.launched == 1
    # And its record names the pool the killed delivery passed over on its way there (the
    # redelivery did not pass it over itself: its notes were that delivery's alone)
    assert [m.split(":")[0] for m in passed_over(record)] == ["nodePool primary"]
    tagged = cloud.ec2.describe_instances(
        Filters=[{"Name": "tag:capacity-launcher:request-id", "Values": ["crashed"]}]
    )
    assert sum(len(r["Instances"]) for r in tagged["Reservations"]) == 1


def test_a_reserved_only_pool_too_small_for_the_gang_passes_it_on_before_launching(
    cloud, subnets, image
):
    # Given the heaviest pool launches only into a reservation with one slot free, and a
    # lower-weight on-demand pool (the reservation is targeted: on-demand launches leave it be)
    reservation = reserve(cloud, 1, InstanceMatchCriteria="targeted")
    reserved_only_over_general(cloud, subnets, image, reservation)
    fleets: list[dict[str, Any]] = []
    aws.client("ec2").meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: fleets.append(params)
    )
    # When a gang of three that names no pool arrives
    cloud.send(launch_request("gang-of-three", count=3, minCount=3))
    # Then the reserved-only pool passes it on without launching (nothing rolled back), and
    # the lower-weight pool serves it whole
    record = cloud.record("gang-of-three")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general" and record.launched == 3
    (why,) = passed_over(record)
    assert why.startswith("nodePool reserved-only: its reservations have room for 1"), why
    assert "minCount=3" in why
    assert len(fleets) == 1 and "MinCountNotMet" not in json.dumps(record.to_detail())
    assert available(cloud, reservation) == 1


def test_a_reserved_only_pool_too_small_for_the_gang_still_serves_one_that_named_it(
    cloud, subnets, image
):
    # Given the reserved-only pool whose reservation has one slot free
    reserved_only_over_general(cloud, subnets, image, reserve(cloud, 1))
    # When a gang of three names it
    cloud.send(launch_request("named-gang", nodePool="reserved-only", count=3, minCount=3))
    # Then it is tried there as before (no other pool may serve it): one lands, is rolled back
    record = cloud.record("named-gang")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.node_pool == "reserved-only" and passed_over(record) == []
    assert any(e.code == "MinCountNotMet" for e in record.errors), record.to_detail()


def test_a_pool_with_more_offerings_than_a_fleet_takes_offers_every_family_and_says_so(
    cloud, subnets, image, fleet_inputs
):
    """docs/placement.md, How an instance type is chosen: a pool allowing every instance type
    has far more offerings than one CreateFleet's overrides; the cut comes after ordering by
    price with each family in turn, so the fleet offers many families (not the first few by
    name), and the record says what was left out."""
    flexible_pool(cloud, subnets, image, operator="Exists")

    cloud.send(launch_request("broad-1", nodePool="flexible"))

    record = cloud.record("broad-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    overrides = fleet_inputs[0]["LaunchTemplateConfigs"][0]["Overrides"]
    assert len(overrides) == 100
    families = {o["InstanceType"].split(".")[0] for o in overrides}
    by_name = sorted({o["InstanceType"] for o in overrides})
    assert len(families) >= 40, sorted(families)
    left_out = record.candidates_left_out
    assert left_out is not None and left_out.offered == 100 and left_out.left_out > 0
    assert left_out.instance_types and not set(left_out.instance_types) & set(by_name)
    assert record.to_detail()["candidatesLeftOut"]["overrideLimit"] == 100


def test_a_broad_pool_claims_and_journals_only_the_offerings_its_fleet_offers(
    cloud, subnets, image, fleet_inputs
):
    """A pool allowing every type has thousands of offerings; the single flight claims, and the
    intent records, only those CreateFleet is asked about (at most 100): one claim per candidate
    made a request into Karpenter's general-purpose example take 49 s on the local cloud.
    (Every offering here was dry a moment ago: a claim is taken only on such evidence.)"""
    flexible_pool(cloud, subnets, image, operator="Exists")
    table = cloud.names.unavailable_offerings_table
    types = [
        t["InstanceType"]
        for page in cloud.ec2.get_paginator("describe_instance_types").paginate()
        for t in page["InstanceTypes"]
    ]
    now = emulator_seconds()
    UnavailableOfferings(table, 600, clock=lambda: now).mark(
        [(f"on-demand:{t}:{z}", "InsufficientInstanceCapacity", "") for t in types for z in subnets]
    )
    # Expired 5 s before the request, however long writing thousands of entries took (over the
    # minute a recent expiry counts as evidence, on a loaded machine: the test then saw none).
    CLOCK.advance(max(0, now + 600 + 5 - emulator_seconds()))
    claims: list[str] = []
    intents: list[int] = []

    def note_intent(params: dict[str, Any], **_: Any) -> None:
        for item in params.get("TransactItems", []):
            put = item.get("Put", {})
            if put.get("TableName") == table and "claimedBy" in put.get("Item", {}):
                claims.append(put["Item"]["offering"]["S"])
            if put.get("Item", {}).get("sk", {}).get("S") == "Intent":
                intents.append(len(put["Item"]["offerings"]["L"]))

    events = aws.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.TransactWriteItems", note_intent)

    cloud.send(launch_request("broad-claims-1", nodePool="flexible"))

    record = cloud.record("broad-claims-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    offered = {
        f"on-demand:{o['InstanceType']}:{o['AvailabilityZone']}"
        for o in fleet_inputs[0]["LaunchTemplateConfigs"][0]["Overrides"]
    }
    assert claims and set(claims) <= offered and len(claims) <= 100
    assert intents and max(intents) <= 100
    left_out = record.candidates_left_out
    assert left_out is not None and left_out.left_out > 0
