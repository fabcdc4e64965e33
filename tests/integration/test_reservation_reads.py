"""A request reads the reservation snapshots it needs, not every one it could use (issue 38):
the sync's coverage item says the room it saw in each member, a launch reads the snapshots with
the most room first, a page at a time, until those read hold enough for it; what it decides and
claims on is still the snapshot read strongly consistent, so slots taken since the sync turn it
to the next page, never into a full reservation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.reservation_pages import FIRST_PAGE
from tests.integration.test_launch_into_reservations import available, reserve, setup_pool
from tests.integration.test_reservation_sync import snapshots, sync
from tests.support.cloud import Cloud, launch_request

ML = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
USABLE = 24


@contextmanager
def snapshot_reads() -> Iterator[list[str]]:
    """The reservation snapshots (sk `cr-…`) the service's BatchGetItem and GetItem ask for."""
    asked: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem":
            keys = [k for ask in params["RequestItems"].values() for k in ask["Keys"]]
        else:
            keys = [params["Key"]]
        asked.extend(
            k["sk"]["S"]
            for k in keys
            if k["pk"]["S"] == "Reservation" and k["sk"]["S"].startswith("cr-")
        )

    events = aws.client("dynamodb").meta.events
    for operation in ("BatchGetItem", "GetItem"):
        events.register(f"provide-client-params.dynamodb.{operation}", note, unique_id=operation)
    try:
        yield asked
    finally:
        for operation in ("BatchGetItem", "GetItem"):
            events.unregister(f"provide-client-params.dynamodb.{operation}", unique_id=operation)


def many_reservations(cloud: Cloud, subnets: dict[str, str], image: str) -> str:
    """A pool (reserved, then on-demand) selecting USABLE team=ml m5.large reservations of 2
    slots, and one of 5 among them (the most room), synced; the one of 5."""
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    for _ in range(USABLE // 2):
        reserve(cloud, 2, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    roomiest = reserve(cloud, 5, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    for _ in range(USABLE - USABLE // 2 - 1):
        reserve(cloud, 2, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    sync()
    return roomiest


def test_a_request_reads_a_page_of_snapshots_not_every_reservation_it_could_use(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool whose NodeClass selects 24 usable reservations, synced
    roomiest = many_reservations(cloud, subnets, image)
    # When a request for one instance comes
    with snapshot_reads() as asked:
        cloud.send(launch_request("r-one", nodePool="general", count=1))
    # Then it launched into the reservation with the most room (the rule is unchanged)
    record = cloud.record("r-one")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [roomiest]
    # And it read the first page of snapshots, the most room first, and the one it claimed
    # (its claim reads it again): not the 24 it could use (it read every one before)
    assert len(set(asked)) <= FIRST_PAGE, sorted(set(asked))
    assert roomiest in asked


def take_from_the_first_page(slots: int | None = None) -> list[str]:
    """Other launchers take `slots` (None: every slot) of each reservation the sync saw with the
    most room (the first page a request reads), before the next sync; their ids."""
    store = snapshots()
    stored = sorted(store.list(), key=lambda s: (-s.snapshot.available, s.snapshot.reservation_id))
    for held in stored[:FIRST_PAGE]:
        taken = held.snapshot.available if slots is None else slots
        assert store.take(held.snapshot.reservation_id, taken)
    return [s.snapshot.reservation_id for s in stored[:FIRST_PAGE]]


def launched_into_reservations(cloud: Cloud, request_id: str, count: int) -> list[str]:
    """The reservations the request's `count` instances launched into (all of them reserved),
    each snapshot holding no fewer slots than EC2 has left (nothing placed twice)."""
    record = cloud.record(request_id)
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    used = [i.capacity_reservation_id for i in record.instances]
    assert len(used) == count and all(used), record.to_detail()
    for reservation_id in {u for u in used if u}:
        held = snapshots().get(reservation_id)
        assert held is not None and 0 <= held.snapshot.available <= available(cloud, reservation_id)
    return [u for u in used if u]


def test_slots_taken_since_the_sync_turn_the_request_to_the_next_page(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given 24 usable reservations, synced; then other launchers take every slot of the ones the
    # sync saw with the most room (the first page), before the next sync
    many_reservations(cloud, subnets, image)
    drained = take_from_the_first_page()
    # When a request for three instances comes
    with snapshot_reads() as asked:
        cloud.send(launch_request("r-three", nodePool="general", count=3))
    # Then it launched into reservations (not on-demand), none of them the drained ones: the
    # snapshots it decides on are read as they stand, and the claims are conditioned on them
    used = launched_into_reservations(cloud, "r-three", 3)
    assert not set(used) & set(drained), (used, drained)
    # And it read the next page, not every reservation
    assert len(set(asked)) <= FIRST_PAGE * 3, sorted(set(asked))


def test_a_request_larger_than_a_page_holds_reads_pages_until_they_hold_it(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given 24 usable reservations, synced; then other launchers take a slot of each one the
    # sync saw with the most room (the first page now holds 4 + 1 + 1 + 1 = 7 slots)
    many_reservations(cloud, subnets, image)
    take_from_the_first_page(slots=1)
    # When a request for 8 instances comes
    with snapshot_reads() as asked:
        cloud.send(launch_request("r-eight", nodePool="general", count=8))
    # Then all 8 launched into reservations (the next page read), none beyond its room
    launched_into_reservations(cloud, "r-eight", 8)
    # And it read two pages (4, then 8), not every reservation
    assert FIRST_PAGE < len(set(asked)) <= FIRST_PAGE * 3, sorted(set(asked))


def test_the_coverage_item_says_the_room_the_sync_saw(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given reservations a pool selects, synced
    roomiest = many_reservations(cloud, subnets, image)
    # Then its coverage item holds each member's room, as EC2 counted it
    _, coverage = snapshots().read()
    (entry,) = coverage.values()
    assert len(entry.room) == USABLE
    assert entry.room[roomiest] == 5
    assert sorted(set(entry.room.values())) == [2, 5]
