"""A reservation created after the last sync (red team, 2026-11-23): the launcher looks at EC2
itself when the sync saw nothing a request could use, a bounded number of times, and a
reserved-only request that still finds none fails, never Rejected (DESIGN "Status"). Room made
since the sync in a reservation it saw full (red team 3, 2026-11-26) is used the same way."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_instance_events import STATE_CHANGE, deliver
from tests.integration.test_launch_into_reservations import reserve, setup_pool
from tests.integration.test_reservation_sync import run_into, sync
from tests.support.cloud import Cloud, launch_request

ML = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]


def reserved_only_pool_by_tag(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """A reserved-only pool selecting reservations tagged team=ml, synced while none existed."""
    setup_pool(
        cloud,
        subnets,
        image,
        selector_terms=[{"tags": {"team": "ml"}}],
        capacity_types=("reserved",),
    )
    sync()


def test_a_reservation_created_after_the_last_sync_is_not_a_reason_to_reject(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a reserved-only pool selecting reservations by tag, synced while none existed
    reserved_only_pool_by_tag(cloud, subnets, image)
    # When the team's reservation is created, and a request follows before the next sync
    wanted = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    cloud.send(launch_request("r-fresh", nodePool="general", count=1))
    # Then the request is not Rejected: it is valid (DESIGN "Status": Rejected is for a request
    # that is itself invalid, and is never retried); here it is served at once
    record = cloud.record("r-fresh")
    assert record is not None and record.status is not RequestStatus.REJECTED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [wanted], record.to_detail()


def test_a_reserved_only_request_with_no_reservation_fails_saying_when_it_was_looked_at(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a reserved-only pool whose selector matches no reservation at all
    reserved_only_pool_by_tag(cloud, subnets, image)
    # When a request names it
    handed_back = cloud.send(launch_request("r-none", nodePool="general", count=1))
    # Then it fails (valid, but nothing to launch into now), is not retried, and says why and when
    assert handed_back == []
    record = cloud.record("r-none")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    (error,) = record.errors
    assert error.code == "NoOffering"
    assert "no reservation" in error.message and "as of the last look" in error.message
    assert "never" not in error.message, error.message


def test_a_burst_finding_no_reservation_asks_ec2_once_per_container(
    cloud: Cloud, subnets: dict[str, str], image: str, ec2_calls: Counter[str]
) -> None:
    # Given a reserved-only pool whose selector matches nothing, as the last sync saw
    reserved_only_pool_by_tag(cloud, subnets, image)
    before = ec2_calls["DescribeCapacityReservations"]
    # When a burst of requests arrives, in several batches of one container
    bodies: list[Any] = [launch_request(f"burst-{i}", nodePool="general") for i in range(12)]
    for start in range(0, len(bodies), 4):
        cloud.send(*bodies[start : start + 4])
    # Then the container looked at EC2 once for the pool's one selector term, not once a request
    assert ec2_calls["DescribeCapacityReservations"] - before == 1
    # And another container looks once too (the bound is per container)
    cloud.send(launch_request("burst-other", nodePool="general"), batch=cloud.fresh_batch())
    assert ec2_calls["DescribeCapacityReservations"] - before == 2
    statuses = {cloud.record(f"burst-{i}").status for i in range(12)}  # type: ignore[union-attr]
    assert statuses == {RequestStatus.FAILED}


def fill_then_reserve_again(cloud: Cloud, full: str) -> tuple[str, Any]:
    """After the sync: a request fills `full`; then a second team=ml reservation is created and
    a request follows before the next sync. The new reservation's id and that request's record."""
    sync()
    cloud.send(launch_request("r-first", nodePool="general", count=1))
    first = cloud.record("r-first")
    assert first is not None and [i.capacity_reservation_id for i in first.instances] == [full]
    fresh = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    cloud.send(launch_request("r-second", nodePool="general", count=1))
    return fresh, cloud.record("r-second")


def test_a_reservation_created_after_the_last_sync_is_used_when_the_synced_ones_are_full(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool allowing reserved and on-demand, selecting team=ml reservations, whose one
    # reservation the last sync saw is filled (red team 2, 2026-11-23)
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    full = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    # When the team creates a second reservation, and a request follows before the next sync
    fresh, record = fill_then_reserve_again(cloud, full)
    # Then it lands in the new reservation, not on-demand: reserved capacity is used first
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [fresh], record.to_detail()


def test_room_in_an_interruptible_reservation_does_not_hide_a_new_one(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a pool selecting team=ml reservations: a full one, and an interruptible one with room
    # that plain requests may not use (interruptible capacity is opt-in), as the last sync saw
    setup_pool(cloud, subnets, image, selector_terms=[{"tags": {"team": "ml"}}])
    full = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    source = reserve(cloud, 3, InstanceMatchCriteria="targeted")
    cloud.ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, InstanceCount=2, TagSpecifications=ML
    )
    described = cloud.ec2.describe_capacity_reservations()["CapacityReservations"]
    cloud.wait_until_active(
        next(r["CapacityReservationId"] for r in described if r["Interruptible"])
    )
    # When a second ordinary reservation is created, and a request follows before the next sync
    fresh, record = fill_then_reserve_again(cloud, full)
    # Then it lands in the new reservation (red team 2: the loan's room stopped the launcher's look)
    assert record is not None, "no record"
    assert [i.capacity_reservation_id for i in record.instances] == [fresh], record.to_detail()


def reserved_and_on_demand_by_tag(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """A pool of m5.large and c5.large, reserved first then on-demand, whose NodeClass selects
    the team=ml reservations."""
    setup_pool(
        cloud,
        subnets,
        image,
        selector_terms=[{"tags": {"team": "ml"}}],
        types=("m5.large", "c5.large"),
    )


def test_a_reservation_grown_since_the_last_sync_is_used_once_the_launcher_has_seen_it(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the team's one reservation, filled by a request after the last sync
    reserved_and_on_demand_by_tag(cloud, subnets, image)
    grown = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    sync()
    cloud.send(launch_request("r-fill", nodePool="general", count=1))
    filled = cloud.record("r-fill")
    assert filled is not None
    assert [i.capacity_reservation_id for i in filled.instances] == [grown], filled.to_detail()
    # When the team grows it by two (ModifyCapacityReservation), and a request for two follows
    # before the next sync
    cloud.ec2.modify_capacity_reservation(CapacityReservationId=grown, InstanceCount=3)
    cloud.send(launch_request("r-grown", nodePool="general", count=2))
    # Then the launcher, finding the synced reservation full, looks at EC2 and "uses that look"
    # (docs/operations.md): it launches into the room, where it used to claim against the
    # stale snapshot, record the reservation as full and go on-demand
    record = cloud.record("r-grown")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [grown, grown], (
        record.to_detail()
    )
    assert record.unavailable_offerings == [], record.to_detail()


def test_room_a_request_cannot_use_does_not_hide_a_reservation_created_since_the_sync(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the team's c5.large reservation with room, as the last sync saw it
    reserved_and_on_demand_by_tag(cloud, subnets, image)
    reserve(cloud, 2, itype="c5.large", InstanceMatchCriteria="targeted", TagSpecifications=ML)
    sync()
    # When the team creates an m5.large reservation, and a request for the m5 family follows
    # before the next sync
    fresh = reserve(cloud, 2, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    family = {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
    cloud.send(launch_request("r-m5", nodePool="general", count=1, requirements=[family]))
    # Then it lands in the new reservation: the synced one has room, but none this request
    # could use (docs/operations.md: then the launcher looks at EC2), so it is not sent
    # on-demand
    record = cloud.record("r-m5")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [fresh], record.to_detail()


def test_a_request_gets_every_free_slot_even_when_the_sync_saw_fewer(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the team's reservation of 3, two of whose slots instances the service did not launch
    # held when the sync looked; they have ended since (no instance event: they are not ours)
    reserved_and_on_demand_by_tag(cloud, subnets, image)
    reservation = reserve(cloud, 3, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    others = run_into(cloud, reservation, 2)
    sync()
    cloud.ec2.terminate_instances(InstanceIds=others)
    # When a request for three follows before the next sync
    cloud.send(launch_request("r-three", nodePool="general", count=3))
    # Then all three land in the reservation, which had room for all of them: the snapshot's room
    # for one, fewer than the request asks, is a reason to look at EC2 (never fewer reserved
    # than free, then on-demand for the rest)
    record = cloud.record("r-three")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.capacity_reservation_id for i in record.instances] == [reservation] * 3, (
        record.to_detail()
    )


def test_slots_freed_since_the_launchers_last_look_are_used_though_the_look_saw_none(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the team's reservation of 3, filled by the service after the last sync, and a request
    # that found it full and so looked at EC2 (which saw it full too)
    reserved_and_on_demand_by_tag(cloud, subnets, image)
    reservation = reserve(cloud, 3, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    sync()
    cloud.send(launch_request("r-fill", nodePool="general", count=3))
    filled = cloud.record("r-fill")
    assert filled is not None
    assert [i.capacity_reservation_id for i in filled.instances] == [reservation] * 3
    cloud.send(launch_request("r-full", nodePool="general", count=1))
    # When two of its instances end (their events give their slots back), and a request for
    # three follows within the look's interval (ended once EC2 lists them: no launch here asked
    # DescribeInstances, which would have waited)
    cloud.wait_out_consistency()
    for instance in filled.instances[:2]:
        cloud.ec2.terminate_instances(InstanceIds=[instance.instance_id])
        deliver(STATE_CHANGE, instance.instance_id, state="shutting-down")
    cloud.send(launch_request("r-three", nodePool="general", count=3))
    # Then the two freed slots are used, then on-demand: the older look's "full" does not hide
    # what the snapshot holds now
    record = cloud.record("r-three")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert sorted((i.capacity_type, i.capacity_reservation_id or "") for i in record.instances) == [
        ("on-demand", ""),
        ("reserved", reservation),
        ("reserved", reservation),
    ], record.to_detail()


def test_a_reservation_cancelled_since_the_last_sync_sends_the_request_on_not_to_failure(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given the team's two reservations with room, as the last sync saw them, the larger of
    # which (tried first) the team cancels before the next sync
    reserved_and_on_demand_by_tag(cloud, subnets, image)
    cancelled = reserve(cloud, 3, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    kept = reserve(cloud, 1, InstanceMatchCriteria="targeted", TagSpecifications=ML)
    sync()
    cloud.ec2.cancel_capacity_reservation(CapacityReservationId=cancelled)
    # When a request for two follows
    cloud.send(launch_request("r-cancelled", nodePool="general", count=2))
    # Then EC2's refusal of the cancelled one (not active: no capacity fault) does not end the
    # request Failed: it goes on to the other reservation, then on-demand for the rest
    record = cloud.record("r-cancelled")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert sorted((i.capacity_type, i.capacity_reservation_id or "") for i in record.instances) == [
        ("on-demand", ""),
        ("reserved", kept),
    ], record.to_detail()
    # and its record keeps EC2's word on the cancelled one
    assert [(e.code, cancelled in e.message) for e in record.errors] == [
        ("InvalidParameterValue", True)
    ], record.errors
