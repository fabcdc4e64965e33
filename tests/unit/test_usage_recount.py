"""The recount loop (service/usage_recount.py) over an in-memory pool usage: it re-reads when a
writer moves the usage while the live range is read, writes conditioned on the version read,
and gives up (None) when writers keep moving it."""

from __future__ import annotations

import pytest

from capacity_launcher.domain.accounting.pool_usage import Lease, Member
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.service.usage_recount import RECOUNT_TRIES, recount_pool, recount_quotas

pytestmark = pytest.mark.unit

ONE = Resources(instances=1)


class Usage:
    """A pool's usage item; `moves` writers bump it while its live range is read."""

    def __init__(self, stored: Resources, members: int, moves: int = 0) -> None:
        self.stored, self.version = stored, 3
        self.members = [Member("general", f"i-{n}", ONE, 0) for n in range(members)]
        self.moves, self.writes = moves, []
        self.reads = 0

    def usage(self, pool: str) -> Resources:
        return self.stored

    def usage_version(self, pool: str) -> tuple[Resources, int | None]:
        self.reads += 1
        return self.stored, self.version

    def counted(self, pool: str) -> list[Lease | Member]:
        if self.moves:
            self.moves -= 1
            self.version += 1  # a lease or member written meanwhile
        return list(self.members)

    def replace_usage(self, pool: str, usage: Resources, version: int | None) -> bool:
        if version != self.version:
            return False
        self.writes.append((usage, version))
        self.stored, self.version = usage, self.version + 1
        return True


def test_a_drifted_usage_is_set_to_its_members_conditioned_on_the_version_read():
    usage = Usage(stored=ONE * 5, members=2)
    recount = recount_pool(usage, "general")
    assert recount is not None and recount.repaired
    assert (recount.stored, recount.recomputed) == (ONE * 5, ONE * 2)
    assert usage.writes == [(ONE * 2, 3)]
    assert [m.instance_id for m in recount.members] == ["i-0", "i-1"]


def test_a_usage_moved_while_the_live_range_was_read_is_read_again_never_overwritten():
    usage = Usage(stored=ONE * 5, members=2, moves=1)
    recount = recount_pool(usage, "general")
    assert recount is not None and recount.repaired
    assert usage.writes == [(ONE * 2, 4)]  # the version of the second read


def test_writers_that_keep_moving_it_make_the_recount_give_up_to_the_next_sync():
    usage = Usage(stored=ONE * 5, members=2, moves=RECOUNT_TRIES)
    assert recount_pool(usage, "general") is None
    assert usage.writes == []


def test_a_usage_that_matches_its_members_is_not_written():
    usage = Usage(stored=ONE * 2, members=2)
    recount = recount_pool(usage, "general")
    assert recount is not None and not recount.repaired and usage.writes == []


def test_a_usage_that_matches_its_members_is_read_once():
    # issue 38: the quiet minute's recount reads the item and the live range, nothing more
    usage = Usage(stored=ONE * 2, members=2)
    assert recount_pool(usage, "general") is not None
    assert usage.reads == 1
    # and one that differs reads its version again before it writes
    drifted = Usage(stored=ONE * 5, members=2)
    assert recount_pool(drifted, "general") is not None
    assert drifted.reads == 2


class QuotaItems:
    """One quota usage item of the pool, held by two members of team-a; `stored` as written."""

    def __init__(self, stored: Resources) -> None:
        self.stored, self.version, self.reads, self.writes = stored, 7, 0, []
        self.members = [Member("general", f"i-{n}", ONE, 0, "QU#c", "team-a") for n in range(2)]

    def quota_reading(
        self, pk: str, pool: str
    ) -> tuple[int | None, dict[tuple[str, str], Resources]]:
        self.reads += 1
        return self.version, {("team-a", pool): self.stored}

    def counted(self, pool: str) -> list[Lease | Member]:
        return list(self.members)

    def replace_quota_usage(self, pk: str, usage: object, version: int | None) -> bool:
        self.writes.append((usage, version))
        return version == self.version


def test_a_quota_usage_item_that_matches_its_members_is_read_once():
    # issue 38: as the pool's usage, the quiet minute's case reads the item once
    agreeing = QuotaItems(ONE * 2)
    (recount,) = recount_quotas(agreeing, "general", ["QU#c"]).values()
    assert recount is not None and not recount.repaired
    assert (agreeing.reads, agreeing.writes) == (1, [])
    # and one that differs reads its version again, then writes conditioned on it
    drifted = QuotaItems(ONE * 5)
    (recount,) = recount_quotas(drifted, "general", ["QU#c"]).values()
    assert recount is not None and recount.repaired
    assert drifted.reads == 2
    assert drifted.writes == [({("team-a", "general"): ONE * 2}, 7)]
