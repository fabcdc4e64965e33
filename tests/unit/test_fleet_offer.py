"""What one CreateFleet is asked for: the attempt's offerings ordered by what the request prefers
(a reservation's fit, then price, each family in turn), cut at the override limit after
ordering, and the cut named on the request's record (docs/placement.md, How an instance type is
chosen)."""

from __future__ import annotations

from capacity_launcher.domain.capacity.fleet import (
    MAX_OVERRIDES_PER_FLEET,
    LaunchTemplate,
    fleet_offer,
    fleet_request,
    preference_order,
)
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, Offering
from capacity_launcher.domain.capacity.planning import LaunchAttempt
from capacity_launcher.domain.capacity.reservations import ReservationUse
from capacity_launcher.domain.records.detail_limits import MAX_LEFT_OUT_NAMED
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus

ZONES = ("us-east-1a", "us-east-1b")
SIZES = (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("24xlarge", 96))
# 30 families x 4 sizes x 2 zones: 240 offerings, more than one CreateFleet may send.
FAMILIES = [f"{letter}{generation}" for letter in "cmr" for generation in range(1, 11)]
CATALOG = {
    f"{family}.{size}": InstanceTypeInfo(
        f"{family}.{size}", ("amd64",), vcpu, vcpu * 4096, zones=frozenset(ZONES)
    )
    for family in FAMILIES
    for size, vcpu in SIZES
}
SUBNETS = {zone: (f"subnet-{zone[-1]}",) for zone in ZONES}


def _attempt(names: list[str]) -> LaunchAttempt:
    # The catalog's order: by name, as DescribeInstanceTypes lists them.
    offerings = tuple(Offering(ON_DEMAND, name, zone) for name in sorted(names) for zone in ZONES)
    return LaunchAttempt(ON_DEMAND, offerings, count=1)


def test_the_cut_keeps_every_family_and_both_zones() -> None:
    attempt = _attempt(list(CATALOG))

    request = fleet_request(
        attempt,
        count=1,
        client_token="t",
        launch_template=LaunchTemplate("lt", ReservationUse("open")),
        subnets=SUBNETS,
        tags={},
    )

    overrides = request["LaunchTemplateConfigs"][0]["Overrides"]
    assert len(overrides) == MAX_OVERRIDES_PER_FLEET
    families = {o["InstanceType"].split(".")[0] for o in overrides}
    assert families == set(FAMILIES)  # in name order the cut kept 13 families of 30
    assert {o["AvailabilityZone"] for o in overrides} == set(ZONES)


def test_the_cheapest_size_of_each_family_comes_first() -> None:
    # "c1.24xlarge" sorts before "c1.large" by name; by size it is the dearest.
    ordered = preference_order(
        _attempt(["c1.24xlarge", "c1.large", "m1.xlarge"]).offerings, CATALOG
    )

    assert [(o.instance_type, o.zone) for o in ordered] == [
        ("c1.large", "us-east-1a"),
        ("m1.xlarge", "us-east-1a"),
        ("c1.large", "us-east-1b"),
        ("m1.xlarge", "us-east-1b"),
        ("c1.24xlarge", "us-east-1a"),
        ("c1.24xlarge", "us-east-1b"),
    ]


def test_offerings_a_reservation_fits_come_first() -> None:
    ordered = preference_order(
        _attempt(["c1.large", "r9.24xlarge"]).offerings,
        CATALOG,
        reserved_fit={("r9.24xlarge", "us-east-1b")},
    )

    assert (ordered[0].instance_type, ordered[0].zone) == ("r9.24xlarge", "us-east-1b")


def test_what_was_left_out_is_counted_and_named_within_its_bound() -> None:
    offer = fleet_offer(_attempt(list(CATALOG)), SUBNETS, CATALOG)

    record = offer.left_out_record()

    assert record is not None
    assert (record.offered, record.left_out) == (100, 140)
    assert record.override_limit == MAX_OVERRIDES_PER_FLEET
    # Types with no offering offered at all: the dearest sizes of most families.
    assert len(record.instance_types) == MAX_LEFT_OUT_NAMED
    assert all(name.endswith(("2xlarge", "24xlarge")) for name in record.instance_types)
    assert fleet_offer(_attempt(["c1.large"]), SUBNETS, CATALOG).left_out_record() is None


def test_the_record_carries_the_cut_as_an_additive_field() -> None:
    left_out = fleet_offer(_attempt(list(CATALOG)), SUBNETS, CATALOG).left_out_record()
    record = RequestRecord(
        request_id="r-1",
        status=RequestStatus.FULFILLED,
        requested=1,
        launched=1,
        received_at="2026-11-26T00:00:00Z",  # type: ignore[arg-type]
        finished_at="2026-11-26T00:00:01Z",  # type: ignore[arg-type]
        candidates_left_out=left_out,
    )

    detail = record.to_detail()

    assert detail["candidatesLeftOut"]["leftOut"] == 140
    assert detail["candidatesLeftOut"]["overrideLimit"] == MAX_OVERRIDES_PER_FLEET
    assert RequestRecord.from_detail(detail) == record
