"""Issue 34, item 4: a CapacityQuota apply that changes nothing bumps no generation, and a lease
conditions only on the quotas that can decide it (those naming its pool): a GitOps loop
re-applying its quotas, or a change to another pool's quota, costs no launcher a retry, while a
lease decided on an older copy of its own pool's quotas still fails its transaction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.quota_store import QuotaStore
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.errors import NotFound, QuotaExceeded, Transient
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from local_cloud.documents import capacity_quota
from tests.integration.test_quota_admission import ONE, POOL, SPARE, pool, spare_below
from tests.support.cloud import Cloud
from tests.support.leases import reserve_room

__all__ = ["pool"]  # the fixture


def generations() -> tuple[int | None, int | None, int | None]:
    """The quota-set version and the quota generations of general and spare, as stored."""
    stored = ConfigStore(get_settings().state_table_name, clock=system_clock).quota_set(fresh=True)
    return stored.generation, stored.generation_in(POOL), stored.generation_in(SPARE)


def team(name: str, pool_name: str, nominal: str) -> dict[str, Any]:
    return capacity_quota(name, pool_name, {"instances": nominal}, cohort=name)


def naming_120_pools() -> tuple[list[str], dict[str, Any]]:
    """team-a's quota naming 120 pools (two groups of 60): more than one transaction's 100
    items; the pools' names and the document."""
    names = [f"pool-{i:03}" for i in range(120)]

    def flavor(name: str, resource: str) -> dict[str, Any]:
        return {"name": name, "resources": [{"name": resource, "nominalQuota": "1"}]}

    document = team("team-a", POOL, "1")
    document["spec"]["resourceGroups"] = [
        {
            "coveredResources": ["instances"],
            "flavors": [flavor(n, "instances") for n in names[:60]],
        },
        {"coveredResources": ["cpu"], "flavors": [flavor(n, "cpu") for n in names[60:]]},
    ]
    return names, document


def warm_store() -> tuple[ConfigStore, PoolLeaseStore]:
    """A launcher's stores whose copy of the quotas is read now and kept 10 minutes."""
    table = get_settings().state_table_name
    quotas = ConfigStore(table, cache_seconds=600, clock=system_clock)
    quotas.quota_set()
    return quotas, PoolLeaseStore(table, 900, quotas=quotas, clock=time.time)


@pytest.fixture
def refreshes(monkeypatch: pytest.MonkeyPatch) -> list[QuotaSet]:
    """The quota sets leases read again after their transaction failed on the generation."""
    found: list[QuotaSet] = []
    real = PoolLeaseStore.quota_set

    def noted(self: PoolLeaseStore, *, fresh: bool = False) -> QuotaSet:
        read = real(self, fresh=fresh)
        if fresh:
            found.append(read)
        return read

    monkeypatch.setattr(PoolLeaseStore, "quota_set", noted)
    return found


def test_a_quota_applied_again_unchanged_bumps_no_generation(pool: Cloud) -> None:
    # Given team-a's quota in general
    spare_below(pool)
    pool.apply(team("team-a", POOL, "4"))
    before = generations()
    # When a GitOps loop applies it again, unchanged, twice
    pool.apply(team("team-a", POOL, "4"))
    pool.apply(team("team-a", POOL, "4"))
    # Then no generation moved
    assert generations() == before
    # but a change bumps the quota-set version and general's, not spare's
    pool.apply(team("team-a", POOL, "5"))
    version, general, spare = before
    assert version is not None and general is not None
    assert generations() == (version + 1, general + 1, spare)


def test_a_quota_moved_to_another_pool_bumps_both_pools(pool: Cloud) -> None:
    spare_below(pool)
    pool.apply(team("team-a", POOL, "4"))
    version, general, spare = generations()
    assert version is not None and general is not None and spare is not None
    # When it names spare instead of general
    pool.apply(team("team-a", SPARE, "4"))
    # Then both pools' leases are decided again: general's lost it, spare's gained it
    assert generations() == (version + 1, general + 1, spare + 1)
    # and deleting it bumps spare's alone
    pool.delete("CapacityQuota", "team-a")
    assert generations() == (version + 2, general + 1, spare + 2)


