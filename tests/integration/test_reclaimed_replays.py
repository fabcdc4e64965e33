"""A replay's settle that finds its lease reclaimed (issue 34, the replay paths).

A redelivery that finishes its predecessor's intents where they were made, and then answers the
request elsewhere (`replay.afresh`: the pool refuses it now) or rejects it (`finish_rejected`:
its intake does), settles the request's lease there to what the intents launched. Between its
read of that lease and its settle the lease expires, the sync reclaims it (giving its room
back), and another request leases part of that room. The settle then takes a lease for the
instances again, as a new request's is (at least the gang's minCount), and terminates what that
lease does not hold, saying so (`LeaseReclaimedOverLimit`); the request then asks elsewhere for
what survived, not for what was launched. Before the fix the replay settled them without the
minCount (a gang kept part of itself), dropped the words of what it terminated, and counted
the terminated instances as launched (a request Fulfilled with fewer instances)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_expired_lease_overrun import past_the_lease
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_pool_fallback_leases import general_dry
from tests.integration.test_rejected_replays_finish_first import (
    LAUNCHED,
    first_delivery,
    general_has_room_again,
    spare_refuses,
)
from tests.integration.test_replays_finish_first import pools_of, redelivered
from tests.support.cloud import Cloud, instance_type, launch_request

POOL = "general"
SPARE = "spare"


@contextmanager
def reclaimed_before_its_settle(
    monkeypatch: pytest.MonkeyPatch, cloud: Cloud, meanwhile: Callable[[], Any], pool: str = POOL
) -> Iterator[None]:
    """The first settle of `moved-on`'s lease in `pool` finds it reclaimed: just before it,
    the clock passes the lease, the sync's reclaim gives it back, and `meanwhile` runs (another
    request leases the room)."""
    fired: list[bool] = []
    real, where = PoolLeaseStore.taken, pool

    def taken(self: PoolLeaseStore, pool: str, lease_id: str) -> Any:
        if not fired and lease_id == "moved-on" and pool == where:
            fired.append(True)
            past_the_lease()
            store = cloud.adapters().pool_leases()
            lease = store.lease(where, "moved-on")
            assert lease is not None and store.reclaim(lease), lease
            meanwhile()
        return real(self, pool, lease_id)

    with monkeypatch.context() as patch:
        patch.setattr(PoolLeaseStore, "taken", taken)
        yield
    assert fired, f"the replay settled no lease in {pool}"


def another_takes_one(cloud: Cloud, pool: str = POOL) -> Callable[[], None]:
    def meanwhile() -> None:
        other = launch_request("other", count=1, nodePool=pool)
        cloud.send(other, batch=cloud.fresh_batch())

    return meanwhile


def moved_on_running(cloud: Cloud) -> dict[str, str]:
    """`moved-on`'s live instances, and the pool each runs in."""
    mine = {
        i["InstanceId"]
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": "capacity-launcher:request-id", "Value": "moved-on"} in i.get("Tags", [])
    }
    return {i: pool for i, pool in pools_of(cloud).items() if i in mine}


def running_in(cloud: Cloud, pool: str) -> list[str]:
    return [
        i["InstanceId"]
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": "capacity-launcher:node-pool", "Value": pool} in i.get("Tags", [])
    ]


def test_a_rejected_gangs_reclaimed_lease_keeps_all_or_nothing(cloud, subnets, image, monkeypatch):
    # Given a gang of 2 (minCount 2) naming `general` (room for 2), whose worker had EC2 launch
    # both and died; and `general` applied again allowing c5.large only (the gang asks m5.large:
    # its intake rejects it now)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    fields = {"nodePool": POOL, "count": 2, "minCount": 2}
    request = first_delivery(
        cloud, monkeypatch, LAUNCHED, **fields, requirements=[instance_type("m5.large")]
    )
    assert len(moved_on_running(cloud)) == 2
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=("c5.large",),
        limits={"instances": "2"},
    )
    # When it is delivered again, and its lease is reclaimed before the replay settles it, and
    # another request takes one of the two instances' room
    with reclaimed_before_its_settle(monkeypatch, cloud, another_takes_one(cloud)):
        redelivered(cloud, request)
    # Then the gang keeps none (the room left holds 1, fewer than its minCount), and says why
    record = cloud.record("moved-on")
    assert record is not None and record.launched == 0, record.to_detail()
    assert record.status is not RequestStatus.FULFILLED, record.to_detail()
    codes = [e.code for e in record.errors]
    assert codes == ["RequirementsConflict", "LeaseReclaimedOverLimit"], record.to_detail()
    assert moved_on_running(cloud) == {}, record.to_detail()
    running = running_in(cloud, POOL)
    assert len(running) == 1, running
    other = cloud.record("other")
    assert other is not None and other.launched == 1, other.to_detail()


def test_a_replay_served_afresh_asks_elsewhere_for_what_its_reclaimed_lease_lost(
    cloud, subnets, image, monkeypatch
):
    # Given `general` (m5.large) and `spare` (c5.large, room for 2), and a request for 2 naming
    # no pool, passed over by `general` (dry) to `spare`, whose worker had EC2 launch both there
    # and died
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    setup_pool(
        cloud,
        subnets,
        image,
        capacity_types=("on-demand",),
        types=("c5.large",),
        pool=SPARE,
        klass="other",
        limits={"instances": "2"},
    )
    general_dry(cloud)
    request = first_delivery(cloud, monkeypatch, LAUNCHED, count=2, tags={"team": "b"})
    assert sorted(moved_on_running(cloud).values()) == [SPARE, SPARE]
    # And `spare` refusing it since (its NodeClass sets the request's tag to another value),
    # `general` having room again
    spare_refuses(cloud, subnets, image, "tag conflict")
    general_has_room_again(cloud)
    # When it is delivered again, and its lease in `spare` is reclaimed before the replay settles
    # it there, and another request takes one of the two instances' room
    with reclaimed_before_its_settle(monkeypatch, cloud, another_takes_one(cloud, SPARE), SPARE):
        redelivered(cloud, request)
    # Then `spare` keeps one of its instances (the room left), terminates the other, and the
    # request asks `general` for the one it lost: it runs the 2 it asked for, and says why
    record = cloud.record("moved-on")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert "LeaseReclaimedOverLimit" in [e.code for e in record.errors], record.to_detail()
    running = moved_on_running(cloud)
    assert sorted(running.values()) == [POOL, SPARE], (running, record.to_detail())
    assert len(running_in(cloud, SPARE)) == 2
