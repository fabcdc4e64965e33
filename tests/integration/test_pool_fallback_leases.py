"""A request that leaves a pool for the next one leaves nothing of its own behind there.

A request naming no pool goes on from `general` to `spare` when every offering of `general` is in
the shared ICE cache (`NodePoolPassedOver`). On a redelivery it may hold a lease in `general`
already: an earlier delivery took it and was killed, before any intent named the request (the
lease covers nothing launched: it is given back as the request goes on, or `general` would refuse
others `LimitExceeded` for capacity nobody uses until the lease expires, 15 minutes), or after
(an intent names the request: it is finished in `general`, under that lease, never passed on).
A request that ends before its lease phase (refused, resolved again and rejected) gives such a
lease back too, as does one resolved again into another pool."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

import moto_capacity
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import (
    ZONE,
    expire_idempotency_claims,
    setup_pool,
)
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)
from tests.support.crashes import worker_dies_at
from tests.support.leases import reserve_room

GENERAL_DRY = f"on-demand:m5.large:{ZONE}"
M5_LARGE = Resources(Decimal(2), 8192, 0, 1)


def two_pools(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """`general` (m5.large on-demand, room for 1 instance), tried first by a request naming no
    pool, and `spare` (c5.large on-demand)."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    spare = [capacity_type("on-demand"), instance_type("c5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))


def killed_at(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, step: str, **fields: object
) -> dict[str, object]:
    """The first delivery of a request (naming no pool, unless `fields` name one), killed in
    `general` after its lease was taken, at `step` (nothing runs after a kill: not even the
    lease's give-back)."""
    request = launch_request("moved-on", **fields)
    with worker_dies_at(monkeypatch, step):
        cloud.send(request)
    assert [lease.pool for lease in leases()] == ["general"]
    return request


def general_dry(cloud: Cloud) -> None:
    """EC2 has no m5.large on-demand now, and another worker found it so: every offering of
    `general` is in the shared ICE cache."""
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)
    cloud.adapters().unavailable_offerings().mark(
        [(GENERAL_DRY, "InsufficientInstanceCapacity", "no m5.large now")]
    )


def redeliver(cloud: Cloud, request: dict[str, object]) -> None:
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []


def leases() -> list[Lease]:
    return PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases()


def general_usage() -> int:
    return PoolUsageStore(get_settings().state_table_name).usage("general").instances


def test_a_lease_no_intent_names_is_given_back_when_the_request_goes_on(
    cloud, subnets, image, monkeypatch
):
    # Given a request whose first delivery leased `general`'s one instance and was killed
    # before writing its intent, and `general` dry since
    two_pools(cloud, subnets, image)
    request = killed_at(cloud, monkeypatch, "write_intent")
    general_dry(cloud)
    # When it is delivered again: `general` passes it over, `spare` serves it
    redeliver(cloud, request)
    record = cloud.record("moved-on")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare", record.to_detail()
    # Then `general` holds nothing for it (it held the lease until it expired)
    assert leases() == []
    assert general_usage() == 0
    # And its limit has room for the next request's instance (it was refused LimitExceeded)
    store = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time)
    assert reserve_room(store, "general", "next", M5_LARGE, 1, 1, PoolLimits(instances=1)) == 1


@pytest.mark.parametrize(
    ("step", "launched"),
    [
        ("complete_intent", 1),  # killed after its CreateFleet: EC2 launched its instance
        ("write_intent_then_throttled", 0),  # its CreateFleet throttled, handed back
    ],
)
def test_a_request_replaying_its_intent_is_finished_in_its_pool(
    cloud, subnets, image, monkeypatch, step, launched
):
    # Given a request whose first delivery leased `general` and wrote its intent
    two_pools(cloud, subnets, image)
    request = first_delivery_with_intent(cloud, monkeypatch, step)
    # When it is delivered again after `general` went dry in the ICE cache
    general_dry(cloud)
    redeliver(cloud, request)
    # Then its intent is finished in `general`, under its lease, which is settled: the record
    # names what EC2 launched for it there (it said Failed, launched 0, with its instance
    # running in `general`, held by the lease for 15 minutes), and nothing else runs
    record = cloud.record("moved-on")
    assert record is not None and record.node_pool == "general", record.to_detail()
    assert record.launched == launched, record.to_detail()
    assert leases() == []
    assert general_usage() == launched
    running = [i["InstanceId"] for i in cloud.managed_instances()]
    assert running == [i.instance_id for i in record.instances]


