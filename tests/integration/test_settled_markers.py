"""Issue 14: a settled lease's proof lives outside the pool's live key range.

A settle deletes the open `Lease#` item and puts `Settled#<id>` in one transaction, so the
recounts (which read only leases and members) never read history. Old-format markers (`Lease#`
marked `settled`), which deployed tables keep for up to a week, are still honoured.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from capacity_launcher.adapters import aws, quota_usage
from capacity_launcher.adapters.pool_items import SETTLED_MARKER_SECONDS
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.adapters.quota_usage_store import QuotaUsageStore
from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.errors import LeaseReclaimed
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.service.lease_settlement import settle as settle_lease
from capacity_launcher.service.usage_recount import recount_pool, recount_quotas
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.leases import reserve_room, take

ONE = Resources(cpu=2, memory_mib=8192, instances=1)
POOL = "general"


@pytest.fixture(autouse=True)
def stored_pool(cloud, subnets, image) -> None:
    """A lease is only ever taken in a stored pool (a deleted one has no room)."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), pool=POOL)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def store(clock: Clock | None = None) -> PoolLeaseStore:
    return PoolLeaseStore(get_settings().state_table_name, 900, clock=clock or time.time)


def leased_again(limits: PoolLeaseStore, lease_id: str, launched: dict[str, Resources]) -> None:
    """A settle that finds its lease reclaimed counts nothing and says so; its caller takes a
    lease for the instances again (as a new request's: `settle.settle_lease`) and settles it."""
    with pytest.raises(LeaseReclaimed):
        settle_lease(limits, POOL, lease_id, launched)
    assert reserve_room(limits, POOL, lease_id, ONE, len(launched), len(launched), None) == len(
        launched
    )
    settle_lease(limits, POOL, lease_id, launched)


def member_store() -> PoolMemberStore:
    return PoolMemberStore(get_settings().state_table_name, clock=time.time)


def usage_store() -> PoolUsageStore:
    return PoolUsageStore(get_settings().state_table_name)


def quota_store() -> QuotaUsageStore:
    return QuotaUsageStore(get_settings().state_table_name)


def item(sk: str) -> dict[str, Any] | None:
    return (
        aws.client("dynamodb")
        .get_item(
            TableName=get_settings().state_table_name,
            Key={"pk": {"S": f"Limits#{POOL}"}, "sk": {"S": sk}},
            ConsistentRead=True,
        )
        .get("Item")
    )


def instances(n: int, first: int = 0) -> dict[str, Resources]:
    return {f"i-{k:017x}": ONE for k in range(first, first + n)}


def old_format_marker(lease_id: str, count: int) -> None:
    """What a settle wrote before the marker moved: the lease item, marked settled, with a TTL."""
    aws.client("dynamodb").put_item(
        TableName=get_settings().state_table_name,
        Item={
            "pk": {"S": f"Limits#{POOL}"},
            "sk": {"S": f"Lease#{lease_id}"},
            "count": {"N": str(count)},
            "instances": {"N": str(count)},
            "cpu": {"N": str(2 * count)},
            "memoryMiB": {"N": str(8192 * count)},
            "expiresAt": {"N": str(int(time.time()) - 3600)},
            "settled": {"BOOL": True},
            "ttl": {"N": str(int(time.time()) + SETTLED_MARKER_SECONDS)},
        },
    )


