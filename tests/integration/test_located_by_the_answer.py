"""Issue 38: an attempt that can land in one reservation only is located by CreateFleet's answer.

A reserved attempt is `capacity-reservations-only` with one reservation id: each instance it got
is in that reservation, its type and zone the answer's. No DescribeInstances is made for it, and
its record names the reservation as before. An on-demand attempt asks EC2 where its instances
are only when EC2 may have put one in an open reservation on its own: only DescribeInstances
names it. It may not when its NodeClass's preference is `none`, or when no open reservation of
the account, as the sync last listed them (carried in the class's shared resolution), is of the
type and zone an instance landed in."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.integration.test_launch_into_reservations import (
    available,
    closed_pool,
    reserve,
    setup_pool,
    targeted_pool,
)
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request


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


def _landed(cloud: Cloud, instance_ids: list[str]) -> set[tuple[str | None, str, str]]:
    """(reservation, type, zone) of each instance, as EC2 lists them."""
    cloud.wait_out_consistency()
    described = cloud.ec2.describe_instances(InstanceIds=instance_ids)
    return {
        (i.get("CapacityReservationId"), i["InstanceType"], i["Placement"]["AvailabilityZone"])
        for r in described["Reservations"]
        for i in r["Instances"]
    }


def test_an_on_demand_launch_no_open_reservation_can_hold_is_located_by_the_answer(
    cloud, subnets, image
):
    # Given reservations of the account none of which can hold an on-demand m5.large in
    # us-east-1a: a targeted one there (never matched on its own), an open one in another zone
    targeted = reserve(cloud, 2, InstanceMatchCriteria="targeted")
    elsewhere = reserve(cloud, 2, InstanceMatchCriteria="open", zone="us-east-1b")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    # And the sync has listed them and shared the class's resolution
    sync()
    calls = _ec2_calls()
    # When one instance is requested
    assert cloud.send(launch_request("r-od-answer", nodePool="general")) == []
    # Then it is recorded on-demand from CreateFleet's answer alone
    record = cloud.record("r-od-answer")
    assert record is not None and record.launched == 1, record
    assert calls["CreateFleet"] == 1
    assert calls["DescribeInstances"] == 0
    assert [(i.capacity_type, i.capacity_reservation_id) for i in record.instances] == [
        ("on-demand", None)
    ]
    # And EC2 agrees: it is in no reservation, and both still have their room
    ids = [i.instance_id for i in record.instances]
    assert _landed(cloud, ids) == {(None, "m5.large", "us-east-1a")}
    assert available(cloud, targeted) == 2 and available(cloud, elsewhere) == 2


def test_an_open_reservation_the_sync_listed_still_sends_an_on_demand_launch_to_ec2(
    cloud, subnets, image
):
    # Given an open reservation no NodeClass selects, of the pool's type and zone, listed by
    # the sync
    reservation = reserve(cloud, 2, InstanceMatchCriteria="open")
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    sync()
    calls = _ec2_calls()
    # When one instance is requested
    assert cloud.send(launch_request("r-od-open", nodePool="general")) == []
    # Then EC2 was asked, and the record names the reservation EC2 put it in
    record = cloud.record("r-od-open")
    assert record is not None
    assert calls["DescribeInstances"] >= 1
    assert [(i.capacity_type, i.capacity_reservation_id) for i in record.instances] == [
        ("reserved", reservation)
    ]


def test_a_class_whose_preference_is_none_is_located_by_the_answer(cloud, subnets, image):
    # Given an open reservation the pool's instances would fit, and a NodeClass whose
    # preference keeps its launches out of every reservation (no sync run: nothing shared)
    reservation = closed_pool(cloud, subnets, image)
    calls = _ec2_calls()
    # When one instance is requested
    assert cloud.send(launch_request("r-od-none", nodePool="general")) == []
    # Then it is located by the answer, on-demand, and EC2 agrees
    record = cloud.record("r-od-none")
    assert record is not None and record.launched == 1, record
    assert calls["DescribeInstances"] == 0
    assert [(i.capacity_type, i.capacity_reservation_id) for i in record.instances] == [
        ("on-demand", None)
    ]
    assert _landed(cloud, [record.instances[0].instance_id]) == {(None, "m5.large", "us-east-1a")}
    assert available(cloud, reservation) == 2


def test_an_on_demand_launch_with_no_shared_resolution_asks_ec2(cloud, subnets, image):
    # Given no sync run (no resolution shared: nothing says which open reservations exist)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    calls = _ec2_calls()
    # When one instance is requested
    assert cloud.send(launch_request("r-od-unknown", nodePool="general")) == []
    # Then EC2 is asked where it landed
    record = cloud.record("r-od-unknown")
    assert record is not None and record.launched == 1, record
    assert calls["DescribeInstances"] >= 1