def test_a_lease_in_a_pool_the_changed_quota_does_not_name_is_not_raced(
    pool: Cloud, refreshes: list[QuotaSet]
) -> None:
    # Given team-b's quota in general, and a launcher that has read the quotas
    spare_below(pool)
    pool.apply(team("team-b", POOL, "4"))
    _, leases = warm_store()
    # When team-b's quota is changed, and a lease is taken in spare, which no quota names
    pool.apply(team("team-b", POOL, "5"))
    assert reserve_room(leases, SPARE, "lease-free", ONE, 1, 1, None, "team-z") == 1
    # Then its transaction did not fail on the quotas (nothing read again)
    assert refreshes == []
    # Given team-a's quota in spare, seen by the launcher
    pool.apply(team("team-a", SPARE, "4"))
    _, leases = warm_store()
    # When team-b's quota changes again, and team-a leases in spare
    pool.apply(team("team-b", POOL, "6"))
    assert reserve_room(leases, SPARE, "lease-a", ONE, 2, 2, None, "team-a") == 2
    # Then neither did its transaction
    assert refreshes == []


@pytest.mark.parametrize(
    "changed_to",
    [
        pytest.param(POOL, id="its-pools-quota-lowered"),
        pytest.param(SPARE, id="a-quota-starts-naming-its-pool"),
    ],
)
def test_a_lease_decided_on_an_older_copy_of_its_pools_quotas_still_fails(
    pool: Cloud, refreshes: list[QuotaSet], changed_to: str
) -> None:
    # Given team-a's quota of 4 in general (none in spare), seen by a launcher
    spare_below(pool)
    pool.apply(team("team-a", POOL, "4"))
    _, leases = warm_store()
    # When the quota becomes 1 in `changed_to`, and team-a asks the launcher for a gang of 2 there
    pool.apply(team("team-a", changed_to, "1"))
    # Then the old copy's decision does not hold: read again, the new quota refuses it
    with pytest.raises(QuotaExceeded):
        reserve_room(leases, changed_to, "lease-gang", ONE, 2, 2, None, "team-a")
    assert len(refreshes) == 1
    assert leases.lease(changed_to, "lease-gang") is None


def test_a_quota_naming_more_pools_than_a_transaction_holds_bumps_every_one(pool: Cloud) -> None:
    # Given a quota naming 120 pools (two groups of 60), more than one transaction's 100 items
    names, document = naming_120_pools()
    pool.apply(document)
    # Then every pool it names has its generation bumped, the last as the first
    stored = ConfigStore(get_settings().state_table_name, clock=system_clock).quota_set(fresh=True)
    assert {stored.generation_in(n) for n in names} == {1}
    # and so does its delete
    pool.delete("CapacityQuota", "team-a")
    stored = ConfigStore(get_settings().state_table_name, clock=system_clock).quota_set(fresh=True)
    assert {stored.generation_in(n) for n in names} == {2}


@contextmanager
def cut_after_the_first_transaction(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The quota write in this block fails after its first transaction (the document and the
    bumps beside it written, the later pools' bumps not): the block expects that failure."""
    real = QuotaStore._write_with_pool_bumps

    def cut(self: QuotaStore, writes: Any, pools: list[str]) -> None:
        room = 100 - len(writes)
        real(self, writes, pools[:room])
        if len(pools) > room:
            raise Transient("TransactWriteItems", "InternalServerError")

    with monkeypatch.context() as patch:
        patch.setattr(QuotaStore, "_write_with_pool_bumps", cut)
        with pytest.raises(Transient):
            yield


def test_a_quota_whose_later_bumps_failed_is_bumped_by_its_next_apply(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quota naming 120 pools (more than one transaction holds), whose apply fails after
    # its first transaction (the document and the first pools' bumps written)
    names, document = naming_120_pools()
    with cut_after_the_first_transaction(monkeypatch):
        pool.apply(document)
    # When the operator applies it again, as the failed apply asked
    pool.apply(document)
    # Then every pool it names has had its generation bumped
    stored = ConfigStore(get_settings().state_table_name, clock=system_clock).quota_set(fresh=True)
    assert {stored.generation_in(n) for n in names} == {1}


def test_a_quota_whose_delete_lost_its_later_bumps_is_finished_by_its_next_delete(
    pool: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a quota naming 120 pools, applied, whose delete fails after its first transaction
    # (the document deleted, the first pools' bumps written)
    names, document = naming_120_pools()
    pool.apply(document)
    with cut_after_the_first_transaction(monkeypatch):
        pool.delete("CapacityQuota", "team-a")
    # When the operator deletes it again, as the failed delete asked
    pool.delete("CapacityQuota", "team-a")
    # Then every pool it named has had its generation bumped once by the delete, and a third
    # delete finds nothing left to do
    stored = ConfigStore(get_settings().state_table_name, clock=system_clock).quota_set(fresh=True)
    assert {stored.generation_in(n) for n in names} == {2}
    with pytest.raises(NotFound):
        pool.delete("CapacityQuota", "team-a")
