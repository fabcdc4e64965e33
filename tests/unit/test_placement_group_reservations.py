"""Reservations in a cluster placement group, in planning and in the CreateFleet input: the group
is read from EC2 and kept in the snapshot, a group target is launched into per placement group,
and every override of an attempt into such a reservation is placed in its group ("Use Capacity
Reservations with cluster placement groups",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html; "Using Capacity Reservation in
cluster placement groups with a Capacity Reservation group",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-cpg-odcr-crg.html)."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.capacity_reservations import snapshot_from_ec2
from capacity_launcher.adapters.reservation_snapshots import _item, _stored
from capacity_launcher.domain.capacity.candidates import find_candidates
from capacity_launcher.domain.capacity.fleet import LaunchTemplate, fleet_request
from capacity_launcher.domain.capacity.planning import LaunchPlan
from capacity_launcher.domain.capacity.reservation_state import StoredReservation
from capacity_launcher.domain.capacity.reservations import (
    ReservationSource,
    ReservationUse,
    ReservedTarget,
)
from tests.unit.test_planning import EVERYTHING, M5, ZONES, by_id, reservation

ARN = "arn:aws:ec2:us-east-1:123456789012:placement-group/training"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/gpus"


def _targets(*sources: ReservationSource, count: int) -> list[tuple[ReservedTarget, int]]:
    plan = LaunchPlan(find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], list(sources)), count)
    targets = []
    while (attempt := plan.next_attempt()) is not None:
        assert attempt.target is not None
        targets.append((attempt.target, attempt.count))
        plan.record(attempt, [], [])
    return targets


def _fleet(*sources: ReservationSource) -> dict[str, Any]:
    plan = LaunchPlan(find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], list(sources)), 2)
    attempt = plan.next_attempt()
    assert attempt is not None and attempt.target is not None
    use = ReservationUse("capacity-reservations-only", attempt.target)
    return fleet_request(
        attempt,
        count=2,
        client_token="t",
        launch_template=LaunchTemplate("lt", use),
        subnets={"us-east-1a": ("subnet-a", "subnet-b")},
        tags={},
    )


def _overrides(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]


def test_the_placement_group_is_read_from_its_arn_and_kept_in_the_snapshot_store():
    raw = {
        "CapacityReservationId": "cr-1",
        "InstanceType": "m5.large",
        "AvailabilityZone": "us-east-1a",
        "PlacementGroupArn": ARN,
    }
    snapshot = snapshot_from_ec2(raw)
    assert snapshot.placement_group == "training"
    stored = _stored(_item(StoredReservation(snapshot)))
    assert stored.snapshot == snapshot
    assert snapshot_from_ec2({**raw, "PlacementGroupArn": None}).placement_group is None


def test_every_override_into_a_reservation_in_a_placement_group_is_placed_in_it():
    request = _fleet(*by_id(reservation("cr-1", 2, placement_group="training")))
    overrides = _overrides(request)
    assert len(overrides) == 2  # one per subnet
    assert all(o["Placement"] == {"GroupName": "training"} for o in overrides)


def test_a_reservation_outside_placement_groups_is_launched_into_as_before():
    assert all("Placement" not in o for o in _overrides(_fleet(*by_id(reservation("cr-1", 2)))))


def test_a_group_target_is_launched_into_per_placement_group_of_its_members():
    members = (
        reservation("cr-in", 2, placement_group="training"),
        reservation("cr-out", 1),
        reservation("cr-other", 1, placement_group="inference"),
    )
    targets = _targets(ReservationSource(ReservedTarget(group_arn=GROUP), members), count=4)
    assert [(t.group_arn, t.placement_group, n) for t, n in targets] == [
        (GROUP, "training", 2),
        (GROUP, None, 1),
        (GROUP, "inference", 1),
    ]
