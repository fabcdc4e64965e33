"""Issue 27, item 1: launch templates have a lifecycle. EC2 holds at most 5,000 a Region
(emulated by moto_capacity's launch-template quota); the sync deletes those no NodeClass can use
any more, so a new image or a deleted NodeClass never fills the quota for good."""

from __future__ import annotations

from typing import Any

import pytest

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool, targeted_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, launch_request

HOUR = 3600


def _templates(cloud: Cloud) -> list[dict[str, Any]]:
    found = cloud.ec2.describe_launch_templates()["LaunchTemplates"]
    return sorted(found, key=lambda t: t["LaunchTemplateName"])


@pytest.fixture
def pool(cloud: Cloud) -> Cloud:
    # The sync reads the emulator's clock, as it would read AWS's (the harness's host).
    return cloud


def _launch(cloud: Cloud, request_id: str) -> RequestStatus:
    cloud.send(launch_request(request_id, nodePool="general"), batch=cloud.fresh_batch())
    record = cloud.record(request_id)
    assert record is not None
    return record.status


def test_a_new_image_supersedes_the_old_templates_and_the_sync_frees_their_quota(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool that launched with image 1, and a Region whose template quota is now full
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    assert _launch(pool, "with-image-1") is RequestStatus.FULFILLED
    old = [t["LaunchTemplateName"] for t in _templates(pool)]
    assert old
    moto_capacity.set_launch_template_quota(len(old))

    # When the NodeClass moves to image 2 (the weekly image), a minute later
    moto_capacity.advance_clock(60)
    image_2 = moto_capacity.register_image("us-east-1", "Linux/UNIX")
    setup_pool(pool, subnets, image_2, capacity_types=("on-demand",))

    # Then its launches fail while the quota is full (CreateLaunchTemplate: ResourceLimitExceeded)
    assert _launch(pool, "quota-full") is RequestStatus.FAILED
    assert pool.record("quota-full").errors[0].code == "ResourceLimitExceeded"  # type: ignore[union-attr]

    # When the sync runs within the hour, it deletes nothing (image 2 is not in use long enough)
    moto_capacity.set_launch_template_quota(len(old) + 1)
    assert _launch(pool, "with-image-2") is RequestStatus.FULFILLED
    report = sync().templates
    assert report is not None and report.deleted == {}

    # When an hour has passed, the sync deletes the templates of image 1, and only those
    moto_capacity.advance_clock(HOUR)
    report = sync().templates
    assert report is not None
    assert report.deleted == dict.fromkeys(old, "Superseded")
    assert not {t["LaunchTemplateName"] for t in _templates(pool)} & set(old)


def test_a_quota_filled_before_templates_had_a_lifecycle_drains_and_launches_work_again(
    pool: Cloud, subnets: dict[str, str], image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the Region's quota full of the service's templates from before (no basis tag)
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    for n in range(3):
        pool.ec2.create_launch_template(
            LaunchTemplateName=f"capacity-launcher-standard-old{n}",
            LaunchTemplateData={"ImageId": image},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [
                        {"Key": "capacity-launcher:managed", "Value": "true"},
                        {"Key": "capacity-launcher:node-class", "Value": "standard"},
                    ],
                }
            ],
        )
    moto_capacity.set_launch_template_quota(3)
    assert _launch(pool, "quota-full") is RequestStatus.FAILED

    # When the sync runs an hour later, it leaves them: they carry no stack, and may be
    # another deployment's (docs/operations.md: Two deployments in one account)
    moto_capacity.advance_clock(HOUR)
    report = sync().templates
    assert report is not None and report.deleted == {}

    # When the operator says this stack is the only one (ClaimUntaggedResources), then the
    # sync deletes them
    monkeypatch.setenv("CLAIM_UNTAGGED_RESOURCES", "true")
    get_settings.cache_clear()
    report = sync().templates
    assert report is not None
    assert sorted(report.deleted) == [f"capacity-launcher-standard-old{n}" for n in range(3)]

    # and the launcher creates what it needs again, tagged: launches work again
    assert _launch(pool, "after-the-sync") is RequestStatus.FULFILLED
    tags = {t["Key"]: t["Value"] for t in _templates(pool)[0]["Tags"]}
    assert tags["capacity-launcher:node-class"] == "standard"
    assert "capacity-launcher:template-basis" in tags


