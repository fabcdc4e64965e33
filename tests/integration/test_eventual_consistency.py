"""Issue 12.3: reads right after CreateFleet, with EC2's eventual consistency on.

EC2 API Reference, "Eventual consistency in the Amazon EC2 API"
(https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): ids CreateFleet
just returned can be unknown to DescribeInstances, CreateTags and TerminateInstances for a while.
"""

from __future__ import annotations

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import ZONE, setup_pool, targeted_pool
from tests.support.cloud import Cloud, launch_request


def test_a_launch_waits_out_unknown_fresh_ids_and_reports_the_reservation(
    cloud: Cloud, subnets, image
):
    # Given a targeted reservation, and fresh ids unknown for 5 s (the backoff waits ~8 s at most)
    reservation = targeted_pool(cloud, subnets, image, 2)
    moto_capacity.set_consistency(instance_visibility_seconds=5)
    # When a request launches into it
    handed_back = cloud.send(launch_request("fresh-1", nodePool="general", count=2))
    # Then nothing goes back to the queue, and DescribeInstances (once it knows them) told us
    # which reservation the instances run in
    record = cloud.record("fresh-1")
    assert handed_back == []
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_reservation_id for i in record.instances] == [reservation, reservation]
    assert {i.capacity_type for i in record.instances} == {"reserved"}


def test_instances_that_stay_unknown_are_reported_from_the_create_fleet_answer(
    cloud: Cloud, subnets, image
):
    # Given fresh ids that stay unknown far longer than the service's backoff
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_consistency(instance_visibility_seconds=3600)
    # When a request launches
    handed_back = cloud.send(launch_request("unseen-1", nodePool="general", count=1))
    # Then the request is fulfilled from what CreateFleet said: type, zone, lifecycle, and no
    # reservation (CreateFleet does not say), instead of failing or going back to the queue
    record = cloud.record("unseen-1")
    assert handed_back == []
    assert record is not None and record.status is RequestStatus.FULFILLED
    (instance,) = record.instances
    assert (instance.instance_type, instance.zone, instance.capacity_type) == (
        "m5.large",
        ZONE,
        "on-demand",
    )
    assert instance.capacity_reservation_id is None


def test_a_gang_launch_below_min_count_terminates_fresh_instances(cloud: Cloud, subnets, image):
    # Given room for 1 of the 2 instances a gang needs, and fresh ids unknown for 4 s
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_consistency(instance_visibility_seconds=4)
    # When the gang is requested
    handed_back = cloud.send(launch_request("gang-fresh", nodePool="general", count=2, minCount=2))
    # Then the one instance launched is terminated (after EC2 knows it), and the request fails
    record = cloud.record("gang-fresh")
    assert handed_back == []
    assert record is not None and record.status is RequestStatus.FAILED
    assert any(e.code == "MinCountNotMet" for e in record.errors)
    assert cloud.managed_instances() == []


def test_requests_sharing_a_fleet_get_their_own_tags_on_fresh_instances(
    cloud: Cloud, subnets, image
):
    # Given two requests coalesced into one CreateFleet, and fresh ids unknown for 4 s
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.set_consistency(instance_visibility_seconds=4)
    # When the batch runs
    handed_back = cloud.send(
        launch_request("tag-1", nodePool="general", count=1),
        launch_request("tag-2", nodePool="general", count=2),
    )
    # Then each request's instances carry its request id (CreateTags waited for them)
    assert handed_back == []
    for request_id, count in (("tag-1", 1), ("tag-2", 2)):
        record = cloud.record(request_id)
        assert record is not None and record.launched == count
        tagged = cloud.ec2.describe_instances(
            Filters=[{"Name": "tag:capacity-launcher:request-id", "Values": [request_id]}]
        )
        ids = {i["InstanceId"] for r in tagged["Reservations"] for i in r["Instances"]}
        assert ids == {i.instance_id for i in record.instances}


def test_instances_of_a_targeted_reserved_attempt_that_stay_unknown_are_in_that_reservation(
    cloud: Cloud, subnets, image
):
    # Given a NodeClass targeting one reservation, and fresh ids unknown for an hour
    reservation = targeted_pool(cloud, subnets, image, 2)
    moto_capacity.set_consistency(instance_visibility_seconds=3600)
    # When a request launches into it
    cloud.send(launch_request("unseen-reserved", nodePool="general", count=2))
    # Then the record says where they must be: `capacity-reservations-only` with one target
    # leaves EC2 no other place, so they are not reported as on-demand (nor their slots freed)
    record = cloud.record("unseen-reserved")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [(i.capacity_type, i.capacity_reservation_id) for i in record.instances] == [
        ("reserved", reservation),
        ("reserved", reservation),
    ]
