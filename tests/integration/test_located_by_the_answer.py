"""Issue 38: an attempt that can land in one reservation only is located by CreateFleet's answer.

A reserved attempt is `capacity-reservations-only` with one reservation id: each instance it got
is in that reservation, its type and zone the answer's. No DescribeInstances is made for it, and
its record names the reservation as before. An on-demand attempt still asks EC2 where its
instances are: only DescribeInstances names an open reservation EC2 put one in on its own."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import (
    available,
    reserve,
    setup_pool,
    targeted_pool,
)
from tests.support.cloud import launch_request


def _ec2_calls() -> Counter[str]:
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    aws.client("ec2").meta.events.register("provide-client-params.ec2.*", note)
    return calls


def test_a_targeted_reservation_launch_is_located_without_describing(cloud, subnets, image):
    # Given a NodeClass targeting one ODCR with room for 3
    reservation = targeted_pool(cloud, subnets, image, 3)
    calls = _ec2_calls()
    # When 2 instances are requested
    assert cloud.send(launch_request("r-answer", nodePool="general", count=2)) == []
    # Then both are recorded in the reservation, from the answer alone
    record = cloud.record("r-answer")
    assert record is not None and record.launched == 2, record
    assert {i.capacity_reservation_id for i in record.instances} == {reservation}
    assert {i.capacity_type for i in record.instances} == {"reserved"}
    assert {(i.instance_type, i.zone) for i in record.instances} == {("m5.large", "us-east-1a")}
    assert calls["CreateFleet"] == 1
    assert calls["DescribeInstances"] == 0
    # And EC2 agrees, once it lists them
    cloud.wait_out_consistency()
    described = cloud.ec2.describe_instances(InstanceIds=[i.instance_id for i in record.instances])
    reported = {
        (i["CapacityReservationId"], i["InstanceType"], i["Placement"]["AvailabilityZone"])
        for r in described["Reservations"]
        for i in r["Instances"]
    }
    assert reported == {(reservation, "m5.large", "us-east-1a")}
    assert available(cloud, reservation) == 1


def test_an_on_demand_launch_still_asks_where_it_landed(cloud, subnets, image):
    # Given an open reservation no NodeClass selects, and an on-demand pool (preference open)
    reservation = reserve(cloud, 2, InstanceMatchCriteria="open")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    calls = _ec2_calls()
    # When one instance is requested
    assert cloud.send(launch_request("r-open-asked", nodePool="general")) == []
    # Then EC2 was asked, and the record names the reservation EC2 put it in
    record = cloud.record("r-open-asked")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    assert calls["DescribeInstances"] >= 1
