"""Planning: candidate offerings, their order, and how attempts learn (no AWS at all)."""

from __future__ import annotations

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.candidates import find_candidates
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.fleet import LaunchTemplate, fleet_request
from capacity_launcher.domain.capacity.image_architectures import ImageArchitecture
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import Offering, offering_key
from capacity_launcher.domain.capacity.planning import Landed, LaunchPlan
from capacity_launcher.domain.capacity.requirements import Operator, Requirement
from capacity_launcher.domain.capacity.reservations import (
    ReservationSnapshot,
    ReservationSource,
    ReservationUse,
    ReservedTarget,
)
from capacity_launcher.domain.records.intents import LaunchIntent, Share, allocate, client_token

ZONES = ("us-east-1a", "us-east-1b")
M5 = InstanceTypeInfo("m5.large", ("amd64",), 2, 8192, zones=frozenset(ZONES))
C5 = InstanceTypeInfo("c5.large", ("amd64",), 2, 4096, zones=frozenset(ZONES))
P5 = InstanceTypeInfo(
    "p5.48xlarge", ("amd64",), 192, 2097152, 8, "h100", "nvidia", frozenset(ZONES)
)
EVERYTHING = Requirements.of([])


def reservation(rid: str, available: int, **kw: object) -> ReservationSnapshot:
    fields = {"instance_type": "m5.large", "zone": "us-east-1a", "state": "active", "total": 4}
    fields.update(kw)
    return ReservationSnapshot(reservation_id=rid, available=available, **fields)  # type: ignore[arg-type]


def by_id(*reservations: ReservationSnapshot) -> list[ReservationSource]:
    return [
        ReservationSource(ReservedTarget(reservation_id=r.reservation_id), (r,))
        for r in reservations
    ]


def test_offering_keys_follow_the_ice_cache_contract():
    assert offering_key("on-demand", "m5.large", "us-east-1a") == "on-demand:m5.large:us-east-1a"
    assert offering_key("spot", "m5.large", "us-east-1a") == "spot:m5.large:us-east-1a"
    assert (
        offering_key("reserved", "m5.large", "us-east-1a", "cr-0123456789abcdef0")
        == "reserved:cr-0123456789abcdef0"
    )


def test_reserved_offerings_come_first_then_spot_then_on_demand_by_price():
    candidates = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved", "on-demand", "spot"], by_id(reservation("cr-1", 2))
    )
    kinds = [o.capacity_type for o in candidates.all()]
    assert kinds == ["reserved", "spot", "spot", "on-demand", "on-demand"]


def test_a_full_or_inactive_reservation_is_skipped_with_its_reason():
    full = reservation("cr-full", 0)
    cancelled = reservation("cr-gone", 3, state="cancelled")
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], by_id(full, cancelled))
    assert candidates.reserved == []
    assert {(s.offering.reservation_id, s.reason) for s in candidates.skipped} == {
        ("cr-full", "ReservationCapacityExceeded"),
        ("cr-gone", "ReservationNotActive:cancelled"),
    }


def test_a_reservation_outside_the_node_class_zones_or_requirements_is_not_a_candidate():
    elsewhere = reservation("cr-far", 2, zone="us-west-2a")
    gpu = reservation("cr-gpu", 2, instance_type="p5.48xlarge")
    only_m5 = Requirements.of(
        [
            Requirement(
                key="node.kubernetes.io/instance-type", operator=Operator.IN, values=("m5.large",)
            )
        ]
    )
    candidates = find_candidates(only_m5, [M5, P5], ZONES, ["reserved"], by_id(elsewhere, gpu))
    assert not candidates and candidates.skipped == []


def test_dropping_cached_offerings_remembers_why():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [])
    usable = candidates.drop({"on-demand:m5.large:us-east-1a": "InsufficientInstanceCapacity"})
    assert [o.zone for o in usable.on_demand] == ["us-east-1b"]
    assert [(s.offering.zone, s.reason) for s in usable.skipped] == [
        ("us-east-1a", "InsufficientInstanceCapacity")
    ]


def test_a_capacity_type_cached_alone_drops_every_offering_of_that_type():
    candidates = find_candidates(EVERYTHING, [M5, C5], ZONES, ["on-demand", "spot"], [])
    usable = candidates.drop({"spot": "AuthFailure.ServiceLinkedRoleCreationNotPermitted"})
    assert usable.spot == [] and usable.on_demand == candidates.on_demand
    assert {s.reason for s in usable.skipped} == {
        "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
    }
    assert len(usable.skipped) == len(candidates.spot) == 4