def first_delivery_with_intent(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, step: str
) -> dict[str, object]:
    if step == "complete_intent":
        return killed_at(cloud, monkeypatch, step)
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
    request = launch_request("moved-on")
    assert len(cloud.send(request)) == 1
    moto_capacity.reset()
    assert [lease.pool for lease in leases()] == ["general"]
    return request


def refused_by_general(cloud: Cloud, subnets: dict[str, str], image: str, how: str) -> str:
    """`general` refuses requests before anything is leased from now on: applied again with limits
    no m5.large ever fits (the screen), or its NodeClass applied again naming a subnet EC2 does
    not know (the NodeClass refused). Returns what the refusal's message says."""
    if how == "limits":
        setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "1"})
        return "it can never fit"
    group = default_security_group(cloud.ec2)
    cloud.apply(node_class("standard", ["subnet-0badc0de"], image, securityGroupIds=[group]))
    return "spec.subnetIds"


@pytest.mark.parametrize("how", ["limits", "node class"])
def test_a_lease_no_intent_names_is_given_back_when_its_pool_refuses_the_request(
    cloud, subnets, image, monkeypatch, how
):
    # Given a request naming `general` whose first delivery leased its one instance and was
    # killed before writing its intent, and `general` refusing it since
    two_pools(cloud, subnets, image)
    request = killed_at(cloud, monkeypatch, "write_intent", nodePool="general")
    said = refused_by_general(cloud, subnets, image, how)
    # When it is delivered again: `general` refuses it, and it has no other pool
    redeliver(cloud, request)
    record = cloud.record("moved-on")
    assert record is not None and record.launched == 0, record.to_detail()
    assert said in record.errors[-1].message, record.to_detail()
    # Then `general` holds nothing for it (it held the lease until it expired, 15 minutes)
    assert leases() == []
    assert general_usage() == 0


def warm_beside_spare(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """`general` (m5.large) before `spare` (c5.large or m5.large), in a warm launcher's copy."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    spare = [capacity_type("on-demand"), instance_type("c5.large", "m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    cloud.send(launch_request("warm", nodePool="general"))


@pytest.mark.parametrize(
    ("fields", "status", "pool"),
    [
        ({}, RequestStatus.FULFILLED, "spare"),  # resolved again into `spare`
        ({"nodePool": "general"}, RequestStatus.REJECTED, "general"),  # no pool allows it now
    ],
)
def test_a_lease_no_intent_names_is_given_back_when_the_request_is_resolved_again(
    cloud, subnets, image, monkeypatch, fields, status, pool
):
    # Given a warm launcher, and a request for an m5.large whose first delivery leased in
    # `general` and was killed before writing its intent
    warm_beside_spare(cloud, subnets, image)
    m5 = [instance_type("m5.large")]
    request = killed_at(cloud, monkeypatch, "write_intent", requirements=m5, **fields)
    # When `general` is applied again allowing c5.large only, and the request is delivered again
    # at once to the warm launcher (its copy of `general` is older: the lease it finds is not
    # taken up, and the request is resolved again on the stored pools)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large",))
    expire_idempotency_claims(cloud)
    assert cloud.send(request) == []
    record = cloud.record("moved-on")
    assert record is not None and record.status is status, record.to_detail()
    assert record.node_pool == pool, record.to_detail()
    # Then `general` holds nothing for it: no lease, and only the warm request's instance
    assert leases() == []
    assert general_usage() == 1
