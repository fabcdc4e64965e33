"""Issue 4: the shared ICE cache, fallback, exact limits, gang launches and batch coalescing."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from local_cloud.lambda_runtime import outside_functions
from tests.integration.test_launch_into_reservations import (
    ZONE,
    available,
    expire_idempotency_claims,
    group_of,
    reserve,
    setup_pool,
)
from tests.integration.test_reservation_sync import ice_keys, snapshot, sync
from tests.support.cloud import Cloud, capacity_type, emulator_seconds, launch_request
from tests.support.leases import reserve_room

OTHER_ZONE = "us-east-1b"


def ice_items(cloud: Cloud) -> dict[str, dict[str, str]]:
    db = aws.client("dynamodb")
    items = db.scan(TableName=cloud.names.unavailable_offerings_table)["Items"]
    return {i["offering"]["S"]: {k: next(iter(v.values())) for k, v in i.items()} for i in items}


def tagged_ids(cloud: Cloud, request_id: str) -> set[str]:
    """Instances EC2 lists with `capacity-launcher:request-id` = `request_id`."""
    tagged = cloud.ec2.describe_instances(
        Filters=[{"Name": "tag:capacity-launcher:request-id", "Values": [request_id]}]
    )
    return {i["InstanceId"] for r in tagged["Reservations"] for i in r["Instances"]}


def overrides_tried(calls: list[dict]) -> set[tuple[str, str]]:
    return {
        (o["InstanceType"], o["AvailabilityZone"])
        for c in calls
        for config in c["LaunchTemplateConfigs"]
        for o in config["Overrides"]
    }


def test_on_demand_ice_is_cached_with_its_key_reason_and_expiry(
    cloud, subnets, image, fleet_inputs
):
    # Given m5.large on-demand dry in us-east-1a, with us-east-1b open
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), zones=(ZONE, OTHER_ZONE))
    before = emulator_seconds()
    # When a request launches
    cloud.send(launch_request("ice-1", nodePool="general", count=1))
    # Then the dry offering is cached exactly as docs/contracts.md's ICE cache contract says
    items = ice_items(cloud)
    item = items[f"on-demand:m5.large:{ZONE}"]
    assert item["reason"] == "InsufficientInstanceCapacity"
    # (on the emulator's clock, which the service reads and its waits move)
    assert before + 180 <= int(item["expiresAt"]) <= emulator_seconds() + 180
    assert item["cachedAt"].endswith("Z")
    record = cloud.record("ice-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert record.instances[0].zone == OTHER_ZONE
    assert any(
        u.zone == ZONE and u.reason == "InsufficientInstanceCapacity"
        for u in record.unavailable_offerings
    )
    # And the next request (another container) never offers that pool to EC2
    fleet_inputs.clear()
    cloud.send(launch_request("ice-2", nodePool="general", count=1), batch=cloud.fresh_batch())
    assert fleet_inputs, "the second request must still launch"
    assert ("m5.large", ZONE) not in overrides_tried(fleet_inputs)


def test_expired_cache_items_are_ignored(cloud, subnets, image, fleet_inputs):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), zones=(ZONE,))
    db = aws.client("dynamodb")
    db.put_item(
        TableName=cloud.names.unavailable_offerings_table,
        Item={
            "offering": {"S": f"on-demand:m5.large:{ZONE}"},
            "reason": {"S": "InsufficientInstanceCapacity"},
            "message": {"S": "old"},
            "cachedAt": {"S": "2020-01-01T00:00:00Z"},
            "expiresAt": {"N": str(int(time.time()) - 1)},
        },
    )
    cloud.send(launch_request("expired-1", nodePool="general"))
    assert ("m5.large", ZONE) in overrides_tried(fleet_inputs)
    record = cloud.record("expired-1")
    assert record is not None and record.status is RequestStatus.FULFILLED


def competitor_takes_before_the_next_fleet(
    image: str, reservation: str, count: int, zone: str = ZONE
) -> None:
    """Just before the launcher's next CreateFleet, someone else launches `count` instances into
    `reservation` (what the launcher read a moment ago is stale by then)."""
    competitor = boto3.client("ec2", region_name="us-east-1")

    def take(**_: object) -> None:
        aws.client("ec2").meta.events.unregister("before-call.ec2.CreateFleet", take)
        with outside_functions():  # the competitor's launch is not the launcher's call
            competitor.run_instances(
                ImageId=image,
                InstanceType="m5.large",
                MinCount=count,
                MaxCount=count,
                Placement={"AvailabilityZone": zone},
                CapacityReservationSpecification={
                    "CapacityReservationTarget": {"CapacityReservationId": reservation}
                },
            )

    aws.client("ec2").meta.events.register("before-call.ec2.CreateFleet", take)


def test_reservation_running_out_mid_request_is_cached_and_the_rest_goes_on_demand(
    cloud, subnets, image
):
    # Given a targeted reservation of 2, and a competitor that takes one of them just before
    # our CreateFleet (what we read a moment ago is stale by then)
    reservation = reserve(cloud, 2)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    competitor_takes_before_the_next_fleet(image, reservation, 1)
    # When 3 instances are requested
    cloud.send(launch_request("mid-1", nodePool="general", count=3))
    # Then EC2's refusal is cached as the reservation's key, and the rest went on-demand
    item = ice_items(cloud)[f"reserved:{reservation}"]
    assert item["reason"] == "ReservationCapacityExceeded"
    record = cloud.record("mid-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert Counter(i.capacity_type for i in record.instances) == {"reserved": 1, "on-demand": 2}
    assert [u.capacity_reservation_id for u in record.unavailable_offerings] == [reservation]


def test_reservation_out_of_capacity_fails_the_request_when_the_pool_is_reserved_only(
    cloud, subnets, image
):
    reservation = reserve(cloud, 1)
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("reserved",),
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    cloud.send(launch_request("full-1", nodePool="general", count=1))
    cloud.send(launch_request("full-2", nodePool="general", count=1, minCount=1))
    record = cloud.record("full-2")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [u.capacity_reservation_id for u in record.unavailable_offerings] == [reservation]
    assert record.unavailable_offerings[0].reason == "ReservationCapacityExceeded"
    assert record.errors, "a failed request says why"


def test_throttling_becomes_a_batch_item_failure_and_the_retry_launches_once(cloud, subnets, image):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
    request = launch_request("throttle-1", nodePool="general", count=2)
    failures = cloud.send(request)
    assert len(failures) == 1, "a throttled request goes back to the queue"
    assert cloud.record("throttle-1") is None
    moto_capacity.reset()  # EC2 calms down
    assert cloud.send(request) == []
    record = cloud.record("throttle-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert len(cloud.managed_instances()) == 2


def test_fifty_concurrent_requests_never_overrun_a_limit(cloud, subnets, image):
    # m5.large is 2 vCPU: a 20-cpu limit allows exactly 10 instances
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "20"})
    batches = [cloud.fresh_batch() for _ in range(5)]

    def submit(n: int) -> int | None:
        """The request's delivery; `n` when its message was handed back (a lease transaction
        that kept losing to the others on a loaded machine: SQS delivers it again)."""
        body = launch_request(f"conc-{n}", nodePool="general", count=1)
        return n if cloud.send(body, batch=batches[n % 5]) else None

    pending: list[int] = list(range(50))
    for _ in range(3):  # each round redelivers what the one before handed back
        with ThreadPoolExecutor(max_workers=50) as pool:
            pending = [n for n in pool.map(submit, pending) if n is not None]
    assert pending == []
    assert len(cloud.managed_instances()) == 10
    statuses = Counter(cloud.record(f"conc-{n}").status for n in range(50))  # type: ignore[union-attr]
    assert statuses == {RequestStatus.FULFILLED: 10, RequestStatus.FAILED: 40}
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage("general")
    assert usage.instances == 10 and usage.cpu == 20


def test_a_crashed_workers_lease_expires_and_frees_the_limit(cloud, subnets, image):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    store = PoolLeaseStore(
        cloud.names.state_table, 1, aws.client("dynamodb"), clock=lambda: time.time() - 10
    )
    # Given a worker that leased the whole pool and died (its lease already expired)
    assert reserve_room(store, "general", "dead-worker", Resources(instances=1), 2, 1, None) == 2
    cloud.send(launch_request("after-crash-1", nodePool="general"))
    blocked = cloud.record("after-crash-1")
    assert blocked is not None and blocked.status is RequestStatus.FAILED
    # When the expired lease is reclaimed
    live = PoolLeaseStore(cloud.names.state_table, 900, aws.client("dynamodb"), clock=time.time)
    (lease,) = [le for le in live.leases() if le.lease_id == "dead-worker"]
    assert live.reclaim(lease)
    # Then the pool has room again
    cloud.send(launch_request("after-crash-2", nodePool="general"))
    record = cloud.record("after-crash-2")
    assert record is not None and record.status is RequestStatus.FULFILLED


def test_min_count_not_met_terminates_what_launched_and_fails(cloud, subnets, image):
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 2)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), zones=(ZONE,))
    cloud.send(launch_request("gang-1", nodePool="general", count=4, minCount=4))
    record = cloud.record("gang-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert record.launched == 0 and record.instances == []
    assert any(e.code == "MinCountNotMet" for e in record.errors)
    assert cloud.managed_instances() == []
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage("general")
    assert usage.instances == 0


def synced_group_of_two(cloud: Cloud, subnets: dict[str, str], image: str) -> tuple[str, str]:
    """A pool targeting a group of two reservations of 2 (one per zone), synced."""
    first, second = reserve(cloud, 2), reserve(cloud, 2, zone=OTHER_ZONE)
    arn = group_of(cloud, first, second)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": arn}
        },
        zones=(ZONE, OTHER_ZONE),
    )
    sync()
    return first, second


def reserved_gang(cloud: Cloud, request_id: str, count: int) -> RequestRecord | None:
    """A reserved-only gang of `count` (minCount = count) is sent; its record."""
    requirements = [capacity_type("reserved")]
    cloud.send(
        launch_request(
            request_id, nodePool="general", count=count, minCount=count, requirements=requirements
        )
    )
    return cloud.record(request_id)


def test_gang_rollback_in_a_group_does_not_leave_its_reservation_marked_dry(cloud, subnets, image):
    # Given a group of two reservations of 2 each, in two zones, with the sync's snapshots
    first, second = synced_group_of_two(cloud, subnets, image)
    # When a reserved-only gang of 5 gets 4 from the group (EC2 answers
    # ReservationCapacityExceeded for the fifth), misses minCount and is rolled back
    gang = reserved_gang(cloud, "gang", 5)
    assert gang is not None and any(e.code == "MinCountNotMet" for e in gang.errors), gang
    assert gang.unavailable_offerings, gang.to_detail()
    assert available(cloud, first) == 2 and available(cloud, second) == 2
    # Then no worker is told the group's members are dry: the gang filled them itself, and
    # every slot is free again (README "How it works" 5: reserved first)
    assert not {f"reserved:{r}" for r in (first, second)} & ice_keys()
    assert not snapshot(first).snapshot.exhausted and not snapshot(second).snapshot.exhausted
    # And the next request lands in them, not on-demand
    cloud.send(launch_request("after-gang", nodePool="general", count=4))
    after = cloud.record("after-gang")
    assert after is not None and after.status is RequestStatus.FULFILLED, after.to_detail()
    assert {i.capacity_reservation_id for i in after.instances} == {first, second}


def test_gang_rollback_keeps_a_reservation_it_landed_nothing_in_marked_dry(cloud, subnets, image):
    # Given a group of two reservations of 2 each, in two zones, with the sync's snapshots, and
    # a competitor that fills the second just before our CreateFleet
    first, second = synced_group_of_two(cloud, subnets, image)
    competitor_takes_before_the_next_fleet(image, second, 2, zone=OTHER_ZONE)
    # When a reserved-only gang of 4 gets the first's 2, is refused in the second, and is
    # rolled back
    gang = reserved_gang(cloud, "gang-4", 4)
    assert gang is not None and any(e.code == "MinCountNotMet" for e in gang.errors), gang
    # Then the reservation EC2 refused without the gang in it stays dry for every worker; the
    # one the gang alone filled is free again, and not marked
    assert f"reserved:{second}" in ice_keys() and snapshot(second).snapshot.exhausted
    assert f"reserved:{first}" not in ice_keys() and not snapshot(first).snapshot.exhausted
    assert available(cloud, first) == 2


def test_compatible_requests_in_one_batch_share_one_create_fleet(
    cloud, subnets, image, fleet_inputs
):
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    counts = {"co-1": 1, "co-2": 2, "co-3": 3}
    failures = cloud.send(
        *(launch_request(r, nodePool="general", count=n) for r, n in counts.items())
    )
    assert failures == []
    assert len(fleet_inputs) == 1
    for request_id, count in counts.items():
        record = cloud.record(request_id)
        assert record is not None and record.launched == count
        assert tagged_ids(cloud, request_id) == {i.instance_id for i in record.instances}


def test_a_retry_after_settling_counts_the_instances_once(cloud, subnets, image, monkeypatch):
    from capacity_launcher.adapters.launch_records import LaunchRecords

    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    request = launch_request("settled-1", nodePool="general", count=3)

    # Given a worker that dies after settling the pool's usage, before writing the record
    def die(*_: object, **__: object) -> None:
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "put_records", die)  # the visit's records
        with pytest.raises(SystemExit):
            cloud.send(request)
    expire_idempotency_claims(cloud)
    # When the request is delivered again
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then the pool counts its 3 instances once
    usage = PoolUsageStore(cloud.names.state_table, aws.client("dynamodb")).usage("general")
    assert usage.instances == 3
    record = cloud.record("settled-1")
    assert record is not None and record.launched == 3
    assert len(cloud.managed_instances()) == 3


def test_a_coalesced_groups_later_attempt_is_tagged_for_the_request_it_serves(
    cloud, subnets, image, fleet_inputs
):
    # Given a reservation with room for one, and two coalesced requests of one instance each:
    # the reserved attempt serves the first, an on-demand attempt the second alone
    reservation = reserve(cloud, 1)
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": reservation}},
    )
    failures = cloud.send(
        launch_request("tag-1", nodePool="general", count=1),
        launch_request("tag-2", nodePool="general", count=1),
    )
    assert failures == []
    assert len(fleet_inputs) == 2
    # Then each instance carries the request id of the record that names it (the second
    # fleet's own tags name tag-2, not the group's first request)
    for request_id in ("tag-1", "tag-2"):
        record = cloud.record(request_id)
        assert record is not None and record.launched == 1
        assert tagged_ids(cloud, request_id) == {i.instance_id for i in record.instances}


def test_a_replay_whose_lease_was_reclaimed_takes_its_instances_and_launches_no_more(
    cloud, subnets, image, monkeypatch
):
    from capacity_launcher.adapters.launch_records import LaunchRecords

    # Given two pools of one instance each, and a request naming neither
    for pool in ("general", "other"):
        setup_pool(
            cloud,
            subnets,
            image,
            capacity_types=("on-demand",),
            limits={"instances": "1"},
            pool=pool,
            klass=f"{pool}-class",
        )
    request = launch_request("lost-lease-1", count=1)

    # And a worker killed right after its CreateFleet in the first pool
    def die(*_: object, **__: object) -> None:
        raise SystemExit("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "complete_intent", die)
        patch.setattr(LaunchRecords, "completion_updates", die)  # or its settle
        with pytest.raises(SystemExit):
            cloud.send(request)
    (launched,) = cloud.managed_instances()
    # And its lease expired and was reclaimed, its instance counted instead (the sync's work)
    later = PoolLeaseStore(
        cloud.names.state_table, 900, aws.client("dynamodb"), clock=lambda: time.time() + 1000
    )
    (lease,) = [le for le in later.leases() if le.lease_id == "lost-lease-1"]
    assert later.reclaim(lease)
    members = PoolMemberStore(cloud.names.state_table, aws.client("dynamodb"), clock=time.time)
    assert members.count("general", launched["InstanceId"], Resources(instances=1, cpu=2))
    expire_idempotency_claims(cloud)
    # When the request is delivered again (the first pool is full now)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then it takes the instance its intent launched; nothing is launched in the other pool
    record = cloud.record("lost-lease-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert [i.instance_id for i in record.instances] == [launched["InstanceId"]]
    assert len(cloud.managed_instances()) == 1