def query_sort_keys() -> list[str]:
    """Every state-table item a Query returns from now on (the recounts' reads)."""
    returned: list[str] = []

    def note(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            returned.extend(i["sk"]["S"] for i in parsed.get("Items", []))

    aws.client("dynamodb").meta.events.register("after-call.dynamodb.Query", note)
    return returned


def test_a_settle_replaces_the_open_lease_with_a_marker_outside_the_live_range(cloud):
    # Given an open lease of 2 in a pool with a quota-free requester
    limits = store()
    assert reserve_room(limits, POOL, "req-1", ONE, 2, 1, None) == 2
    assert item("Lease#req-1") is not None
    before = int(time.time())
    # When it settles into the 2 instances launched
    launched = instances(2)
    settle_lease(limits, POOL, "req-1", launched)
    # Then the open lease is gone, and its proof of settlement expires after a week
    assert item("Lease#req-1") is None
    marker = item("Settled#req-1")
    assert marker is not None and marker["count"] == {"N": "2"}
    assert before + SETTLED_MARKER_SECONDS <= int(marker["ttl"]["N"])
    assert int(marker["ttl"]["N"]) <= int(time.time()) + SETTLED_MARKER_SECONDS
    # And the lease reads as settled (a redelivery leases nothing more)
    assert limits.is_settled(POOL, "req-1")
    assert reserve_room(limits, POOL, "req-1", ONE, 2, 1, None) == 2
    assert item("Lease#req-1") is None
    assert limits.leases() == []
    # And a recount reads the members, never the marker
    read = query_sort_keys()
    recount = recount_pool(usage_store(), POOL)
    assert recount is not None and not recount.repaired
    assert recount.recomputed == ONE * 2 and usage_store().usage(POOL) == ONE * 2
    assert sorted(read) == sorted(f"Member#{i}" for i in launched)


def test_an_old_format_settled_lease_still_counts_as_settled(cloud):
    # Given a lease settled before the marker moved (a `Lease#` item marked settled, expired),
    # and one member of the pool
    clock = Clock()
    limits = store(clock)
    old_format_marker("old-1", 3)
    assert member_store().count(POOL, "i-00000000000000001", ONE)
    # When the launcher and the sync meet it
    lease = limits.lease(POOL, "old-1")
    # Then it is settled: nothing leases, cancels, reclaims or settles it again
    assert lease is not None and lease.settled
    assert limits.is_settled(POOL, "old-1")
    assert reserve_room(limits, POOL, "old-1", ONE, 3, 1, None) == 3
    assert not limits.cancel(POOL, "old-1")
    clock.now += 3600
    assert not limits.reclaim(Lease(POOL, "old-1", 3, ONE * 3, expires_at=0))
    settle_lease(limits, POOL, "old-1", instances(3, first=10))
    assert item("Settled#old-1") is None
    assert [m.instance_id for m in member_store().members(POOL)] == ["i-00000000000000001"]
    # And usage is the member's alone, which the recount (reading the old marker) agrees with
    recount = recount_pool(usage_store(), POOL)
    assert recount is not None and not recount.repaired and recount.recomputed == ONE
    assert usage_store().usage(POOL) == ONE


def test_a_lease_reclaimed_while_settling_is_settled_once_as_reclaimed(cloud, monkeypatch):
    # Given an expired lease of 2, whose settle reads it open
    clock = Clock()
    limits = store(clock)
    assert reserve_room(limits, POOL, "race-1", ONE, 2, 1, None) == 2
    clock.now += 901
    real = PoolLeaseStore.lease
    reclaimed: list[bool] = []

    def read_then_reclaimed(self: PoolLeaseStore, pool: str, lease_id: str) -> Lease | None:
        found = real(self, pool, lease_id)
        if found is not None and not found.settled and not reclaimed:
            # When the sync reclaims it between the settle's read and its transaction
            reclaimed.append(self.reclaim(found))
        return found

    monkeypatch.setattr(PoolLeaseStore, "lease", read_then_reclaimed)
    # (settled by another container: the one that took a lease settles it without reading it)
    # and its caller leases them again
    leased_again(store(clock), "race-1", instances(2))
    # Then the reclaim gave the lease back once, and usage is exactly the 2 members
    assert reclaimed == [True]
    assert usage_store().usage(POOL) == ONE * 2
    assert len(member_store().members(POOL)) == 2
    assert limits.is_settled(POOL, "race-1") and item("Lease#race-1") is None


def test_a_lease_taken_again_while_a_reclaimed_one_settles_is_settled_not_leaked(
    cloud, monkeypatch
):
    # Given a lease reclaimed while its worker launched 1 instance
    clock = Clock()
    limits = store(clock)
    assert reserve_room(limits, POOL, "again-1", ONE, 2, 1, None) == 2
    clock.now += 901
    lease = limits.lease(POOL, "again-1")
    assert lease is not None and limits.reclaim(lease)
    real = PoolLeaseStore.lease
    taken: list[int] = []

    def read_then_leased(self: PoolLeaseStore, pool: str, lease_id: str) -> Lease | None:
        found = real(self, pool, lease_id)
        if found is None and not taken:
            # When a redelivery leases the same id between the settle's read and its transaction
            taken.append(0)
            taken[0] = reserve_room(self, POOL, "again-1", ONE, 2, 1, None)
        return found

    monkeypatch.setattr(PoolLeaseStore, "lease", read_then_leased)
    settling = store(clock)
    with pytest.raises(LeaseReclaimed):
        settle_lease(settling, POOL, "again-1", instances(1))
    # And its caller takes a lease for its instance again (finding the new one) and settles it
    found = take(settling, POOL, "again-1", ONE, 1, 1, None)
    assert found is not None and found.count == 2
    settle_lease(settling, POOL, "again-1", instances(1))
    # Then the settle met the new lease and settled it too: nothing of it stays in usage
    assert taken == [2]
    assert usage_store().usage(POOL) == ONE
    assert limits.leases() == [] and limits.is_settled(POOL, "again-1")


def test_the_container_that_took_a_lease_settles_it_without_reading_it(cloud):
    # Given a lease this container took, and a count of the reads of the lease items
    limits = store()
    assert reserve_room(limits, POOL, "mine-1", ONE, 2, 1, None, unleased=True) == 2
    reads: list[str] = []
    aws.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", lambda params, **_: reads.append("read")
    )
    # When it settles it
    settle_lease(limits, POOL, "mine-1", instances(2))
    # Then it read nothing back, and the lease is settled into its two members
    assert reads == []
    assert usage_store().usage(POOL) == ONE * 2
    assert limits.is_settled(POOL, "mine-1") and item("Lease#mine-1") is None


