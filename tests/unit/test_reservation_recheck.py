"""ReservationProvider's own look at EC2 when the sync's coverage reaches no active reservation:
bounded per selection, and given up for the sync's snapshots once the sync has looked since."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.capacity.reservation_state import Coverage, StoredReservation
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot, selector_key
from capacity_launcher.service.reservations import (
    COVERAGE_KEPT_SECONDS,
    RECHECK_SECONDS,
    ReservationProvider,
)
from tests.support.cloud import node_class

TERM = {"tags": {"team": "ml"}}
KEY = selector_key(CapacityReservationSelectorTerm.model_validate(TERM))


def ml(reservation_id: str, state: str = "active") -> ReservationSnapshot:
    return ReservationSnapshot(
        reservation_id, "m5.large", "us-east-1a", state, 2, 2, tags={"team": "ml"}
    )


class Store:
    """Coverage and snapshots as the sync left them."""

    def __init__(self) -> None:
        self.coverage_items: dict[str, Coverage] = {}
        self.stored: dict[str, StoredReservation] = {}
        self.caught_up: list[tuple[str, int, int, int]] = []

    def coverage(self, keys: Any) -> dict[str, Coverage]:
        return {k: self.coverage_items[k] for k in keys if k in self.coverage_items}

    def snapshots(self, ids: Any) -> tuple[dict[str, StoredReservation], set[str]]:
        return {i: self.stored[i] for i in ids if i in self.stored}, set()

    def coverage_with(
        self, keys: Any, ids: Any
    ) -> tuple[dict[str, Coverage], dict[str, StoredReservation], set[str]]:
        return self.coverage(keys), *self.snapshots(ids)

    def get(self, reservation_id: str) -> StoredReservation | None:
        return self.stored.get(reservation_id)

    def take(self, reservation_id: str, count: int) -> bool:
        held = self.stored[reservation_id]
        left = replace(held.snapshot, available=held.snapshot.available - count)
        self.stored[reservation_id] = replace(held, snapshot=left, version=held.version + 1)
        return True

    def take_claimable(self, reservation_id: str, count: int) -> bool:
        """As the adapter's: the whole count of one not exhausted with that many available."""
        held = self.stored.get(reservation_id)
        if held is None or held.snapshot.claimable(count) < count:
            return False
        return self.take(reservation_id, count)

    def catch_up(
        self, reservation_id: str, available: int, total: int, *, expected_version: int
    ) -> bool:
        self.caught_up.append((reservation_id, available, total, expected_version))
        held = self.stored[reservation_id]
        if held.version != expected_version:
            return False
        seen = replace(held.snapshot, available=available, total=total)
        self.stored[reservation_id] = replace(held, snapshot=seen, version=held.version + 1)
        return True


class Ec2:
    """EC2 now: what a selector term matches, and how often it was asked."""

    def __init__(self) -> None:
        self.reservations: list[ReservationSnapshot] = []
        self.looks = 0

    def matching(self, term: CapacityReservationSelectorTerm) -> list[ReservationSnapshot]:
        self.looks += 1
        return list(self.reservations)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def setup(synced_at: float = 1000.0) -> tuple[Store, Ec2, Clock, ReservationProvider, NodeClass]:
    store, ec2, clock = Store(), Ec2(), Clock(synced_at + 5)
    store.coverage_items[KEY] = Coverage(KEY, synced_at)  # the sync matched nothing
    provider = ReservationProvider(store, ec2, clock=clock)  # type: ignore[arg-type]
    document = node_class("ml", ["subnet-1"], "ami-1", capacityReservationSelectorTerms=[TERM])
    parsed = parse_document(document)
    assert isinstance(parsed, NodeClass)
    return store, ec2, clock, provider, parsed


def reached(provider: ReservationProvider, nc: NodeClass) -> list[str]:
    return [r.reservation_id for s in provider.sources(nc) for r in s.reservations]


def test_a_reservation_ec2_has_since_the_sync_is_found_with_one_look_for_many_requests() -> None:
    _, ec2, clock, provider, nc = setup()
    ec2.reservations = [ml("cr-new")]
    for _ in range(5):
        assert reached(provider, nc) == ["cr-new"]
        clock.now += 1
    assert ec2.looks == 1
    assert provider.as_of(nc) == 1005.0  # the look, newer than the sync


def test_it_looks_again_only_after_the_recheck_interval() -> None:
    _, ec2, clock, provider, nc = setup()
    assert reached(provider, nc) == []
    clock.now += RECHECK_SECONDS - 1
    assert reached(provider, nc) == [] and ec2.looks == 1
    ec2.reservations = [ml("cr-later")]
    clock.now += 1
    assert reached(provider, nc) == ["cr-later"] and ec2.looks == 2


def test_once_the_sync_has_looked_since_its_snapshots_win_until_the_interval_passes() -> None:
    store, ec2, clock, provider, nc = setup()
    ec2.reservations = [ml("cr-gone")]
    assert reached(provider, nc) == ["cr-gone"]
    # The sync runs after the look and finds it no longer active (it expired)
    store.coverage_items[KEY] = Coverage(KEY, clock.now + 1)
    clock.now += 2
    assert reached(provider, nc) == [] and ec2.looks == 1
    assert provider.as_of(nc) == clock.now - 1