def test_limits_are_sized_by_the_largest_candidate():
    candidates = find_candidates(EVERYTHING, [C5, P5], ZONES, ["on-demand"], [])
    largest = candidates.largest()
    assert (largest.cpu, largest.memory_mib, largest.gpu) == (192, 2097152, 8)


def test_a_reserved_attempt_asks_only_for_what_the_reservation_has():
    candidates = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved", "on-demand"], by_id(reservation("cr-1", 2))
    )
    plan = LaunchPlan(candidates, 5)
    first = plan.next_attempt()
    assert first is not None and first.capacity_type == "reserved" and first.count == 2
    assert first.target == ReservedTarget(reservation_id="cr-1")
    plan.record(first, [Landed("m5.large", "us-east-1a")] * 2, [])
    second = plan.next_attempt()
    assert second is not None and second.capacity_type == "on-demand" and second.count == 3


def test_offerings_that_ran_dry_are_not_offered_again():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 2)
    first = plan.next_attempt()
    assert first is not None
    plan.record(first, [], [Offering("on-demand", "m5.large", "us-east-1a")])
    second = plan.next_attempt()
    assert second is not None
    assert [o.zone for o in second.offerings] == ["us-east-1b"]


def test_attempts_are_bounded():
    candidates = find_candidates(EVERYTHING, [M5, C5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 10, max_attempts=2)
    for _ in range(2):
        attempt = plan.next_attempt()
        assert attempt is not None
        plan.record(
            attempt, [Landed(attempt.offerings[0].instance_type, attempt.offerings[0].zone)], []
        )
    assert plan.next_attempt() is None


def test_an_attempt_that_launches_nothing_and_blames_nothing_ends_that_capacity_type():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand", "spot"], [])
    plan = LaunchPlan(candidates, 1)
    first = plan.next_attempt()
    assert first is not None and first.capacity_type == "spot"
    plan.record(first, [], [])
    second = plan.next_attempt()
    assert second is not None and second.capacity_type == "on-demand"


def test_single_zone_keeps_every_attempt_in_the_zone_of_the_first_launch():
    candidates = find_candidates(EVERYTHING, [M5, C5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 4, single_zone=True)
    first = plan.next_attempt()
    assert first is not None and first.zones == {"us-east-1a"}
    plan.record(
        first, [Landed("m5.large", "us-east-1a")], [Offering("on-demand", "c5.large", "us-east-1a")]
    )
    second = plan.next_attempt()
    assert second is not None and second.zones == {"us-east-1a"}


def test_single_zone_moves_on_when_a_zone_is_dry_before_anything_launched():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 2, single_zone=True)
    first = plan.next_attempt()
    assert first is not None and first.zones == {"us-east-1a"}
    plan.record(first, [], [Offering("on-demand", "m5.large", "us-east-1a")])
    second = plan.next_attempt()
    assert second is not None and second.zones == {"us-east-1b"}


def test_fleet_request_has_one_override_per_type_and_subnet_with_its_zone():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [])
    attempt = LaunchPlan(candidates, 3).next_attempt()
    assert attempt is not None
    request = fleet_request(
        attempt,
        count=3,
        client_token="cl-x",
        launch_template=LaunchTemplate("lt", ReservationUse("open")),
        subnets={"us-east-1a": ("subnet-a1", "subnet-a2"), "us-east-1b": ("subnet-b",)},
        tags={"capacity-launcher:managed": "true"},
    )
    overrides = request["LaunchTemplateConfigs"][0]["Overrides"]
    # Every offering's first subnet before any offering's second (a cut drops subnets first).
    assert [(o["SubnetId"], o["AvailabilityZone"]) for o in overrides] == [
        ("subnet-a1", "us-east-1a"),
        ("subnet-b", "us-east-1b"),
        ("subnet-a2", "us-east-1a"),
    ]
    assert request["Type"] == "instant" and request["ClientToken"] == "cl-x"
    assert request["TargetCapacitySpecification"]["OnDemandTargetCapacity"] == 3
    assert request["OnDemandOptions"] == {
        "AllocationStrategy": "lowest-price",
        "CapacityReservationOptions": {"UsageStrategy": "use-capacity-reservations-first"},
    }


