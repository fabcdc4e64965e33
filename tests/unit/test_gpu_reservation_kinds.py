"""Capacity Blocks and interruptible reservations in planning: their labels, their market."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from capacity_launcher.adapters.capacity_reservations import snapshot_from_ec2
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.reservation_snapshots import _item, _stored
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.candidates import find_candidates
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.fleet import LaunchTemplate, fleet_request
from capacity_launcher.domain.capacity.planning import LaunchPlan
from capacity_launcher.domain.capacity.requirements import Operator, Requirement
from capacity_launcher.domain.capacity.reservation_state import StoredReservation
from capacity_launcher.domain.capacity.reservations import (
    BLOCK,
    BLOCK_BOOT_MARGIN,
    BLOCK_TERMINATION_LEAD,
    FLEET_CAPACITY_TYPES,
    INTERRUPTIBLE,
    ORDINARY,
    ReservationSource,
    ReservedTarget,
    reservation_use,
)
from capacity_launcher.startup import system_clock
from tests.unit.test_planning import EVERYTHING, M5, ZONES, by_id, reservation

BLOCK_KW = {"reservation_type": "capacity-block"}


def requirement(key: str, operator: Operator, *values: str) -> Requirements:
    return Requirements.of([Requirement(key=key, operator=operator, values=list(values))])


TYPE_KEY = "karpenter.k8s.aws/capacity-reservation-type"
INTERRUPTIBLE_KEY = "karpenter.k8s.aws/capacity-reservation-interruptible"


def reserved_ids(requirements: Requirements, *sources: ReservationSource) -> list[str | None]:
    candidates = find_candidates(requirements, [M5], ZONES, ["reserved"], list(sources))
    return [o.reservation_id for o in candidates.all()]


def test_the_reservation_type_requirement_selects_blocks_or_ordinary_reservations():
    block = reservation("cr-block", 2, **BLOCK_KW)
    odcr = reservation("cr-odcr", 2)
    sources = by_id(block, odcr)
    assert reserved_ids(requirement(TYPE_KEY, Operator.IN, "capacity-block"), *sources) == [
        "cr-block"
    ]
    assert reserved_ids(requirement(TYPE_KEY, Operator.IN, "default"), *sources) == ["cr-odcr"]
    assert sorted(reserved_ids(EVERYTHING, *sources)) == ["cr-block", "cr-odcr"]  # type: ignore[type-var]


def test_an_interruptible_reservation_is_used_only_when_the_requirements_accept_it():
    lent = by_id(reservation("cr-lent", 2, interruptible=True))
    assert reserved_ids(EVERYTHING, *lent) == []
    assert reserved_ids(requirement(INTERRUPTIBLE_KEY, Operator.IN, "false"), *lent) == []
    assert reserved_ids(requirement(INTERRUPTIBLE_KEY, Operator.IN, "true"), *lent) == ["cr-lent"]
    assert reserved_ids(requirement(INTERRUPTIBLE_KEY, Operator.EXISTS), *lent) == ["cr-lent"]


def test_a_scheduled_block_is_not_launched_into():
    scheduled = reservation("cr-soon", 2, state="scheduled", **BLOCK_KW)
    candidates = find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], by_id(scheduled))
    assert candidates.all() == []
    assert [s.reason for s in candidates.skipped] == ["ReservationNotActive:scheduled"]


def test_a_block_is_not_launched_into_from_30_minutes_plus_the_boot_margin_before_its_end():
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks.html: EC2 begins
    terminating a block's instances 30 minutes before its end; a launch also needs
    BLOCK_BOOT_MARGIN of life, so from end - 45 min the block is skipped (BlockEnding) and its
    room is not counted for a request that may wait."""
    end = datetime(2026, 11, 26, 11, 30, tzinfo=UTC)
    block = by_id(reservation("cr-ending", 2, end_date=end, **BLOCK_KW))
    lead = BLOCK_TERMINATION_LEAD + BLOCK_BOOT_MARGIN
    assert lead == timedelta(minutes=45)

    before = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved"], block, now=end - lead - timedelta(seconds=1)
    )
    at = find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], block, now=end - lead)

    assert [o.reservation_id for o in before.all()] == ["cr-ending"]
    assert at.all() == [] and at.reserved_available() == 0
    assert [s.reason for s in at.skipped] == ["BlockEnding"]
    # An ordinary reservation with an end date is not a block: EC2 keeps its instances.
    odcr = by_id(reservation("cr-odcr", 2, end_date=end))
    assert find_candidates(EVERYTHING, [M5], ZONES, ["reserved"], odcr, now=end).all() != []


