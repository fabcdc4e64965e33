"""limits.unready against DynamoDB and EC2 (moto): the lease's gate, decided again when what it
counted changed before its transaction, and the sync's marks (docs/provisioner.md)."""

from __future__ import annotations

import re
import time
from decimal import Decimal
from typing import Any

import pytest

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_readiness import PoolReadiness
from capacity_launcher.domain.accounting.pool_usage import Readiness
from capacity_launcher.domain.errors import UnreadyLimitReached
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.service.launch.progress import Context
from capacity_launcher.service.lease_settlement import settle as settle_lease
from capacity_launcher.service.preview import Usage, preview
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.leases import reserve_room

EACH = Resources(cpu=Decimal(2), memory_mib=8192, instances=1)


def _stores(gate: Any) -> tuple[PoolLeaseStore, PoolLeaseStore]:
    settings = get_settings()
    table, seconds = settings.state_table_name, settings.limit_lease_seconds
    gated = PoolLeaseStore(table, seconds, client("dynamodb"), unready_gate=gate, clock=time.time)
    return gated, PoolLeaseStore(table, seconds, client("dynamodb"), clock=time.time)


def _half_unready_pool(
    cloud: Any, subnets: dict[str, str], image: str
) -> tuple[PoolReadiness, PoolLeaseStore, PoolLimits]:
    """The on-demand pool `general` with limits.unready 50%: its readiness, a lease store gated by
    it, and its limits."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"unready": "50%"})
    table = get_settings().state_table_name
    readiness = PoolReadiness(table, client("dynamodb"), client("ec2"))
    gated, _ = _stores(readiness)
    return readiness, gated, PoolLimits.model_validate({"unready": "50%"})


def test_a_lease_that_counted_before_another_lease_landed_is_decided_again(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"unready": 0})
    limits = PoolLimits.model_validate({"unready": 0})
    settings = get_settings()

    class Racing(PoolReadiness):
        """Another worker's lease lands between this gate's count and its transaction."""

        raced = False

        def reading(self, pool: str) -> tuple[Readiness, int | None]:
            counted = super().reading(pool)
            if not self.raced:
                self.raced = True
                reserve_room(other, pool, "other", EACH, 1, 1, limits, unleased=True)
            return counted

    gated, other = _stores(Racing(settings.state_table_name, client("dynamodb")))

    # Both counted 0 unready; only one lease may be taken while 0 are allowed
    with pytest.raises(UnreadyLimitReached, match=r"limits\.unready 0: 1 of its instances"):
        reserve_room(gated, "general", "mine", EACH, 1, 1, limits, unleased=True)

    assert other.lease("general", "other") is not None
    assert other.lease("general", "mine") is None


def test_the_sync_marks_members_running_with_status_checks_ok_and_forgets_gone_ones(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    readiness, gated, limits = _half_unready_pool(cloud, subnets, image)
    running = cloud.ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2)["Instances"]
    ids = sorted(i["InstanceId"] for i in running)
    # DescribeInstanceStatus, like DescribeInstances, knows fresh ids only after a while
    cloud.wait_out_consistency()
    assert reserve_room(gated, "general", "first", EACH, 2, 2, limits, unleased=True) == 2
    settle_lease(gated, "general", "first", dict.fromkeys(ids, EACH))
    assert readiness.count("general") == Readiness(unready=2, instances=2)

    # 2 unready of 2: more than 50% allows
    with pytest.raises(UnreadyLimitReached):
        reserve_room(gated, "general", "second", EACH, 1, 1, limits, unleased=True)
    assert readiness.mark_ready("general") == ids
    assert readiness.count("general") == Readiness(unready=0, instances=2)
    assert reserve_room(gated, "general", "second", EACH, 1, 1, limits, unleased=True) == 1

    # A released member's mark is forgotten; marking again marks nothing new
    members = PoolMemberStore(get_settings().state_table_name, client("dynamodb"), clock=time.time)
    member = members.member("general", ids[0])
    assert member is not None and members.uncount(member)
    assert readiness.mark_ready("general") == []
    assert readiness.count("general") == Readiness(unready=1, instances=2)  # the lease, a ready one


def test_a_dry_run_reports_the_unready_refusal_and_does_not_claim_the_pool_would_try(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    # Given a pool that allows 20% of its instances unready, with room in its cpu limit
    written = {"cpu": "1000", "unready": "20%"}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=written)
    adapters = cloud.adapters()
    context = Context(
        adapters.launch_ports(), clock=adapters.clock, max_attempts=4, sleep=adapters.pause
    )
    usage = Usage(adapters.pool_usage(), adapters.quota_usage(), adapters.pool_readiness())
    ask = LaunchRequest(requestId="preview-unready", nodePool="general", count=2)
    assert preview(context, ask, usage).would_launch

    # When two instances are leased and not yet ready (a live lease counts whole)
    gated, _ = _stores(adapters.pool_readiness())
    limits = PoolLimits.model_validate(written)
    assert reserve_room(gated, "general", "first", EACH, 2, 2, limits, unleased=True) == 2

    # Then the preview names the refusal the lease's gate would give, and would not launch
    answer = preview(context, ask, usage)
    (pool,) = answer.pools
    assert pool.headroom is not None and pool.headroom.limits == 498
    refusal = pool.headroom.to_dict()["unreadyRefusal"]
    assert "limits.unready 20%: 2 of its instances" in refusal
    assert not pool.would_try and not answer.would_launch
    with pytest.raises(UnreadyLimitReached, match=re.escape(refusal)):
        reserve_room(gated, "general", "second", EACH, 2, 2, limits, unleased=True)


def test_a_pool_whose_members_are_all_marked_is_read_once_by_the_sync(
    cloud: Any, subnets: dict[str, str], image: str
) -> None:
    # Given a pool with limits.unready whose one member the sync marked ready
    readiness, gated, limits = _half_unready_pool(cloud, subnets, image)
    (running,) = cloud.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"]
    cloud.wait_out_consistency()
    assert reserve_room(gated, "general", "only", EACH, 1, 1, limits, unleased=True) == 1
    settle_lease(gated, "general", "only", {running["InstanceId"]: EACH})
    assert readiness.mark_ready("general") == [running["InstanceId"]]
    calls: list[str] = []
    for name in ("dynamodb", "ec2"):
        client(name).meta.events.register(
            "before-call.*.*", lambda model, **_: calls.append(model.name)
        )
    # When the sync looks again, nothing having changed
    assert readiness.mark_ready("general") == []
    # Then it read the pool's members and marks in one Query, and asked EC2 nothing (issue 38)
    assert calls == ["Query"]
    assert readiness.count("general") == Readiness(unready=0, instances=1)
