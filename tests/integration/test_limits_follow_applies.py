"""A pool's limits hold from the moment they are applied, whatever a container's copy of the pool
says (the simulation found a lowered limit overrun by a launcher reading its 10 s copy, and a
deleted pool's limit overrun by one whose copy outlived the deletion)."""

from __future__ import annotations

import time
from typing import Any

import moto_capacity
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.wiring import Adapters
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import expire_idempotency_claims, setup_pool
from tests.support.cloud import capacity_type, instance_type, launch_request, node_pool


def test_a_lowered_limit_holds_at_once_for_a_container_with_a_stale_copy(cloud, subnets, image):
    # Given a container that served a pool limited to 3 instances (its copy of the pool is warm)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    cloud.send(launch_request("warm", nodePool="general"))
    # When an operator lowers the limit to 1, and the same container serves 2 more at once
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("after-lowering", nodePool="general", count=2))
    # Then nothing more is launched: the lease was checked against the stored limits
    record = cloud.record("after-lowering")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert record.errors[0].code == "LimitExceeded"
    assert len(cloud.managed_instances()) == 1


def test_a_raised_limit_is_used_at_once_by_a_container_with_a_stale_copy(cloud, subnets, image):
    # Given a pool limited to 1 instance, full, in a warm container
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("fills", nodePool="general"))
    # When the limit is raised to 3 and the same container serves 2 more
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    cloud.send(launch_request("after-raising", nodePool="general", count=2))
    # Then they launch: a stale copy never refuses what the stored limits allow
    record = cloud.record("after-raising")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.launched == 2


def test_a_gang_a_stale_copy_says_can_never_fit_is_judged_on_the_stored_limits(
    cloud, subnets, image
):
    # Given a warm container whose copy limits the pool to 1 instance
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("warm-gang", nodePool="general"))
    # When the limit is raised to 4 and a gang of 3 comes to that container
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "4"})
    cloud.send(launch_request("gang-after-raising", nodePool="general", count=3, minCount=3))
    # Then it is served, not rejected as "can never fit"
    record = cloud.record("gang-after-raising")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()


def test_a_pool_deleted_since_a_container_read_it_gains_nothing_past_its_limit(
    cloud, subnets, image
):
    # Given a pool limited to 1 instance, full, in a warm container (its copy says limit 1)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("fills", nodePool="general"))
    # When the operator deletes the pool, and the same container serves 4 more within its copy's
    # lifetime (the simulation's soak, seed 5: 4 launched in a deleted pool limited to 1)
    Adapters(get_settings()).config_store().delete_pool("general")
    cloud.send(launch_request("after-deletion", nodePool="general", count=4))
    # Then nothing more is launched: a deleted pool is not a pool without limits
    record = cloud.record("after-deletion")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert [e.code for e in record.errors] == ["NodePoolDeleted"], record.to_detail()
    assert len(cloud.managed_instances()) == 1


