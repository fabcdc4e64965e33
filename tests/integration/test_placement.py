"""Issue 15: placement that serves gangs and pools, through the local cloud (moto + extension)."""

from __future__ import annotations

import time
from typing import Any

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.domain.status import RequestStatus
from capacity_launcher_cli.lambda_runtime import outside_functions
from tests.integration.test_launch_into_reservations import ZONE, reserve, setup_pool
from tests.support.cloud import Cloud, capacity_type, launch_request, node_class, node_pool

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
