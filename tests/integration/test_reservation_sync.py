"""Issue 5: the reservation sync, its shared snapshots and the events of each crossing."""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.capacity.reservation_state import (
    STALE_AFTER_SECONDS,
    StoredReservation,
)
from capacity_launcher.domain.records.status import (
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRING,
    RESERVATION_REPLENISHED,
    RESERVATION_UTILIZATION_HIGH,
    Event,
    RequestStatus,
)
from capacity_launcher.service.reservation_sync import SyncReport
from capacity_launcher.service.reservations import ReservationProvider
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import hosted_on, system_clock
from tests.integration.test_launch_into_reservations import ZONE, group_of, reserve, setup_pool
from tests.support.cloud import Cloud, an_image, current, launch_request

ROOT = Path(__file__).resolve().parents[2]


# -- helpers the lifecycle tests share -------------------------------------------------------


def sync() -> SyncReport:
    """One run of the reservation sync, as a fresh container would build it."""
    return current().adapters().reservation_sync().run()


def snapshots() -> ReservationSnapshots:
    return current().adapters().reservation_snapshots()


def reservations() -> ReservationProvider:
    """The launchers' reservations: the snapshots first, EC2 when they are stale."""
    return current().adapters().reservations()


def snapshot(reservation_id: str) -> StoredReservation:
    return {s.snapshot.reservation_id: s for s in snapshots().list()}[reservation_id]


def published(cloud: Cloud, detail_type: str) -> list[dict[str, Any]]:
    return [e for e in cloud.events() if e["detail-type"] == detail_type]


def ice_keys() -> set[str]:
    settings = get_settings()
    cache = UnavailableOfferings(
        settings.unavailable_offerings_table_name, settings.ice_ttl_seconds, clock=time.time
    )
    return set(cache.current())