def test_a_group_of_mixed_kinds_becomes_one_attempt_per_market():
    group = ReservedTarget(group_arn="arn:aws:resource-groups:us-east-1:1:group/g")
    members = (reservation("cr-a", 1), reservation("cr-b", 2, **BLOCK_KW))
    candidates = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved"], [ReservationSource(group, members)]
    )
    plan = LaunchPlan(candidates, 3)
    first = plan.next_attempt()
    assert first is not None and first.target is not None
    assert (first.target.market, first.count) == ("capacity-block", 2)
    # A block is launched into by its own id, never through the group (capacity-blocks-launch).
    assert (first.target.reservation_id, first.target.group_arn) == ("cr-b", None)
    plan.record(first, [], [])
    second = plan.next_attempt()
    assert second is not None and second.target is not None
    assert (second.target.market, second.target.group_arn) == (None, group.group_arn)


def test_a_group_of_blocks_becomes_one_attempt_per_block_by_its_own_id():
    """EC2 Fleet launches into one Capacity Block, named by its reservation id
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html)."""
    group = ReservedTarget(group_arn="arn:aws:resource-groups:us-east-1:1:group/blocks")
    members = (reservation("cr-b1", 1, **BLOCK_KW), reservation("cr-b2", 2, **BLOCK_KW))
    candidates = find_candidates(
        EVERYTHING, [M5], ZONES, ["reserved"], [ReservationSource(group, members)]
    )
    plan = LaunchPlan(candidates, 3)
    targets = []
    while (attempt := plan.next_attempt()) is not None:
        assert attempt.target is not None
        targets.append((attempt.target.reservation_id, attempt.target.group_arn, attempt.count))
        assert [o.reservation_id for o in attempt.offerings] == [attempt.target.reservation_id]
        plan.record(attempt, [], [])
    assert targets == [("cr-b2", None, 2), ("cr-b1", None, 1)]


def _fleet(market_snapshot_kw: dict[str, object]) -> dict[str, object]:
    candidates = find_candidates(
        requirement(INTERRUPTIBLE_KEY, Operator.EXISTS),
        [M5],
        ZONES,
        ["reserved"],
        by_id(reservation("cr-1", 2, **market_snapshot_kw)),
    )
    attempt = LaunchPlan(candidates, 2).next_attempt()
    assert attempt is not None and attempt.target is not None
    use = reservation_use(_node_class(), attempt.target)
    return fleet_request(
        attempt,
        count=2,
        client_token="t",
        launch_template=LaunchTemplate("lt", use),
        subnets={"us-east-1a": ("s",)},
        tags={},
    )


def test_blocks_and_interruptible_reservations_launch_in_their_own_fleet_capacity_type():
    assert _fleet(BLOCK_KW)["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 2,
        "DefaultTargetCapacityType": "capacity-block",
    }
    assert _fleet({"interruptible": True})["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 2,
        "DefaultTargetCapacityType": "reserved-capacity",
    }
    assert _fleet({})["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"  # type: ignore[index]


def test_each_reserved_market_carries_the_options_botocores_create_fleet_model_gives_it():
    """botocore's CreateFleet: ReservedCapacityOptions goes with reserved-capacity (ReservationTypes
    interruptible-capacity-reservation), a Capacity Block fleet takes no options, and
    OnDemandOptions only an on-demand fleet (Karpenter's CreateFleetInputBuilder does the same)."""
    block = _fleet(BLOCK_KW)
    assert "OnDemandOptions" not in block and "ReservedCapacityOptions" not in block
    interruptible = _fleet({"interruptible": True})
    assert "OnDemandOptions" not in interruptible
    assert interruptible["ReservedCapacityOptions"] == {
        "ReservationTypes": ["interruptible-capacity-reservation"],
        "AllocationStrategy": "prioritized",
    }
    ordinary = _fleet({})
    assert ordinary["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    assert "ReservedCapacityOptions" not in ordinary


def test_the_launch_template_carries_the_market_of_its_target():
    created: list[dict[str, object]] = []

    class Ec2:
        def describe_launch_templates(self, **kwargs: object) -> dict[str, object]:
            return {"LaunchTemplates": []}

        def create_launch_template(self, **kwargs: object) -> None:
            created.append(kwargs)

    node_class = _node_class()
    templates = LaunchTemplates(ec2=Ec2(), ssm=object(), clock=system_clock)
    target = ReservedTarget(reservation_id="cr-1", market="capacity-block")
    templates.ensure(node_class, target)
    templates.ensure(node_class, ReservedTarget(reservation_id="cr-1"))
    data = [c["LaunchTemplateData"] for c in created]
    assert data[0]["InstanceMarketOptions"] == {"MarketType": "capacity-block"}  # type: ignore[index]
    assert "InstanceMarketOptions" not in data[1]  # type: ignore[operator]


def _node_class() -> NodeClass:
    return NodeClass.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "imageId": "ami-12345678",
                "subnetIds": ["subnet-1"],
                "securityGroupIds": ["sg-1"],
            },
        }
    )


