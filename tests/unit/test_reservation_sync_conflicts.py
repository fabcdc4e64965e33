"""The sync never overwrites a snapshot a launcher changed since it was read: it re-reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.node_class_terms import (
    CapacityReservationSpec,
    CapacityReservationTarget,
)
from capacity_launcher.domain.capacity.idle_reservations import IdleState
from capacity_launcher.domain.capacity.reservation_state import (
    Coverage,
    StoredReservation,
    Thresholds,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.errors import Throttled
from capacity_launcher.service.reservation_sync import ReservationSync

RESERVATION = ReservationSnapshot("cr-0123456789abcdef0", "m5.large", "us-east-1a", "active", 4, 4)
TODAY = datetime(2026, 1, 15, tzinfo=UTC)
# As the last run stored it: idle accounting from today, at EC2's counts.
IDLE = IdleState(counted_until=TODAY, period_start=TODAY, total=4, available=4)
NODE_CLASS = parse_document(
    {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": "standard"},
        "spec": {
            "imageId": "ami-0123456789abcdef0",
            "subnetIds": ["subnet-0123456789abcdef0"],
            "securityGroupIds": ["sg-0123456789abcdef0"],
            "capacityReservationSpec": {
                "capacityReservationTarget": {"capacityReservationId": RESERVATION.reservation_id}
            },
        },
    }
)


class Config:
    def node_classes(self) -> list[Any]:
        return [NODE_CLASS]


class Ec2:
    def describe(self, ids: Any = None, filters: Any = None) -> list[ReservationSnapshot]:
        return [RESERVATION]

    def group_members(self, group_arn: str) -> list[str]:
        return []


class Snapshots:
    """A launcher exhausts the reservation between the sync's read and its first write."""

    def __init__(self) -> None:
        self.current = StoredReservation(snapshot=RESERVATION, version=1, idle=IDLE)
        self.saved: list[StoredReservation] = []

    def read(self) -> tuple[dict[str, StoredReservation], dict[str, Coverage]]:
        stale = self.current
        if stale.version == 1:
            self.current = replace(
                stale, snapshot=replace(RESERVATION, exhausted=True, available=0), version=2
            )
        return {RESERVATION.reservation_id: stale}, {}

    def get(self, reservation_id: str) -> StoredReservation | None:
        return self.current

    def save(self, reservation: StoredReservation, expected_version: int | None) -> bool:
        if expected_version != self.current.version:
            return False
        self.saved.append(reservation)
        self.current = reservation
        return True

    def save_coverage(self, coverage: Any) -> None: ...

    def forget(self, keys: Any) -> None: ...


class Cache:
    def __init__(self) -> None:
        self.cleared: list[str] = []

    def clear(self, offering: str) -> None:
        self.cleared.append(offering)


def _sync(ec2: Ec2, snapshots: Snapshots, cache: Cache, published: list[Any]) -> ReservationSync:
    """The sync over the fakes above, on a fixed day, its events collected in `published`."""
    return ReservationSync(
        Config(),
        ec2,
        snapshots,
        cache,
        lambda *events: published.extend(events),
        Thresholds(0.9, timedelta(hours=72)),
        lambda: TODAY,
    )


def test_a_snapshot_a_launcher_changed_meanwhile_is_not_overwritten_by_an_unchanged_one():
    snapshots, cache, published = Snapshots(), Cache(), []
    sync = _sync(Ec2(), snapshots, cache, published)
    report = sync.run()
    # What EC2 says is what the sync read: it writes nothing, and so overwrites nothing
    assert report.conflicts == []
    assert snapshots.saved == []
    assert published == []
    # The next run reads the launcher's write: the flag it set is seen and cleared (the sync's
    # writes follow what changed, issue 38: a flag set after a run's read waits one run more)
    report = sync.run()
    assert report.conflicts == []
    assert [s.version for s in snapshots.saved] == [3]
    assert [e.detail_type for e in published] == ["Capacity Reservation Replenished"]
    assert cache.cleared == [f"reserved:{RESERVATION.reservation_id}"]


GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"


class ThrottledGroups(Ec2):
    def group_members(self, group_arn: str) -> list[str]:
        raise Throttled("ListGroupResources", "ThrottlingException")


class GroupConfig:
    def node_classes(self) -> list[Any]:
        by_group = NODE_CLASS.model_copy(
            update={
                "spec": NODE_CLASS.spec.model_copy(
                    update={
                        "capacity_reservation_spec": CapacityReservationSpec(
                            capacity_reservation_target=CapacityReservationTarget(
                                capacity_reservation_resource_group_arn=GROUP
                            )
                        )
                    }
                )
            }
        )
        return [NODE_CLASS, by_group]


def test_a_throttled_group_listing_skips_that_group_and_syncs_the_rest():
    # Given one NodeClass by reservation id and one by a group whose listing is throttled
    snapshots = Snapshots()
    sync = ReservationSync(
        GroupConfig(),
        ThrottledGroups(),
        snapshots,
        Cache(),
        lambda *events: None,
        Thresholds(0.9, timedelta(hours=72)),
        lambda: TODAY,
    )
    # When the sync runs, the reservation the other NodeClass names is still synced
    report = sync.run()
    assert report.synced == [RESERVATION.reservation_id]


class Ec2Moved(Ec2):
    def describe(self, ids: Any = None, filters: Any = None) -> list[ReservationSnapshot]:
        return [replace(RESERVATION, available=3)]


def test_a_changed_snapshot_a_launcher_wrote_meanwhile_is_reread_in_the_same_run():
    # Given EC2's count moved since the last run, and a launcher writing between read and write
    snapshots, cache, published = Snapshots(), Cache(), []
    sync = _sync(Ec2Moved(), snapshots, cache, published)
    report = sync.run()
    # The first write is refused (version 1 is gone); the second starts from the launcher's
    # write: its flag is seen and cleared, nothing of it overwritten unseen
    assert report.conflicts == []
    assert [(s.version, s.snapshot.available) for s in snapshots.saved] == [(3, 3)]
    assert [e.detail_type for e in published] == ["Capacity Reservation Replenished"]