def test_reserved_fleets_follow_our_order_and_spot_uses_price_capacity_optimized():
    reserved = find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], by_id(reservation("cr-1", 1)))
    attempt = LaunchPlan(reserved, 1).next_attempt()
    assert attempt is not None
    kwargs = {
        "count": 1,
        "client_token": "t",
        "launch_template": LaunchTemplate("lt", ReservationUse("none")),
        "subnets": {"us-east-1a": ("s",)},
        "tags": {},
    }
    assert fleet_request(attempt, **kwargs)["OnDemandOptions"] == {
        "AllocationStrategy": "prioritized"
    }  # type: ignore[arg-type]
    spot = LaunchPlan(find_candidates(EVERYTHING, [M5], ZONES, ["spot"], []), 1).next_attempt()
    assert spot is not None
    request = fleet_request(spot, **kwargs)  # type: ignore[arg-type]
    assert request["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"


def test_an_intent_is_split_over_requests_in_order_and_the_token_is_deterministic():
    shares = allocate(4, [("a", 1), ("b", 2), ("c", 5)])
    assert [(s.request_id, s.count) for s in shares] == [("a", 1), ("b", 2), ("c", 1)]
    assert client_token(["a", "b"], 1) == client_token(["a", "b"], 1)
    assert client_token(["a", "b"], 1) != client_token(["a", "b"], 2)
    assert len(client_token(["x" * 128] * 10, 9)) <= 64


# --- placement: availability, zones that hold a gang, flexibility ---------------------------------


def test_reservations_with_the_most_available_come_first():
    small, large = reservation("cr-small", 1), reservation("cr-large", 3)
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], by_id(small, large))

    order = [source.target.reservation_id for source, _ in candidates.reserved]

    assert order == ["cr-large", "cr-small"]


def test_a_single_zone_gang_goes_to_the_zone_that_can_hold_it():
    # us-east-1a has one reserved slot and no on-demand left; us-east-1b has on-demand.
    candidates = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved", "on-demand"], by_id(reservation("cr-1", 1))
    ).drop({"on-demand:m5.large:us-east-1a": "InsufficientInstanceCapacity"})
    plan = LaunchPlan(candidates, 3, single_zone=True, min_count=3)

    attempt = plan.next_attempt()

    assert attempt is not None
    assert attempt.zones == {"us-east-1b"}
    assert attempt.count == 3


def test_among_zones_that_hold_the_gang_the_reserved_one_wins():
    candidates = find_candidates(
        EVERYTHING,
        [M5],
        ZONES,
        ["reserved", "on-demand"],
        by_id(reservation("cr-b", 3, zone="us-east-1b")),
    )
    plan = LaunchPlan(candidates, 3, single_zone=True, min_count=3)

    attempt = plan.next_attempt()

    assert attempt is not None
    assert (attempt.capacity_type, attempt.zones) == ("reserved", {"us-east-1b"})


def test_a_zone_that_falls_short_of_min_count_is_abandoned_for_the_next():
    candidates = find_candidates(
        EVERYTHING,
        [M5],
        ZONES,
        ["reserved", "on-demand"],
        by_id(reservation("cr-a", 3, zone="us-east-1a")),
    )
    plan = LaunchPlan(candidates, 3, single_zone=True, min_count=3)
    first = plan.next_attempt()
    assert first is not None and first.zones == {"us-east-1a"}
    plan.record(first, [Landed("m5.large", "us-east-1a")], [])
    on_demand_a = plan.next_attempt()
    assert on_demand_a is not None and on_demand_a.zones == {"us-east-1a"}
    plan.record(on_demand_a, [], on_demand_a.offerings)  # dry in us-east-1a

    assert plan.next_attempt() is None
    assert plan.zone_short
    plan.abandon_zone()
    retry = plan.next_attempt()

    assert retry is not None
    assert (retry.zones, retry.count) == ({"us-east-1b"}, 3)


def test_a_zone_that_reached_min_count_is_kept():
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 3, single_zone=True, min_count=1)
    attempt = plan.next_attempt()
    assert attempt is not None
    plan.record(attempt, [Landed("m5.large", next(iter(attempt.zones)))], [])

    while (more := plan.next_attempt()) is not None:
        plan.record(more, [], more.offerings)

    assert not plan.zone_short