def test_type_dates_and_interruptibility_are_read_from_ec2_and_kept_in_the_snapshot_store():
    start = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)
    end = datetime(2026, 11, 26, 11, 30, tzinfo=UTC)
    snapshot = snapshot_from_ec2(
        {
            "CapacityReservationId": "cr-1",
            "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-east-1a",
            "State": "scheduled",
            "ReservationType": "capacity-block",
            "Interruptible": False,
            "StartDate": start,
            "EndDate": end,
        }
    )
    assert (snapshot.reservation_type, snapshot.start_date, snapshot.end_date) == (
        "capacity-block",
        start,
        end,
    )
    assert snapshot.market == "capacity-block"
    lent = snapshot_from_ec2(
        {
            "CapacityReservationId": "cr-2",
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "Interruptible": True,
        }
    )
    assert (lent.reservation_type, lent.interruptible, lent.market) == (
        "default",
        True,
        "interruptible-capacity-reservation",
    )
    stored = _stored(_item(StoredReservation(snapshot)))
    assert stored.snapshot == snapshot


def test_get_reservations_shows_the_kind_and_dates():
    from rich.console import Console

    from capacity_launcher_cli import views

    start = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)
    block = reservation("cr-block", 2, start_date=start, end_date=start, **BLOCK_KW)
    lent = reservation("cr-lent", 1, interruptible=True)
    shown = views.reservation_json(block)
    assert (shown["reservationType"], shown["startDate"], shown["interruptible"]) == (
        "capacity-block",
        start.isoformat(),
        False,
    )
    console = Console(width=250, record=True)
    console.print(views.reservations([block, lent]))
    text = console.export_text()
    assert "capacity-block" in text and "2026-11-24 11:30" in text
    assert "default (interruptible)" in text


def test_each_kind_of_reservation_is_read_once_from_ec2s_two_fields_into_the_table() -> None:
    """EC2 says a reservation's kind in ReservationType and Interruptible; the snapshot reads its
    kind from them once, and the market, the fleet's capacity type and the early end come from
    the kind's row (a block is a block whatever Interruptible says)."""
    kinds = {
        ("default", False): ORDINARY,
        ("default", True): INTERRUPTIBLE,
        ("capacity-block", False): BLOCK,
        ("capacity-block", True): BLOCK,
    }
    for (reservation_type, interruptible), kind in kinds.items():
        snapshot = reservation(
            "cr-1", 2, reservation_type=reservation_type, interruptible=interruptible
        )
        assert snapshot.kind is kind
        assert snapshot.market == kind.market
    assert (ORDINARY.market, ORDINARY.ends_early) == (None, False)
    assert (BLOCK.market, BLOCK.ends_early) == ("capacity-block", True)
    assert (INTERRUPTIBLE.market, INTERRUPTIBLE.ends_early) == (
        "interruptible-capacity-reservation",
        False,
    )
    assert FLEET_CAPACITY_TYPES == {
        "capacity-block": "capacity-block",
        "interruptible-capacity-reservation": "reserved-capacity",
    }
