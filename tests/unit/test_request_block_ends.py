"""Launch requests that opt in before a Capacity Block ends (domain/capacity/request_block_ends.py,
block_end_policy.RequestBlockEnd): the field read with errors naming it, bounded by the
NodePool's policy (the price is the pool's, never the requester's), and the pure decision per
block: one replacement per request, never into the block, the same on every run; one extension
within the pool's price; the block's instances let go only as the replacement runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from capacity_launcher.domain.capacity.block_end_policy import (
    CapacityBlockEnd,
    RequestBlockEnd,
    for_request,
    request_refusal,
)
from capacity_launcher.domain.capacity.block_ends import Noted
from capacity_launcher.domain.capacity.block_extensions import BlockExtensionOffering
from capacity_launcher.domain.capacity.request_block_ends import (
    BlockEndState,
    OptedIn,
    Replacement,
    opt_in,
    plan_block,
    policies,
    replacement_id,
    to_terminate,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.errors import InvalidLaunchRequest
from capacity_launcher.domain.launch_request import REQUEST_ID_PATTERN, parse_launch_request
from capacity_launcher.domain.records.status import (
    BLOCK_EVACUATING,
    BLOCK_EXTENSION_PURCHASED,
)

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
END = NOW + timedelta(minutes=90)
ENDS_AT = int(END.timestamp())
BLOCK = ReservationSnapshot(
    "cr-block", "p5.48xlarge", "us-east-1a", "active", 2, 0,
    reservation_type="capacity-block", end_date=END,
)  # fmt: skip
POOL_EXTEND = CapacityBlockEnd(action="Extend", max_extension_price=Decimal(500))
EVACUATE = RequestBlockEnd()
EXTEND = RequestBlockEnd(action="Extend")


def offering(offering_id: str, fee: str) -> BlockExtensionOffering:
    return BlockExtensionOffering(
        offering_id, "cr-block", "p5.48xlarge", 2, "us-east-1a", END, END + timedelta(days=1),
        24, Decimal(fee), "USD",
    )  # fmt: skip


def opted(request_id: str, ask: RequestBlockEnd, *instances: str) -> OptedIn:
    kept = opt_in(
        parse_launch_request(
            {
                "requestId": request_id,
                "count": len(instances),
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
                ],
                "priorityClassName": "high",
                "capacityBlockEnd": ask.model_dump(by_alias=True, exclude_none=True),
            }
        )
    )
    assert kept is not None
    return OptedIn(request_id, "train", "team-a", instances, kept, {"job": request_id})


def refused(body_field: object) -> str:
    with pytest.raises(InvalidLaunchRequest) as raised:
        parse_launch_request({"requestId": "r", "count": 1, "capacityBlockEnd": body_field})
    return str(raised.value)


def test_the_request_field_is_read_with_errors_naming_it():
    request = parse_launch_request(
        {"requestId": "r", "count": 1, "capacityBlockEnd": {"action": "Extend", "leadMinutes": 90}}
    )
    assert request.capacity_block_end == RequestBlockEnd(action="Extend", lead_minutes=90)
    assert parse_launch_request({"requestId": "r", "count": 1}).capacity_block_end is None
    assert refused({"action": "None"}).startswith("capacityBlockEnd.action:")
    assert refused({"leadMinutes": 30}).startswith("capacityBlockEnd.leadMinutes:")
    assert refused({"colour": "red"}).startswith("capacityBlockEnd.colour:")
    # The price and the length are the pool's: named, and said whose they are
    message = refused({"action": "Extend", "maxExtensionPrice": "1"})
    assert message.startswith("capacityBlockEnd: maxExtensionPrice cannot be set by a requester")
    assert "extendByHours" in refused({"extendByHours": 24})


def test_the_pool_bounds_what_a_request_may_ask():
    # No policy on the pool: a request may evacuate, not extend (no price was given)
    assert request_refusal(None, EVACUATE) is None
    assert (request_refusal(None, EXTEND) or "").startswith("capacityBlockEnd.action: Extend")
    # Evacuate: the same; None: nothing at all
    assert request_refusal(CapacityBlockEnd(), EXTEND) is not None
    none = CapacityBlockEnd(action="None")
    assert (request_refusal(none, EVACUATE) or "").startswith("capacityBlockEnd: ")
    # Extend: either, the price and length the pool's, the lead the request's if it says one
    assert request_refusal(POOL_EXTEND, EXTEND) is None
    followed = for_request(POOL_EXTEND, RequestBlockEnd(action="Extend", lead_minutes=90))
    assert followed is not None
    assert (followed.max_extension_price, followed.lead_minutes) == (Decimal(500), 90)
    assert for_request(POOL_EXTEND, EVACUATE) == CapacityBlockEnd(lead_minutes=120)
    assert for_request(none, EVACUATE) is None


def test_an_evacuating_request_gets_one_replacement_never_into_the_block():
    job = opted("job-1", EVACUATE, "i-2", "i-1")
    followed = policies([job], {"train": None})
    plan = plan_block(BLOCK, NOW, followed, BlockEndState(ENDS_AT))
    (made,) = plan.new
    assert made.replacement_id == replacement_id("job-1", "cr-block", ENDS_AT)
    assert made.replacement_id.startswith("job-1.evac-")
    body = made.body
    assert (body["nodePool"], body["count"], body["requester"]) == ("train", 2, "team-a")
    assert body["requirements"][-1] == {
        "key": "karpenter.k8s.aws/capacity-reservation-id",
        "operator": "NotIn",
        "values": ["cr-block"],
    }
    assert body["requirements"][0]["key"] == "karpenter.sh/capacity-type"
    assert (body["tags"], body["priorityClassName"]) == ({"job": "job-1"}, "high")
    assert body["capacityBlockEnd"] == {"action": "Evacuate"}
    parse_launch_request(body)  # an ordinary launch request
    (event,) = plan.events
    assert event.detail_type == BLOCK_EVACUATING
    assert (event.detail["requestId"], event.detail["replacementRequestId"]) == (
        "job-1",
        made.replacement_id,
    )
    assert event.detail["reason"] == "PolicyEvacuate"
    # Run again on what was noted: nothing new, nothing said
    again = plan_block(BLOCK, NOW + timedelta(minutes=1), followed, plan.state)
    assert (again.new, again.events, again.state) == ((), (), plan.state)


def test_nothing_is_done_before_the_lead_or_for_a_pool_that_refuses_now():
    job = opted("job-1", EVACUATE, "i-1")
    early = END - timedelta(hours=3)
    assert (
        plan_block(BLOCK, early, policies([job], {"train": None}), BlockEndState(ENDS_AT)).new == ()
    )
    assert policies([job], {"train": CapacityBlockEnd(action="None")}) == []
    assert policies([job], {}) == []  # its pool deleted


def test_an_extension_is_bought_once_within_the_pools_price():
    jobs = [opted("job-2", EXTEND, "i-2"), opted("job-1", EXTEND, "i-1")]
    followed = policies(jobs, {"train": POOL_EXTEND})
    offered = [offering("cheap", "400"), offering("dear", "600")]
    plan = plan_block(BLOCK, NOW, followed, BlockEndState(ENDS_AT), offered)
    assert plan.new == ()
    assert plan.purchase is not None and plan.purchase.offering == offered[0]
    assert plan.state.extension == Noted("Extend", ENDS_AT, "OfferingWithinPrice")
    assert plan.purchase_event is not None
    assert plan.purchase_event.detail_type == BLOCK_EXTENSION_PURCHASED
    assert plan.purchase_event.detail["requestIds"] == ["job-1", "job-2"]
    assert plan.purchase_event.detail["maxExtensionPrice"] == "500"
    # The next minute (its payment pending) buys nothing and waits
    again = plan_block(BLOCK, NOW + timedelta(minutes=1), followed, plan.state, None)
    assert (again.purchase, again.new) == (None, ())


def test_with_no_offering_within_the_price_the_extending_requests_evacuate():
    followed = policies(
        [opted("job-1", EXTEND, "i-1"), opted("job-2", EVACUATE, "i-2")], {"train": POOL_EXTEND}
    )
    plan = plan_block(BLOCK, NOW, followed, BlockEndState(ENDS_AT), [offering("dear", "600")])
    assert plan.purchase is None
    assert [r.request_id for r in plan.new] == ["job-1", "job-2"]
    reasons = {e.detail["requestId"]: e.detail["reason"] for e in plan.events}
    assert reasons == {"job-1": "NoOfferingWithinPrice", "job-2": "PolicyEvacuate"}


def test_the_blocks_instances_go_only_as_the_replacement_runs():
    made = Replacement("job-1", "job-1.evac-x", 3, {})
    inside = ["i-3", "i-1", "i-2"]
    assert to_terminate(made, inside, 0) == []
    assert to_terminate(made, inside, 2) == ["i-1", "i-2"]
    assert to_terminate(made, inside, 3) == ["i-1", "i-2", "i-3"]
    # Asked again once two went: the one kept stays
    assert to_terminate(made, ["i-3"], 2) == []


def test_a_replacements_id_is_a_request_id_whatever_the_originals_length():
    long = "a" * 128
    assert REQUEST_ID_PATTERN.match(replacement_id(long, "cr-block", ENDS_AT))
    assert replacement_id("r", "cr-block", ENDS_AT) != replacement_id("r", "cr-block", ENDS_AT + 1)


def test_a_replacement_stays_off_every_block_already_due_not_only_the_ending_one():
    # Given a second block ending with this one (due under the request's lead) and a third that
    # ends a day later (not due)
    job = opted("job-1", EVACUATE, "i-1")
    followed = policies([job], {"train": None})
    twin = ReservationSnapshot(
        "cr-twin", "p5.48xlarge", "us-east-1b", "active", 2, 0,
        reservation_type="capacity-block", end_date=END,
    )  # fmt: skip
    later = ReservationSnapshot(
        "cr-later", "p5.48xlarge", "us-east-1a", "active", 2, 2,
        reservation_type="capacity-block", end_date=END + timedelta(days=1),
    )  # fmt: skip
    # When the block's plan is made with every active block in view
    plan = plan_block(BLOCK, NOW, followed, BlockEndState(ENDS_AT), (), (BLOCK, later, twin))
    # Then the replacement may land in the later block, never in the two that end now
    (made,) = plan.new
    assert made.body["requirements"][-1]["values"] == ["cr-block", "cr-twin"]
    # and its id is the one a run that did not see the twin would make (the same request)
    assert made.replacement_id == replacement_id("job-1", "cr-block", ENDS_AT)
