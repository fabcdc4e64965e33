"""Reservations in a cluster placement group (issue 35): EC2 gives such a reservation's capacity
only to instances launched in its placement group ("Use Capacity Reservations with cluster
placement groups", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html), so a
reserved attempt aimed at one places its instances there (Placement.GroupName on each
CreateFleet override), from EC2's view and from the sync's snapshots alike."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import available, group_of, reserve, setup_pool
from tests.integration.test_reservation_sync import snapshot, sync
from tests.support.cloud import Cloud, launch_request

PLACEMENT_GROUP_ARN = "arn:aws:ec2:us-east-1:123456789012:placement-group/training"
TAGGED = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]


def _placed(cloud: Cloud, instance_ids: list[str]) -> list[tuple[str | None, str]]:
    cloud.wait_out_consistency()  # the launcher may not have described them: EC2 lists them now
    described = cloud.ec2.describe_instances(InstanceIds=instance_ids)
    return sorted(
        (i.get("CapacityReservationId"), i["Placement"].get("GroupName", ""))
        for r in described["Reservations"]
        for i in r["Instances"]
    )


@pytest.mark.parametrize("synced", [False, True], ids=["ec2-view", "snapshots"])
def test_a_pool_selecting_a_reservation_in_a_placement_group_launches_into_it_and_the_group(
    cloud: Cloud, subnets: dict[str, str], image: str, synced: bool
) -> None:
    # Given a targeted reservation of 3 in the cluster placement group `training`, which a
    # NodeClass selects by tag
    reservation = reserve(
        cloud,
        3,
        InstanceMatchCriteria="targeted",
        PlacementGroupArn=PLACEMENT_GROUP_ARN,
        TagSpecifications=TAGGED,
    )
    setup_pool(
        cloud,
        subnets,
        image,
        selector_terms=[{"tags": {"team": "ml"}}],
        capacity_types=("reserved",),
    )
    if synced:
        # And the sync has kept its placement group in the shared snapshot
        sync()
        assert snapshot(reservation).snapshot.placement_group == "training"
    # When 2 instances are requested
    cloud.send(launch_request("r-cpg", nodePool="general", count=2))
    # Then both land in the reservation, placed in its placement group
    record = cloud.record("r-cpg")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert _placed(cloud, [i.instance_id for i in record.instances]) == [
        (reservation, "training"),
        (reservation, "training"),
    ]
    assert available(cloud, reservation) == 1


def test_a_group_target_launches_into_each_placement_group_of_its_members(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a reservation group of one member in `training` (2) and one outside any group (1)
    inside = reserve(
        cloud, 2, InstanceMatchCriteria="targeted", PlacementGroupArn=PLACEMENT_GROUP_ARN
    )
    outside = reserve(cloud, 1, InstanceMatchCriteria="targeted")
    arn = group_of(cloud, inside, outside, name="cpg-group")
    target: dict[str, Any] = {"capacityReservationResourceGroupArn": arn}
    setup_pool(
        cloud,
        subnets,
        image,
        reservation_spec={"capacityReservationTarget": target},
        capacity_types=("reserved",),
    )
    # When 3 instances are requested
    cloud.send(launch_request("r-cpg-group", nodePool="general", count=3))
    # Then the member in the placement group gets its 2, placed there, the other its 1 (EC2
    # would also use the member in `training` for a group named alone, once the other is full:
    # using-cpg-odcr-crg; this keeps working with the launch split per placement group)
    record = cloud.record("r-cpg-group")
    assert record is not None and record.launched == 3, record and record.to_detail()
    assert _placed(cloud, [i.instance_id for i in record.instances]) == sorted(
        [(inside, "training"), (inside, "training"), (outside, "")]
    )