def test_the_templates_of_a_deleted_node_class_are_deleted_by_the_next_sync(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a second NodeClass and pool that launched, and templates of the first one too
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    setup_pool(pool, subnets, image, capacity_types=("on-demand",), pool="gone", klass="gone")
    assert _launch(pool, "general-1") is RequestStatus.FULFILLED
    pool.send(launch_request("gone-1", nodePool="gone"), batch=pool.fresh_batch())
    gone = [t for t in _templates(pool) if "-gone-" in t["LaunchTemplateName"]]
    assert gone
    moto_capacity.advance_clock(HOUR)

    # When the NodeClass (and its pool) are deleted
    pool.delete("NodePool", "gone")
    pool.delete("NodeClass", "gone")
    report = sync().templates

    # Then its templates are deleted, the other NodeClass's kept
    assert report is not None
    assert report.deleted == {t["LaunchTemplateName"]: "NodeClassDeleted" for t in gone}
    assert _templates(pool) and all(
        "-standard-" in t["LaunchTemplateName"] for t in _templates(pool)
    )


def test_the_templates_of_an_ended_reservation_are_deleted_those_of_a_live_one_kept(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool targeting a reservation, that launched into it
    reservation = targeted_pool(pool, subnets, image, 2)
    assert _launch(pool, "into-it") is RequestStatus.FULFILLED
    targeted = [
        t["LaunchTemplateName"]
        for t in _templates(pool)
        if {"Key": "capacity-launcher:reservation-target", "Value": reservation} in t["Tags"]
    ]
    assert targeted
    moto_capacity.advance_clock(HOUR)
    # When the sync runs while it is active, its templates are kept
    report = sync().templates
    assert report is not None and report.deleted == {}

    # When the reservation is cancelled, then the next sync deletes its templates only
    pool.ec2.cancel_capacity_reservation(CapacityReservationId=reservation)
    report = sync().templates
    assert report is not None
    assert report.deleted == dict.fromkeys(targeted, "ReservationGone")
    assert not {t["LaunchTemplateName"] for t in _templates(pool)} & set(targeted)


def _names(cloud: Cloud) -> set[str]:
    return {t["LaunchTemplateName"] for t in _templates(cloud)}


def test_a_node_class_reverted_within_the_hour_reuses_its_template_and_the_sweep_keeps_it(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool that launched with image 1, then with image 2 a minute later
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    assert _launch(pool, "with-image-1") is RequestStatus.FULFILLED
    first = _names(pool)
    moto_capacity.advance_clock(60)
    image_2 = moto_capacity.register_image("us-east-1", "Linux/UNIX")
    setup_pool(pool, subnets, image_2, capacity_types=("on-demand",))
    assert _launch(pool, "with-image-2") is RequestStatus.FULFILLED
    second = _names(pool) - first
    assert second

    # When the NodeClass is reverted to image 1 ten minutes later, and launches go on
    moto_capacity.advance_clock(600)
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    assert _launch(pool, "reverted") is RequestStatus.FULFILLED

    # Then the revert reused image 1's template (content-addressed: no new one)
    assert _names(pool) == first | second

    # and an hour later the sweep deletes image 2's, no longer used, and keeps the one in use
    moto_capacity.advance_clock(HOUR)
    report = sync().templates
    assert report is not None
    assert report.deleted == dict.fromkeys(second, "Superseded")
    assert _names(pool) == first
    assert _launch(pool, "after-the-sweep") is RequestStatus.FULFILLED


def test_a_warm_launcher_meeting_its_template_gone_forgets_it_and_creates_it_again(
    pool: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a warm launcher that launched from its template (and trusts its name for minutes)
    setup_pool(pool, subnets, image, capacity_types=("on-demand",))
    warm = pool.fresh_batch()
    pool.send(launch_request("first", nodePool="general"), batch=warm)
    assert pool.record("first").status is RequestStatus.FULFILLED  # type: ignore[union-attr]
    (name,) = _names(pool)

    # When the template is deleted behind its back (the sweep, an operator)
    pool.ec2.delete_launch_template(LaunchTemplateName=name)

    # Then its next launch meets InvalidLaunchTemplateName.NotFoundException, drops the name,
    # creates the template again and launches: nothing is handed back
    handed_back = pool.send(launch_request("second", nodePool="general"), batch=warm)
    assert handed_back == []
    assert pool.record("second").status is RequestStatus.FULFILLED  # type: ignore[union-attr]
    assert _names(pool) == {name}