def handler(name: str) -> Callable[[dict[str, Any], Any], Any]:
    """A function's handler, loaded from functions/<name>/app.py as a new container would (on
    the cloud's host)."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_app", ROOT / "functions" / name / "app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with hosted_on(current().host):
        spec.loader.exec_module(module)
    return module.handler  # type: ignore[no-any-return]


def sample_event(name: str, **detail: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / name).read_text())
    event["detail"].update(detail)
    return dict(event)


class LambdaContext:
    function_name = "capacity-launcher-test"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:capacity-launcher-test"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def use_snapshots(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    """Launchers whose `reservations` port is the shared snapshots (the wiring issue 5 asks for)."""
    return cloud


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def targeted_pool(
    cloud: Cloud,
    subnets: dict[str, str],
    image: str,
    count: int,
    *,
    limits: dict[str, str] | None = None,
    **reservation: Any,
) -> str:
    """A reservation of `count` and the "standard"/"general" NodeClass and pool targeting it."""
    reservation_id = reserve(cloud, count, **reservation)
    target = {"capacityReservationTarget": {"capacityReservationId": reservation_id}}
    setup_pool(cloud, subnets, image, reservation_spec=target, limits=limits)
    return reservation_id


def run_into(
    cloud: Cloud, reservation_id: str, count: int, tags: dict[str, str] | None = None
) -> list[str]:
    """Instances launched into a reservation outside the service (someone else's usage, or,
    with our tags, a crashed worker's)."""
    tagging = [
        {
            "ResourceType": "instance",
            "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        }
    ]
    response = cloud.ec2.run_instances(
        **({"TagSpecifications": tagging} if tags else {}),
        ImageId=an_image(cloud.ec2),
        InstanceType="m5.large",
        MinCount=count,
        MaxCount=count,
        Placement={"AvailabilityZone": ZONE},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        },
    )
    cloud.wait_out_consistency()  # they ran before the test goes on, as on AWS
    return [i["InstanceId"] for i in response["Instances"]]


def detail_types(events: list[Event]) -> list[str]:
    return [e.detail_type for e in events]


# -- snapshots ---------------------------------------------------------------------------------


def test_sync_writes_snapshots_of_targets_group_members_and_selected_reservations(
    snapshot_launchers, subnets, image
):
    # Given a NodeClass per way of naming reservations, one of them ending in 10 days
    ends = (datetime.now(UTC) + timedelta(days=10)).replace(microsecond=0)
    targeted = reserve(snapshot_launchers, 2, EndDateType="limited", EndDate=ends)
    first, second = reserve(snapshot_launchers, 1), reserve(snapshot_launchers, 3)
    arn = group_of(snapshot_launchers, first, second)
    tag = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    selected = reserve(snapshot_launchers, 4, TagSpecifications=tag)
    ignored = reserve(snapshot_launchers, 5)
    target = {"capacityReservationTarget": {"capacityReservationId": targeted}}
    group = {"capacityReservationTarget": {"capacityReservationResourceGroupArn": arn}}
    setup_pool(snapshot_launchers, subnets, image, klass="by-id", pool="a", reservation_spec=target)
    setup_pool(
        snapshot_launchers, subnets, image, klass="by-group", pool="b", reservation_spec=group
    )
    setup_pool(
        snapshot_launchers,
        subnets,
        image,
        klass="by-tag",
        pool="c",
        selector_terms=[{"tags": {"team": "ml"}}],
    )
    # When the sync runs
    report = sync()
    # Then each reservation a NodeClass can use has a snapshot, and no other does
    stored = {s.snapshot.reservation_id: s for s in snapshots().list()}
    assert sorted(stored) == sorted([targeted, first, second, selected])
    assert ignored not in stored
    assert sorted(report.synced) == sorted(stored)
    s = stored[targeted].snapshot
    assert (s.instance_type, s.zone, s.state, s.total, s.available) == (
        "m5.large",
        ZONE,
        "active",
        2,
        2,
    )
    assert (s.platform, s.tenancy, s.instance_match_criteria) == ("Linux/UNIX", "default", "open")
    assert s.end_date == ends
    assert s.owner_id == "123456789012"
    assert stored[first].snapshot.groups == (arn,)
    assert stored[second].snapshot.groups == (arn,)
    assert stored[selected].snapshot.tags == {"team": "ml"}
    assert stored[targeted].synced_at is not None
    # and the launcher's port resolves every NodeClass from them without asking EC2
    config = ConfigStore(get_settings().state_table_name, clock=system_clock)
    calls: Counter[str] = Counter()
    aws.client("ec2").meta.events.register(
        "before-call.ec2", lambda model, **_: calls.update([model.name])
    )
    by_group = reservations().sources(config.node_class("by-group"))
    by_tag = reservations().sources(config.node_class("by-tag"))
    assert by_group[0].target.group_arn == arn
    assert sorted(r.reservation_id for r in by_group[0].reservations) == sorted([first, second])
    assert [src.target.reservation_id for src in by_tag] == [selected]
    assert calls["DescribeCapacityReservations"] == 0


def test_a_launch_decrements_the_shared_snapshot_and_a_second_worker_skips_the_full_reservation(
    snapshot_launchers, subnets, image, ec2_calls
):
    # Given a reservation of 1 that a NodeClass targets, synced, and two workers
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 1)
    sync()
    first, second = cloud.fresh_batch(), cloud.fresh_batch()
    # When the first launches into it
    cloud.send(launch_request("w-1", nodePool="general"), batch=first)
    record = cloud.record("w-1")
    assert record is not None
    assert record.launched == 1, json.dumps(record.to_detail())
    assert record.instances[0].capacity_reservation_id == reservation
    # Then the shared snapshot has no slot left, before any sync
    assert snapshot(reservation).snapshot.available == 0
    # and the second worker goes on-demand without launching into it; with no synced reservation
    # usable, it looks once at EC2 for one created since the sync (README), and finds it full
    ec2_calls.clear()
    cloud.send(launch_request("w-2", nodePool="general"), batch=second)
    record = cloud.record("w-2")
    assert record is not None
    assert record.status is RequestStatus.FULFILLED
    assert [i.capacity_type for i in record.instances] == ["on-demand"]
    assert ec2_calls["DescribeCapacityReservations"] == 1
    assert ec2_calls["CreateFleet"] == 1


