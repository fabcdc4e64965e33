"""Reservation snapshots: nothing is keyed on an absent requester, and one malformed stored
snapshot affects only itself."""

from __future__ import annotations

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_reservation_sync import (
    snapshot,
    snapshots,
    sync,
    targeted_pool,
    use_snapshots,
)
from tests.support.cloud import Cloud, launch_request


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def test_a_request_without_requester_does_not_break_later_reserved_launches(
    snapshot_launchers: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a synced reservation of 3, and a request that names no requester launched into it
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 3)
    sync()
    cloud.send(launch_request("anonymous-1", nodePool="general"))
    cloud.send(launch_request("named-1", nodePool="general", requester="team-a"))
    # When the minute's sync records usage by requester (a minute later: EC2 lists them)
    cloud.wait_out_consistency()
    sync()
    # Then the snapshot reads back, with usage only under real requesters
    stored = snapshot(reservation)
    assert dict(stored.usage_by_requester) == {"team-a": 1}
    # and the next reserved launch works
    assert cloud.send(launch_request("later-1", nodePool="general", requester="team-b")) == []
    record = cloud.record("later-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]


def test_one_malformed_snapshot_is_skipped_and_the_others_still_serve(
    snapshot_launchers: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a synced reservation, and beside it a stored snapshot that does not parse
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    aws.client("dynamodb").put_item(
        TableName=cloud.names.state_table,
        Item={
            "pk": {"S": "Reservation"},
            "sk": {"S": "cr-0badbadbadbadbad0"},
            "total": {"S": "many"},
            "endDate": {"S": "not a date"},
        },
    )
    # When the snapshots are read and a reserved launch happens
    stored, _ = snapshots().read()
    handed_back = cloud.send(launch_request("after-bad-1", nodePool="general"))
    # Then only the bad one is left out (and reported), and the launch lands in the reservation
    assert reservation in stored and "cr-0badbadbadbadbad0" not in stored
    assert [i.reservation_id for i in snapshots().invalid()] == ["cr-0badbadbadbadbad0"]
    assert handed_back == []
    record = cloud.record("after-bad-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    # and the sync still runs
    assert reservation in sync().synced


def test_a_malformed_snapshot_of_a_used_reservation_is_replaced_by_the_next_sync(
    snapshot_launchers: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the snapshot of the targeted reservation was corrupted after a sync
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    aws.client("dynamodb").update_item(
        TableName=cloud.names.state_table,
        Key={"pk": {"S": "Reservation"}, "sk": {"S": reservation}},
        UpdateExpression="SET #total = :bad",
        ExpressionAttributeNames={"#total": "total"},
        ExpressionAttributeValues={":bad": {"S": "two"}},
    )
    # When a request arrives, then the reservation is still used (EC2's own view is asked)
    cloud.send(launch_request("corrupt-1", nodePool="general"))
    record = cloud.record("corrupt-1")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation]
    # And the next sync writes a good snapshot over it
    assert reservation in sync().synced
    assert snapshot(reservation).snapshot.total == 2
    assert snapshots().invalid() == []