def test_an_active_reservation_in_the_snapshots_never_makes_a_look() -> None:
    store, ec2, _, provider, nc = setup()
    store.coverage_items[KEY] = Coverage(
        KEY, 1000.0, ("cr-1",), {"cr-1": ("m5.large", "us-east-1a")}
    )
    store.stored["cr-1"] = StoredReservation(ml("cr-1"))
    assert reached(provider, nc) == ["cr-1"] and ec2.looks == 0


def full_as_synced(store: Store, *, exhausted: bool = False) -> None:
    """cr-1, which the sync saw with no room (version 7 since: launchers wrote to it)."""
    store.coverage_items[KEY] = Coverage(
        KEY, 1000.0, ("cr-1",), {"cr-1": ("m5.large", "us-east-1a")}
    )
    full = replace(ml("cr-1"), total=1, available=0, exhausted=exhausted)
    store.stored["cr-1"] = StoredReservation(full, version=7)


def test_room_a_look_finds_in_a_full_reservation_is_written_by_the_claim_that_uses_it() -> None:
    # Given cr-1 full in its snapshot, and grown in EC2 since the sync (3 instances, 2 free)
    store, ec2, clock, provider, nc = setup()
    full_as_synced(store)
    ec2.reservations = [replace(ml("cr-1"), total=3, available=2)]
    # When requests find no room in the snapshots, within one recheck interval, and then one
    # claims its slots
    for _ in range(3):
        assert [r.available for s in provider.sources(nc) for r in s.reservations] == [2]
        clock.now += 1
    assert store.caught_up == []  # nothing written by a look alone (a dry run)
    # Then the claim first wrote the one look's counts against the version read before it
    assert provider.claim("cr-1", 2) == 2
    assert ec2.looks == 1
    assert store.caught_up == [("cr-1", 2, 3, 7)]
    assert store.stored["cr-1"].snapshot.available == 0
    # and a later claim writes nothing more
    assert provider.claim("cr-1", 1) == 0 and len(store.caught_up) == 1


def test_a_look_never_writes_room_over_an_exhausted_flag() -> None:
    store, ec2, _, provider, nc = setup()
    full_as_synced(store, exhausted=True)
    ec2.reservations = [replace(ml("cr-1"), total=3, available=2)]
    assert [r.exhausted for s in provider.sources(nc) for r in s.reservations] == [True]
    assert provider.claim("cr-1", 1) == 0
    assert ec2.looks == 1 and store.caught_up == []


class CountingStore(Store):
    """Store, counting the reads a launch makes: coverage alone, snapshots alone, or both."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def coverage(self, keys: Any) -> dict[str, Coverage]:
        self.reads.append("coverage")
        return super().coverage(keys)

    def snapshots(self, ids: Any) -> tuple[dict[str, StoredReservation], set[str]]:
        self.reads.append("snapshots")
        return super().snapshots(ids)

    def coverage_with(
        self, keys: Any, ids: Any
    ) -> tuple[dict[str, Coverage], dict[str, StoredReservation], set[str]]:
        self.reads.append("both")
        return super().coverage(keys), *super().snapshots(ids)


def synced_room(store: Store, room: dict[str, int], synced_at: float = 1000.0) -> None:
    """The sync's coverage of cr-1 to cr-6 with `room` seen in each; each snapshot as room."""
    members = tuple(sorted(room))
    placements = dict.fromkeys(members, ("m5.large", "us-east-1a"))
    store.coverage_items[KEY] = Coverage(KEY, synced_at, members, placements, room)
    for member, free in room.items():
        store.stored[member] = StoredReservation(replace(ml(member), total=4, available=free))


def test_a_steady_launch_reads_its_coverage_and_first_snapshots_in_one_call() -> None:
    # Given six reservations the sync saw with room, cr-1 to cr-4 the most
    store, _, clock, _, nc = setup()
    counting = CountingStore()
    counting.coverage_items, counting.stored = store.coverage_items, store.stored
    provider = ReservationProvider(counting, Ec2(), clock=clock)  # type: ignore[arg-type]
    synced_room(counting, {"cr-1": 4, "cr-2": 4, "cr-3": 4, "cr-4": 4, "cr-5": 1, "cr-6": 1})

    def launch_reads() -> list[str]:
        counting.reads.clear()
        provider.sources(nc, enough_room=lambda found: bool(found), most_room_first=True)
        return list(counting.reads)

    # When a fresh container launches, then launches again
    assert launch_reads() == ["coverage", "snapshots"]
    clock.now += 1
    # Then the second reads its coverage and the snapshots it names first in one call
    assert launch_reads() == ["both"]
    assert sorted(reached_first(provider, nc)) == ["cr-1", "cr-2", "cr-3", "cr-4"]
    # And when the sync sees the room elsewhere since, what the coverage read now names is read
    # again (the snapshots read with it were the kept coverage's guess)
    clock.now += 1
    synced_room(counting, {"cr-1": 0, "cr-2": 0, "cr-3": 1, "cr-4": 1, "cr-5": 4, "cr-6": 4})
    assert launch_reads() == ["both", "snapshots"]
    clock.now += COVERAGE_KEPT_SECONDS  # and a guess kept too long is not read at all
    assert launch_reads() == ["coverage", "snapshots"]


def reached_first(provider: ReservationProvider, nc: NodeClass) -> list[str]:
    found = provider.sources(nc, enough_room=lambda s: bool(s), most_room_first=True)
    return [r.reservation_id for s in found for r in s.reservations]