def test_replenishment_clears_the_cache_item_and_emits_the_event_once(
    snapshot_launchers, subnets, image
):
    # Given a synced reservation that a worker found exhausted (snapshot flag and cache item)
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    snapshots().mark_exhausted([reservation])
    settings = get_settings()
    UnavailableOfferings(settings.unavailable_offerings_table_name, 180, clock=time.time).mark(
        [(f"reserved:{reservation}", "ReservationCapacityExceeded", "full")]
    )
    cloud.events()
    # When the sync sees capacity in EC2
    first = sync()
    # Then the event is published, the flag and the cache item are gone
    assert detail_types(first.events) == [RESERVATION_REPLENISHED]
    replenished = published(cloud, RESERVATION_REPLENISHED)
    assert [e["detail"]["capacityReservationId"] for e in replenished] == [reservation]
    assert not snapshot(reservation).snapshot.exhausted
    assert f"reserved:{reservation}" not in ice_keys()
    # and a second sync says nothing more
    assert sync().events == []
    assert published(cloud, RESERVATION_REPLENISHED) == []


def test_a_sync_that_finds_a_snapshot_unchanged_does_not_write_it_again(
    snapshot_launchers, subnets, image
):
    # Given a targeted reservation of 2, synced
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    written = snapshot(reservation)
    # When the sync runs again a minute later, nothing having changed
    moto_capacity.advance_clock(60)
    again = sync()
    # Then the snapshot is as written (issue 38: the sync's writes follow what changed), the
    # reservation still counted as synced
    assert snapshot(reservation) == written
    assert reservation in again.synced
    # and once EC2's count moves, the next run writes it
    run_into(cloud, reservation, 1)
    moto_capacity.advance_clock(60)
    sync()
    moved = snapshot(reservation)
    assert (moved.snapshot.available, moved.version) == (1, written.version + 1)


def test_exhausted_fires_once_when_available_reaches_zero(snapshot_launchers, subnets, image):
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    assert RESERVATION_EXHAUSTED not in detail_types(sync().events)
    run_into(cloud, reservation, 2)
    assert RESERVATION_EXHAUSTED in detail_types(sync().events)
    assert RESERVATION_EXHAUSTED not in detail_types(sync().events)


def test_utilization_high_fires_once_per_crossing_and_rearms_below_the_threshold(
    snapshot_launchers, subnets, image
):
    # Given a reservation of 10 and the default threshold of 0.9
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 10)
    assert detail_types(sync().events) == []
    # When it crosses 0.9 upward, the event fires once
    used = run_into(cloud, reservation, 9)
    assert detail_types(sync().events) == [RESERVATION_UTILIZATION_HIGH]
    assert detail_types(sync().events) == []
    # When it falls below, nothing fires, and the next crossing fires again
    cloud.ec2.terminate_instances(InstanceIds=used[:2])
    assert detail_types(sync().events) == []
    run_into(cloud, reservation, 2)
    assert detail_types(sync().events) == [RESERVATION_UTILIZATION_HIGH]
    (event,) = published(cloud, RESERVATION_UTILIZATION_HIGH)[-1:]
    assert event["detail"]["utilization"] == 0.9
    assert event["detail"]["threshold"] == 0.9


def test_expiring_fires_once_within_the_horizon_and_again_after_an_extension_ends(
    snapshot_launchers, subnets, image
):
    # Given a reservation ending in 2 days (the default horizon is 72 hours)
    cloud = snapshot_launchers
    soon = datetime.now(UTC) + timedelta(days=2)
    reservation = targeted_pool(cloud, subnets, image, 2, EndDateType="limited", EndDate=soon)
    # Then the first sync announces it, the next does not
    assert detail_types(sync().events) == [RESERVATION_EXPIRING]
    assert detail_types(sync().events) == []
    # When it is extended beyond the horizon, and later shortened again, it fires again once
    later = datetime.now(UTC) + timedelta(days=30)
    cloud.ec2.modify_capacity_reservation(CapacityReservationId=reservation, EndDate=later)
    assert detail_types(sync().events) == []
    cloud.ec2.modify_capacity_reservation(CapacityReservationId=reservation, EndDate=soon)
    assert detail_types(sync().events) == [RESERVATION_EXPIRING]