def test_a_request_for_any_pool_passes_over_one_deleted_since_a_container_read_it(
    cloud, subnets, image
):
    # Given two pools of equal weight (`general` is tried first) in a warm container's copy
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    requirements = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=requirements))
    cloud.send(launch_request("warm"))
    # When `general` is deleted and a request naming no pool comes to that container
    Adapters(get_settings()).config_store().delete_pool("general")
    cloud.send(launch_request("any-pool", count=2))
    # Then it launches in `spare`, saying why `general` was passed over
    record = cloud.record("any-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare"
    passed_over = [e.message for e in record.errors if e.code == "NodePoolPassedOver"]
    assert passed_over == [
        "nodePool general: NodePool general was deleted after this worker read it: nothing more"
        " is launched in it"
    ], record.to_detail()


def throttled_with_its_lease_reclaimed(cloud, subnets, image) -> dict[str, Any]:
    """A pool limited to 1, and a request whose CreateFleet was throttled (its intent written and
    pending, EC2 launched nothing, its message handed back), its lease expired and reclaimed
    since (the redelivery came late: a crash, the DLQ, a redrive)."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
    request = launch_request("throttled", nodePool="general")
    assert len(cloud.send(request)) == 1
    moto_capacity.reset()
    later = PoolLeaseStore(get_settings().state_table_name, 900, clock=lambda: time.time() + 3600)
    [lease] = later.leases()
    assert later.reclaim(lease)
    return request


def test_a_throttled_launch_replayed_after_its_lease_was_reclaimed_stays_within_the_limit(
    cloud, subnets, image
):
    # Given a throttled request in a pool limited to 1, its lease reclaimed
    request = throttled_with_its_lease_reclaimed(cloud, subnets, image)
    # When another request fills the pool, and the throttled one is delivered again
    assert cloud.send(launch_request("fills", nodePool="general")) == []
    expire_idempotency_claims(cloud)
    cloud.send(request, batch=cloud.fresh_batch())
    # Then the pool still runs 1 instance (it ran 2: the replay launched without a lease), and
    # the throttled request's record says why it launched nothing
    assert len(cloud.managed_instances()) == 1
    record = cloud.record("throttled")
    assert record is not None and record.status is RequestStatus.FAILED, record
    assert [e.code for e in record.errors] == ["LimitExceeded"], record.to_detail()
    assert "not sent again" in record.errors[0].message


def test_a_throttled_launch_replayed_after_its_lease_was_reclaimed_leases_again_when_room_is_left(
    cloud, subnets, image
):
    # Given a throttled request in a pool limited to 1, its lease reclaimed
    request = throttled_with_its_lease_reclaimed(cloud, subnets, image)
    # When it is delivered again while the pool still has room
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then it takes a new lease and its launch is sent: 1 instance, counted once
    record = cloud.record("throttled")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert len(cloud.managed_instances()) == 1
    assert PoolUsageStore(get_settings().state_table_name).usage("general").instances == 1


def redelivered_after_its_pool_was_deleted(
    cloud, subnets, image, spare_limits: dict[str, str] | None
) -> None:
    """A request naming no pool, throttled in `general` (its intent written, its lease held),
    delivered again after `general` was deleted: it now resolves to `spare`."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    requirements = [capacity_type("on-demand"), instance_type("m5.large")]
    limits = {"limits": spare_limits} if spare_limits else {}
    cloud.apply(node_pool("spare", "standard", requirements=requirements, **limits))
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
    request = launch_request("any-pool", count=2)
    assert len(cloud.send(request)) == 1
    moto_capacity.reset()
    Adapters(get_settings()).config_store().delete_pool("general")
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []


def test_intents_of_a_deleted_pool_are_not_replayed_in_another_pool(cloud, subnets, image):
    # Given a request throttled in `general`, redelivered after `general` was deleted (it now
    # resolves to `spare`, limited to 1)
    redelivered_after_its_pool_was_deleted(cloud, subnets, image, {"instances": "1"})
    # Then `spare` stays within its limit, and what runs is tagged with the pool it is counted in
    # (it ran 2 in `spare`, limit 1, tagged `general`, counted in both pools' usage)
    spare = PoolUsageStore(get_settings().state_table_name).usage("spare")
    assert spare.instances <= 1
    record = cloud.record("any-pool")
    assert record is not None
    pools = {
        {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get("capacity-launcher:node-pool")
        for i in cloud.managed_instances()
    }
    assert pools <= {record.node_pool}
    assert record.node_pool == "spare" and record.launched == 1, record.to_detail()
    # and its record says why it got 1 of 2: spare's limit (issue 40)
    assert [e.code for e in record.errors] == ["NodePoolPassedOver", "LimitReached"], (
        record.to_detail()
    )


def test_intents_of_a_deleted_pool_are_not_replayed_where_the_request_resolves_now(
    cloud, subnets, image
):
    # Given a request throttled in `general`, redelivered after `general` was deleted (it now
    # resolves to `spare`, which has room for all of it)
    redelivered_after_its_pool_was_deleted(cloud, subnets, image, None)
    # Then `general`'s launch is not sent in `spare` (its instances tagged `general`, counted in
    # both): the request is served afresh in `spare`, its instances tagged and counted there
    record = cloud.record("any-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "spare"
    tags = [{t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in cloud.managed_instances()]
    assert [t.get("capacity-launcher:node-pool") for t in tags] == ["spare", "spare"]
    assert PoolUsageStore(get_settings().state_table_name).usage("spare").instances == 2