def test_zone_rollbacks_are_bounded():
    three = ("us-east-1a", "us-east-1b", "us-east-1c")
    m5 = InstanceTypeInfo("m5.large", ("amd64",), 2, 8192, zones=frozenset(three))
    plan = LaunchPlan(
        find_candidates(EVERYTHING, [m5], three, ["on-demand"], []),
        2,
        single_zone=True,
        min_count=2,
        max_zones=2,
        max_attempts=10,
    )
    abandoned = 0
    while (attempt := plan.next_attempt()) is not None or plan.zone_short:
        if attempt is None:
            plan.abandon_zone()
            abandoned += 1
            continue
        plan.record(attempt, [Landed("m5.large", next(iter(attempt.zones)))], attempt.offerings)

    assert abandoned == 1


def min_values(key: str, n: int) -> Requirements:
    return Requirements.of([Requirement(key=key, operator=Operator.EXISTS, min_values=n)])


def test_an_on_demand_attempt_offers_at_least_min_values_instance_types():
    flexible = min_values("node.kubernetes.io/instance-type", 2)
    candidates = find_candidates(flexible, [M5, C5], ZONES, ["on-demand"], [])
    plan = LaunchPlan(candidates, 2, requirements=flexible)

    attempt = plan.next_attempt()

    assert attempt is not None
    assert {o.instance_type for o in attempt.offerings} == {"m5.large", "c5.large"}
    assert plan.refusals == []


def test_an_attempt_that_would_break_min_values_is_refused_with_a_reason():
    flexible = min_values("node.kubernetes.io/instance-type", 2)
    candidates = find_candidates(flexible, [M5, C5], ZONES, ["on-demand"], []).drop(
        {f"on-demand:c5.large:{zone}": "InsufficientInstanceCapacity" for zone in ZONES}
    )
    plan = LaunchPlan(candidates, 2, requirements=flexible)

    assert plan.next_attempt() is None
    (refusal,) = plan.refusals
    assert "minValues=2" in refusal and "1 distinct value (m5.large)" in refusal


def test_reserved_attempts_are_not_held_to_min_values():
    flexible = min_values("node.kubernetes.io/instance-type", 2)
    candidates = find_candidates(
        flexible, [M5, C5], ZONES, ["reserved"], by_id(reservation("cr-1", 2))
    )
    plan = LaunchPlan(candidates, 2, requirements=flexible)

    attempt = plan.next_attempt()

    assert attempt is not None and attempt.capacity_type == "reserved"


M6G = InstanceTypeInfo("m6g.large", ("arm64",), 2, 8192, zones=frozenset(ZONES))


def test_an_image_architecture_leaves_out_the_types_that_cannot_run_it():
    # Given an arm64 image, and requirements admitting x86 and arm64 types
    arm64 = ImageArchitecture("ami-0123456789abcdef0", "arm64")
    # When candidates are found
    candidates = find_candidates(
        EVERYTHING, [C5, M6G, M5], ZONES, ["on-demand"], [], image_architecture=arm64
    )
    # Then only the arm64 type is offered, and the x86 ones are named as unable to run it
    assert {o.instance_type for o in candidates.all()} == {"m6g.large"}
    assert [i.name for i in candidates.cannot_run_image] == ["c5.large", "m5.large"]


def test_a_mac_image_runs_on_no_type_and_the_refusal_says_so():
    # Given a Mac image (Mac hosts are not launched here) and an x86 type allowed
    mac = ImageArchitecture("ami-0123456789abcdef0", "x86_64_mac")
    # When candidates are found
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["on-demand"], [], image_architecture=mac)
    # Then nothing is offered, and the refusal names the image's architecture and the type
    assert not candidates
    node_class = NodeClass.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "macs"},
            "spec": {
                "imageId": "ami-0123456789abcdef0",
                "subnetIds": ["subnet-0123456789abcdef0"],
                "securityGroupIds": ["sg-0123456789abcdef0"],
            },
        }
    )
    message = mac.refusal(node_class, "general", candidates.cannot_run_image)
    assert message.startswith("NodeClass macs: spec.imageId ami-0123456789abcdef0 is built for ")
    assert "x86_64_mac" in message and "m5.large (amd64)" in message
    assert "no instance type for that architecture" in message


def test_a_reserved_intent_names_its_one_reservation():
    def intent(capacity_type: str, *offerings: str) -> LaunchIntent:
        return LaunchIntent("t", 1, capacity_type, (Share("r", 1),), {}, offerings)

    assert intent("reserved", "reserved:cr-1", "reserved:cr-1").reservation_id == "cr-1"
    assert intent("reserved", "reserved:cr-1", "reserved:cr-2").reservation_id is None
    assert intent("on-demand", "on-demand:m5.large:us-east-1a").reservation_id is None