def test_the_schedule_handler_runs_the_sync_on_the_sample_scheduled_event(
    snapshot_launchers, subnets, image
):
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 1)
    result = handler("reservation_sync")(sample_event("schedule.json"), LambdaContext())
    assert result["synced"] == 1
    assert result["drift"] == 0
    assert snapshot(reservation).snapshot.available == 1


def test_an_empty_event_runs_the_minute_as_the_schedule_does(snapshot_launchers, subnets, image):
    """`sam local invoke ReservationSyncFunction` without -e sends `{}` (and so does
    `capacity-launcher invoke`): the handler ran the minute and then failed on the missing
    `time` while answering."""
    cloud = snapshot_launchers
    targeted_pool(cloud, subnets, image, 1)
    result = handler("reservation_sync")({}, LambdaContext())
    assert result["synced"] == 1
    assert result["scheduledAt"] is None


def test_a_node_class_the_sync_has_not_seen_is_resolved_from_ec2_keeping_exhausted_flags(
    snapshot_launchers, subnets, image, ec2_calls
):
    # Given a synced reservation that a worker found exhausted
    cloud = snapshot_launchers
    reservation = reserve(cloud, 2)
    target = {"capacityReservationTarget": {"capacityReservationId": reservation}}
    setup_pool(cloud, subnets, image, klass="first", pool="first", reservation_spec=target)
    sync()
    snapshots().mark_exhausted([reservation])
    # When a new NodeClass names it before the next sync
    setup_pool(
        cloud,
        subnets,
        image,
        klass="second",
        pool="second",
        selector_terms=[{"id": reservation}],
    )
    ec2_calls.clear()
    config = ConfigStore(get_settings().state_table_name, clock=system_clock)
    (source,) = reservations().sources(config.node_class("second"))
    # Then EC2 is asked, and the flag still holds
    assert ec2_calls["DescribeCapacityReservations"] == 1
    assert [(r.reservation_id, r.exhausted) for r in source.reservations] == [(reservation, True)]


def test_snapshots_of_a_sync_that_stopped_are_not_trusted(snapshot_launchers, subnets, image):
    # Given snapshots synced longer ago than the staleness bound
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    reservations().note_launched({reservation: 2})
    later = time.time() + STALE_AFTER_SECONDS + 1
    settings = get_settings()
    stale = ReservationProvider(
        ReservationSnapshots(settings.state_table_name), CapacityReservations(), clock=lambda: later
    )
    # When a launcher resolves the NodeClass, it reads EC2's live count instead
    node_class = ConfigStore(settings.state_table_name, clock=system_clock).node_class("standard")
    (source,) = stale.sources(node_class)
    assert [r.available for r in source.reservations] == [2]


def test_room_ec2_shows_is_launched_into_while_the_sync_has_stopped(
    snapshot_launchers, subnets, image
):
    # Given a targeted reservation of 1 that a request filled after the last sync, and a sync
    # that has stopped since (its snapshots are stale: launchers read EC2 directly)
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 1, InstanceMatchCriteria="targeted")
    sync()
    cloud.send(launch_request("stale-1", nodePool="general"))
    moto_capacity.advance_clock(STALE_AFTER_SECONDS + 60)
    # When the reservation is grown by two, and a request for two follows
    cloud.ec2.modify_capacity_reservation(CapacityReservationId=reservation, InstanceCount=3)
    cloud.send(launch_request("stale-2", nodePool="general", count=2))
    # Then both land in it: the claim does not refuse the room EC2 shows because the snapshot,
    # which no sync corrects any more, still says full (red team 3: on-demand for as long as
    # the sync was down)
    record = cloud.record("stale-2")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation] * 2, (
        record.to_detail()
    )


