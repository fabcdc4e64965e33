"""Before a Capacity Block ends (domain/capacity/block_ends.py): a static pool's
`capacityBlockEnd` validated, the choice per ending block (evacuate, buy the cheapest offering
within the price, wait on one bought, fall back), and the plan's evacuation (replacements first,
the block's instances only as they run, never over replicas outside the block)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pydantic import ValidationError

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.capacity.block_end_policy import CapacityBlockEnd
from capacity_launcher.domain.capacity.block_ends import (
    EXTENSION_PENDING,
    EXTENSION_UNPAID,
    NO_OFFERING,
    OVER_PRICE,
    POLICY_EVACUATE,
    TOO_LATE,
    WITHIN_PRICE,
    Noted,
    block_end_event,
    decide,
    due,
    wants_offerings,
)
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.capacity.static_pools import StaticMember, plan
from capacity_launcher.domain.records.status import (
    BLOCK_EVACUATING,
    BLOCK_EXTENSION_PURCHASED,
)

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
END = NOW + timedelta(minutes=90)
BLOCK = ReservationSnapshot(
    "cr-block", "p5.48xlarge", "us-east-1a", "active", 2, 0,
    reservation_type="capacity-block", end_date=END,
)  # fmt: skip
EXTEND = CapacityBlockEnd(action="Extend", lead_minutes=120, max_extension_price=Decimal(500))
EVACUATE = CapacityBlockEnd(lead_minutes=120)


def offering(offering_id: str, fee: str | None) -> BlockExtensionOffering:
    return BlockExtensionOffering(
        offering_id, "cr-block", "p5.48xlarge", 2, "us-east-1a", END, END + timedelta(days=1),
        24, None if fee is None else Decimal(fee), "USD",
    )  # fmt: skip


def test_the_policy_is_checked_field_by_field():
    assert EVACUATE.action == "Evacuate" and EVACUATE.extend_by_hours == 24
    with pytest.raises(ValidationError, match="maxExtensionPrice"):
        CapacityBlockEnd(action="Extend")
    with pytest.raises(ValidationError, match="24-hour steps"):
        CapacityBlockEnd(extend_by_hours=25)
    with pytest.raises(ValidationError, match="168-hour steps"):
        CapacityBlockEnd(extend_by_hours=360)
    assert CapacityBlockEnd(extend_by_hours=504).extend_by_hours == 504
    with pytest.raises(ValidationError, match=r"lead_minutes|leadMinutes"):
        CapacityBlockEnd(lead_minutes=30)  # too late to launch or to buy


def test_a_static_pool_and_a_dynamic_one_take_a_capacity_block_end():
    """On a static pool it is what the sync does; on a dynamic one, what its requests may opt
    in to (domain/capacity/request_block_ends.py)."""
    spec = {"nodeClassRef": "gpu", "capacityBlockEnd": {"action": "None"}}
    document = {"apiVersion": "capacity-launcher/v1", "kind": "NodePool", "metadata": {"name": "p"}}
    dynamic = NodePool.model_validate({**document, "spec": spec}).spec
    assert not dynamic.is_static and dynamic.capacity_block_end == CapacityBlockEnd(action="None")
    assert NodePool.model_validate({**document, "spec": {**spec, "replicas": 1}}).spec.is_static


def test_a_block_is_due_within_the_lead_of_its_end_only():
    assert due(EVACUATE, BLOCK, NOW)
    assert not due(EVACUATE, BLOCK, END - timedelta(hours=3))
    assert not due(None, BLOCK, NOW)
    assert not due(CapacityBlockEnd(action="None"), BLOCK, NOW)
    odcr = ReservationSnapshot("cr-odcr", "p5.48xlarge", "us-east-1a", "active", 2, 0, end_date=END)
    assert not due(EVACUATE, odcr, NOW)  # EC2 does not end an ODCR's instances early


def test_evacuate_is_decided_once_then_kept():
    first = decide(EVACUATE, BLOCK, NOW, None)
    assert (first.action, first.reason, first.new) == ("Evacuate", POLICY_EVACUATE, True)
    noted = Noted("Evacuate", int(END.timestamp()), POLICY_EVACUATE)
    again = decide(EVACUATE, BLOCK, NOW + timedelta(minutes=1), noted)
    assert (again.action, again.new) == ("Evacuate", False)


def test_extend_buys_the_cheapest_offering_within_the_price():
    offers = [offering("cbe-dear", "900"), offering("cbe-cheap", "400"), offering("cbe-?", None)]
    assert wants_offerings(EXTEND, BLOCK, NOW, None)
    chosen = decide(EXTEND, BLOCK, NOW, None, offers)
    assert (chosen.action, chosen.reason, chosen.new) == ("Extend", WITHIN_PRICE, True)
    assert chosen.offering is not None and chosen.offering.offering_id == "cbe-cheap"


@pytest.mark.parametrize(
    ("offers", "reason"),
    [
        ([offering("cbe-dear", "900")], OVER_PRICE),
        ([offering("cbe-unknown", None)], OVER_PRICE),  # a fee not stated is never cheap
        ([], NO_OFFERING),
    ],
)
def test_extend_with_nothing_within_the_price_evacuates(offers, reason):
    decision = decide(EXTEND, BLOCK, NOW, None, offers)
    assert (decision.action, decision.reason, decision.offering) == ("Evacuate", reason, None)


def test_an_extension_bought_is_waited_on_then_given_up_for_an_evacuation():
    noted = Noted("Extend", int(END.timestamp()), WITHIN_PRICE)
    # Nothing is read or bought again for the same end
    assert not wants_offerings(EXTEND, BLOCK, NOW, noted)
    waiting = decide(EXTEND, BLOCK, NOW, noted)
    assert (waiting.action, waiting.reason, waiting.new) == ("None", EXTENSION_PENDING, False)
    # Still unpaid with less than half the lead left: the pool evacuates
    late = decide(EXTEND, BLOCK, END - timedelta(minutes=59), noted)
    assert (late.action, late.reason, late.new) == ("Evacuate", EXTENSION_UNPAID, True)
    # EC2 refusing to offer (an extension payment-pending): waited on too
    assert decide(EXTEND, BLOCK, NOW, None, None).reason == EXTENSION_PENDING


def test_a_choice_for_an_earlier_end_is_stale_once_the_block_was_extended():
    earlier = Noted("Extend", int((END - timedelta(days=1)).timestamp()), WITHIN_PRICE)
    assert wants_offerings(EXTEND, BLOCK, NOW, earlier)
    assert decide(EXTEND, BLOCK, NOW, earlier, [offering("cbe-1", "10")]).action == "Extend"


def test_too_late_to_buy_evacuates():
    late = END - timedelta(minutes=59)
    assert not wants_offerings(EXTEND, BLOCK, late, None)
    assert decide(EXTEND, BLOCK, late, None).reason == TOO_LATE


def test_the_event_says_what_and_why():
    chosen = decide(EXTEND, BLOCK, NOW, None, [offering("cbe-1", "10.50")])
    event = block_end_event("gpu", BLOCK, chosen, ["i-2", "i-1"], EXTEND)
    assert event.detail_type == BLOCK_EXTENSION_PURCHASED
    assert event.detail["instances"] == ["i-1", "i-2"]
    assert (event.detail["upfrontFee"], event.detail["maxExtensionPrice"]) == ("10.50", "500")
    assert event.detail["instancesTerminatedAt"] == "2026-11-29T11:00:00.000Z"
    evacuate = block_end_event("gpu", BLOCK, decide(EVACUATE, BLOCK, NOW, None), [], EVACUATE)
    assert evacuate.detail_type == BLOCK_EVACUATING and "offeringId" not in evacuate.detail


def in_block(instance_id: str, at: str = "2026-01-01") -> StaticMember:
    return StaticMember(instance_id, "us-east-1a", "reserved", f"{at}T00:00:00+00:00", "cr-block")


def elsewhere(instance_id: str) -> StaticMember:
    return StaticMember(instance_id, "us-east-1b", "on-demand", "2026-02-01T00:00:00+00:00")


def test_an_evacuation_launches_replacements_then_lets_the_blocks_instances_go():
    zones = ("us-east-1a", "us-east-1b")
    # The block's 2 do not count: 2 replacements, nothing terminated yet
    start = plan(2, None, [in_block("i-1"), in_block("i-2")], [], zones, evacuating={"cr-block"})
    assert (len(start.launch), start.terminate) == (2, ())
    # One replacement running: one of the block's goes, and the other replacement is launched
    one = [in_block("i-1"), in_block("i-2"), elsewhere("i-3")]
    step = plan(2, None, one, [], zones, evacuating={"cr-block"})
    assert (len(step.launch), len(step.terminate)) == (1, 1)
    assert step.terminate[0] in {"i-1", "i-2"}
    # Both running: the block's last one goes, nothing launched
    both = [in_block("i-1"), elsewhere("i-3"), elsewhere("i-4")]
    assert plan(2, None, both, [], zones, evacuating={"cr-block"}).terminate == ("i-1",)
    # Without the evacuation the same pool is whole: nothing to do
    assert plan(2, None, [in_block("i-1"), in_block("i-2")], [], zones).idle


def test_an_evacuation_stays_within_the_pools_limit():
    members = [in_block("i-1"), in_block("i-2")]
    # limits.instances 3: room for one replacement only (the block's still count there)
    assert len(plan(2, 3, members, [], ("us-east-1b",), evacuating={"cr-block"}).launch) == 1
    # limits.instances 2: no room, the block's instances are kept until EC2 ends them
    assert plan(2, 2, members, [], ("us-east-1b",), evacuating={"cr-block"}).idle


def in_twin(instance_id: str, at: str) -> StaticMember:
    return StaticMember(instance_id, "us-east-1a", "reserved", f"{at}T00:00:00+00:00", "cr-twin")


def test_an_evacuations_replacements_avoid_every_block_already_due_so_the_pool_settles():
    # Given a pool of 3 with 2 elsewhere and 1 in its ending block, and a twin block bought
    # with it (due too) that holds nothing of the pool yet (block-end seed 2 at 40 steps)
    zones = ("us-east-1a",)
    due = ("cr-block", "cr-twin")
    members = [elsewhere("i-1"), elsewhere("i-2"), in_block("i-3")]
    # When the pool evacuates its block
    first = plan(3, None, members, [], zones, evacuating={"cr-block"}, due=due)
    # Then its replacement goes into neither block: where it lands is what the next minute counts
    assert (len(first.launch), first.terminate) == (1, ())
    assert set(first.avoid) == {"cr-block", "cr-twin"}
    # (landed in the twin it would count no more than the block's: the next minute's cut takes
    # it, the newest, and the fill sends another, a launch and a termination each minute)
    landed = [*members, in_twin("i-4", "2026-03-01")]
    again = plan(3, None, landed, [], zones, evacuating={"cr-block", "cr-twin"}, due=due)
    assert (len(again.launch), again.terminate) == (1, ("i-4",))
    # Landed outside both, it counts: the block's instance goes and nothing is launched
    settled = [*members, elsewhere("i-4")]
    done = plan(3, None, settled, [], zones, evacuating={"cr-block"}, due=due)
    assert (done.launch, done.terminate) == ((), ("i-3",))
    # and a pool that evacuates nothing keeps its launches where it always could
    assert plan(3, None, members[:2], [], zones, due=due).avoid == ()
