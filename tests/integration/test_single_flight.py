"""Issue 14: single flight on the shared ICE cache. The first worker to ask EC2 about an unknown
offering claims it; the others leave it to that worker's answer instead of asking EC2 too."""

from __future__ import annotations

import time
from collections import Counter

import moto_capacity
from capacity_launcher.adapters.unavailable_offerings import BEING_TRIED, UnavailableOfferings
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.single_flight import take_turn
from tests.integration.test_capacity_and_limits import ice_items as cloud_items
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import Cloud, launch_request

KEY = f"on-demand:m5.large:{ZONE}"


class FakeClock:
    def __init__(self, start: float = 1_900_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def cache(cloud: Cloud, **options: object) -> UnavailableOfferings:
    options.setdefault("clock", time.time)
    return UnavailableOfferings(cloud.names.unavailable_offerings_table, 180, **options)  # type: ignore[arg-type]


def on_demand_pool(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))


def test_a_second_worker_that_meets_a_claim_leaves_the_offering_to_the_claimers_answer(
    cloud, subnets, image, ec2_calls: Counter[str]
):
    # Given the only offering dry, and worker A asking EC2 about it right now (its claim held)
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)
    on_demand_pool(cloud, subnets, image)
    worker_a = cache(cloud)
    turn = worker_a.take_turn([KEY])
    assert turn.mine == {KEY}

    # ... whose answer (the offering is dry) arrives while worker B waits on the claim
    def a_answers(_seconds: float) -> None:
        worker_a.mark([(KEY, "InsufficientInstanceCapacity", "no capacity")])
        worker_a.end_turn(turn, dry=[KEY])

    # When worker B (another container, waiting on claims with `a_answers`) serves a request
    # for that offering
    cloud.send(launch_request("sf-1", nodePool="general"), batch=cloud.fresh_batch(a_answers))
    # Then B never called CreateFleet: A's answer, cached, told it the offering is dry
    assert ec2_calls["CreateFleet"] == 0
    record = cloud.record("sf-1")
    assert record is not None and record.status is RequestStatus.FAILED
    assert [(o.instance_type, o.reason) for o in record.unavailable_offerings] == [
        ("m5.large", "InsufficientInstanceCapacity")
    ]


def test_a_claim_cleared_by_a_launch_lets_the_waiting_worker_launch(
    cloud, subnets, image, ec2_calls: Counter[str]
):
    # Given worker A's claim on a healthy offering, which A clears when its launch succeeds
    on_demand_pool(cloud, subnets, image)
    worker_a = cache(cloud)
    turn = worker_a.take_turn([KEY])

    # When worker B, waiting on the claim while A clears it, serves a request for it
    def a_launches(seconds: float) -> None:
        worker_a.end_turn(turn, launched=[KEY])
        moto_capacity.advance_clock(seconds)

    batch = cloud.fresh_batch(a_launches)
    cloud.send(launch_request("sf-2", nodePool="general"), batch=batch)
    # Then B launched once A's claim was gone, and left no claim behind
    assert ec2_calls["CreateFleet"] == 1
    record = cloud.record("sf-2")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert cache(cloud).take_turn([KEY]).mine == {KEY}


def test_a_claimer_that_finds_the_offering_dry_leaves_an_ice_entry_in_place_of_its_claim(
    cloud, subnets, image
):
    # Given the only offering dry
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 0)
    on_demand_pool(cloud, subnets, image)
    # When a worker asks EC2 for it (claiming it first)
    cloud.send(launch_request("sf-3", nodePool="general"))
    # Then its claim was replaced by the ICE entry, in the format docs/contracts.md gives
    item = cloud_items(cloud)[KEY]
    assert item["reason"] == "InsufficientInstanceCapacity"
    assert "claimedBy" not in item


def test_a_crashed_claimers_claim_blocks_only_until_it_expires(cloud):
    # Given worker A claimed an offering and died before EC2 answered (its claim never ended)
    clock = FakeClock()
    crashed = cache(cloud, clock=clock, claim_seconds=20)
    assert crashed.take_turn([KEY]).mine == {KEY}
    item = cloud_items(cloud)[KEY]
    assert item["reason"] == BEING_TRIED and int(item["expiresAt"]) == int(clock.now) + 20
    # When worker B wants the offering, waiting on the same clock
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    # (the service's loop waits, over the adapter's reads: issue 36)
    worker_b = cache(cloud, clock=clock, claim_seconds=20)
    turn = take_turn(worker_b, [KEY], clock=clock, pause=wait)
    # Then B claims it for itself once the claim's lifetime ran out, not before
    assert turn.mine == {KEY}
    assert 20 <= sum(waits) <= 22


def test_a_claim_is_not_an_entry_of_the_cache(cloud):
    # Given a claim held on an offering
    cache(cloud).take_turn([KEY])
    # Then readers of the cache's entries do not see it as unavailable
    assert KEY not in cache(cloud).current()