def test_an_exhausted_flag_no_sync_will_lift_holds_no_longer_than_the_ice_cache_entry(
    snapshot_launchers, subnets, image
):
    # Given a targeted reservation of 2, synced, that a worker then found exhausted, and a sync
    # that has stopped since; the flag's ICE cache entry (written with it) has expired, and EC2
    # shows both slots free
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2, InstanceMatchCriteria="targeted")
    sync()
    snapshots().mark_exhausted([reservation])
    assert f"reserved:{reservation}" not in ice_keys()
    moto_capacity.advance_clock(STALE_AFTER_SECONDS + 60)
    # When a request arrives (its launcher reads EC2 directly)
    cloud.send(launch_request("flagged-1", nodePool="general"))
    # Then it lands in the reservation: the flag no longer holds, as no sync would ever lift it
    # (red team 3: on-demand for as long as the sync was down)
    record = cloud.record("flagged-1")
    assert record is not None
    assert [i.capacity_reservation_id for i in record.instances] == [reservation], (
        record.to_detail()
    )
    assert not snapshot(reservation).snapshot.exhausted


def test_a_node_class_naming_a_missing_group_does_not_stop_the_sync_for_the_others(
    snapshot_launchers, subnets, image
):
    # Given one NodeClass targeting a group that does not exist, and one targeting a reservation
    targeted = reserve(snapshot_launchers, 2)
    missing = "arn:aws:resource-groups:us-east-1:123456789012:group/never-created"
    setup_pool(
        snapshot_launchers,
        subnets,
        image,
        klass="gone",
        pool="gone",
        reservation_spec={
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": missing}
        },
    )
    setup_pool(
        snapshot_launchers,
        subnets,
        image,
        klass="by-id",
        pool="a",
        reservation_spec={"capacityReservationTarget": {"capacityReservationId": targeted}},
    )
    # When the sync runs, it still snapshots the reservation the other NodeClass uses
    sync()
    assert snapshot(targeted).snapshot.total == 2


def test_slots_another_worker_claimed_are_not_asked_of_ec2(
    snapshot_launchers, subnets, image, fleet_inputs, monkeypatch
):
    # Given a synced targeted reservation of 2, and another worker racing for both slots
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2, InstanceMatchCriteria="targeted")
    sync()
    other_worker = reservations()
    real_claim = ReservationProvider.claim

    def raced(
        self: ReservationProvider, reservation_id: str, count: int, take: Any = None
    ) -> int | None:
        # Between our read of the snapshot and our claim, another worker takes every slot.
        assert real_claim(other_worker, reservation_id, 2) == 2
        return real_claim(self, reservation_id, count, take)

    monkeypatch.setattr(ReservationProvider, "claim", raced)
    # When a request plans with the slots it read, then claims
    cloud.send(launch_request("claimed-1", nodePool="general"))
    # Then no reserved CreateFleet is sent: the request goes on-demand, saying why
    record = cloud.record("claimed-1")
    assert record is not None
    assert [i.capacity_type for i in record.instances] == ["on-demand"]
    assert [(u.capacity_reservation_id, u.reason) for u in record.unavailable_offerings] == [
        (reservation, "ReservationCapacityExceeded")
    ]
    # (a reserved fleet follows our order, "prioritized"; an on-demand one EC2's "lowest-price")
    assert [f["OnDemandOptions"]["AllocationStrategy"] for f in fleet_inputs] == ["lowest-price"]


def test_a_claim_takes_only_what_is_left_and_unused_slots_are_given_back(
    snapshot_launchers, subnets, image
):
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 3)
    sync()
    assert reservations().claim(reservation, 2) == 2
    assert reservations().claim(reservation, 5) == 1
    assert reservations().claim(reservation, 1) == 0
    reservations().give_back(reservation, 2)
    assert snapshot(reservation).snapshot.available == 2