def test_a_lease_reclaimed_after_its_container_took_it_is_settled_once_as_reclaimed(cloud):
    # Given a lease this container took, reclaimed by the sync once it expired
    clock = Clock()
    limits = store(clock)
    assert reserve_room(limits, POOL, "stale-1", ONE, 2, 1, None) == 2
    clock.now += 901
    sync = store(clock)
    lease = sync.lease(POOL, "stale-1")
    assert lease is not None and sync.reclaim(lease)
    # When the container settles it from what it took, and leases its instance again
    leased_again(limits, "stale-1", instances(1))
    # Then the settle found it gone and counted the instance afresh, once
    assert usage_store().usage(POOL) == ONE
    assert limits.leases() == [] and limits.is_settled(POOL, "stale-1")


def test_two_settles_of_one_lease_count_its_instances_once(cloud, monkeypatch):
    # Given an open lease of 2, settled by two deliveries at once
    limits = store()
    assert reserve_room(limits, POOL, "twice-1", ONE, 2, 1, None) == 2
    launched = instances(2)
    real = PoolLeaseStore.lease
    other: list[bool] = []

    def read_then_settled_by_other(self: PoolLeaseStore, pool: str, lease_id: str) -> Lease | None:
        found = real(self, pool, lease_id)
        if not other:
            other.append(True)
            # When the other delivery settles between this one's read and its transaction
            settle_lease(self, pool, lease_id, launched)
        return found

    monkeypatch.setattr(PoolLeaseStore, "lease", read_then_settled_by_other)
    settle_lease(store(), POOL, "twice-1", launched)
    # Then the instances are counted once and one marker proves the settlement
    assert usage_store().usage(POOL) == ONE * 2
    assert len(member_store().members(POOL)) == 2
    assert item("Settled#twice-1") is not None and item("Lease#twice-1") is None


def put_member(instance_id: str, usage_item: str, requester: str) -> None:
    aws.client("dynamodb").put_item(
        TableName=get_settings().state_table_name,
        Item={
            "pk": {"S": f"Limits#{POOL}"},
            "sk": {"S": f"Member#{instance_id}"},
            "instances": {"N": "1"},
            "countedAt": {"N": str(int(time.time()))},
            "quotaUsage": {"S": usage_item},
            "requester": {"S": requester},
        },
    )


def test_one_read_of_a_pools_leases_and_members_recounts_each_of_its_quota_items(cloud):
    # Given two cohorts' quota usage items on one pool, one written wrong, one never written,
    # a member holding each, and a week of settled leases (both formats) beside them
    limits = store()
    team_a, team_b = "QuotaUsage#research#general", "QuotaUsage#training#general"
    put_member("i-00000000000000001", team_a, "team-a")
    put_member("i-00000000000000002", team_b, "team-b")
    old_format_marker("old-2", 1)
    assert reserve_room(limits, POOL, "done-1", ONE, 1, 1, None) == 1
    settle_lease(limits, POOL, "done-1", {})
    aws.client("dynamodb").update_item(
        **quota_usage.update(get_settings().state_table_name, team_a, "team-a", ONE * 7)
    )
    read = query_sort_keys()
    # When the sync recounts them
    recounts = recount_quotas(quota_store(), POOL, [team_a, team_b])
    # Then one Query of the live range served both, and each holds its member alone
    assert sorted(read) == [
        "Lease#old-2",
        "Member#i-00000000000000001",
        "Member#i-00000000000000002",
    ]
    found = {pk: r for pk, r in recounts.items() if r is not None}
    assert sorted(found) == [team_a, team_b]
    assert all(r.repaired for r in found.values())
    assert quota_store().quota_usage(team_a, POOL) == {("team-a", POOL): Resources(instances=1)}
    assert quota_store().quota_usage(team_b, POOL) == {("team-b", POOL): Resources(instances=1)}
