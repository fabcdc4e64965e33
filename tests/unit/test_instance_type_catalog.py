"""The instance-type catalog asks EC2 only for what a request can use: the types its requirements
pin, where they are offered. DescribeInstanceTypeOfferings takes `location` and `instance-type`
filters (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html)."""

from __future__ import annotations

from typing import Any

import boto3

from capacity_launcher.adapters.instance_types import (
    MAX_PINNED_FILTER_VALUES,
    SYNC_ANSWERS_KEPT,
    InstanceTypeCatalog,
)

OFFERINGS = [
    (name, zone)
    for name in ("m5.large", "c5.large", "m5.xlarge", "p5.48xlarge")
    for zone in ("us-east-1a", "us-east-1b")
    if not (name == "p5.48xlarge" and zone == "us-east-1b")
]


def _answer(operation: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if operation == "describe_instance_types":
        names = kwargs.get("InstanceTypes") or sorted({n for n, _ in OFFERINGS})
        return {"InstanceTypes": [_facts(n) for n in names]}
    filters = {f["Name"]: f["Values"] for f in kwargs["Filters"]}
    return {
        "InstanceTypeOfferings": [
            {"InstanceType": name, "Location": zone, "LocationType": "availability-zone"}
            for name, zone in OFFERINGS
            if zone in filters["location"] and name in filters.get("instance-type", [name])
        ]
    }


def _facts(name: str) -> dict[str, Any]:
    return {
        "InstanceType": name,
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
    }


class _Ec2:
    # The service model a real client carries (the catalog reads EC2's list maximums from it).
    meta = boto3.client("ec2", region_name="us-east-1").meta

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def describe_instance_types(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(("describe_instance_types", kwargs))
        return _answer("describe_instance_types", kwargs)

    def describe_instance_type_offerings(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(("describe_instance_type_offerings", kwargs))
        return _answer("describe_instance_type_offerings", kwargs)

    def offering_filters(self) -> list[dict[str, list[str]]]:
        return [
            {f["Name"]: f["Values"] for f in kwargs["Filters"]}
            for operation, kwargs in self.requests
            if operation == "describe_instance_type_offerings"
        ]


def test_pinned_types_are_asked_for_by_name_with_their_zones() -> None:
    ec2 = _Ec2()

    found = InstanceTypeCatalog(ec2).offered(["us-east-1b", "us-east-1a"], ["p5.48xlarge"])

    assert [(f.name, sorted(f.zones)) for f in found] == [("p5.48xlarge", ["us-east-1a"])]
    assert ec2.offering_filters() == [
        {"location": ["us-east-1a", "us-east-1b"], "instance-type": ["p5.48xlarge"]}
    ]


def test_pinned_types_find_what_the_whole_listing_finds() -> None:
    names = ["c5.large", "m5.large", "r5.large"]  # r5.large is offered nowhere here

    pinned = InstanceTypeCatalog(_Ec2()).offered(["us-east-1a"], names)
    listed = [f for f in InstanceTypeCatalog(_Ec2()).offered(["us-east-1a"]) if f.name in names]

    assert pinned == listed
    assert [f.name for f in pinned] == ["c5.large", "m5.large"]


def test_without_pinned_types_the_zones_whole_listing_is_read_once() -> None:
    ec2 = _Ec2()
    catalog = InstanceTypeCatalog(ec2)

    catalog.offered(["us-east-1a"])
    catalog.offered(["us-east-1a"])

    assert ec2.offering_filters() == [{"location": ["us-east-1a"]}]


def test_a_warm_catalog_asks_again_only_for_other_pins() -> None:
    ec2 = _Ec2()
    catalog = InstanceTypeCatalog(ec2)

    catalog.offered(["us-east-1a"], ["m5.large"])
    catalog.offered(["us-east-1a"], ["m5.large"])
    catalog.offered(["us-east-1a"], ["c5.large"])

    assert [f["instance-type"] for f in ec2.offering_filters()] == [["m5.large"], ["c5.large"]]


def test_more_pinned_types_than_a_filter_takes_read_the_whole_listing() -> None:
    ec2 = _Ec2()
    names = [f"x{n}.large" for n in range(MAX_PINNED_FILTER_VALUES)] + ["m5.large"]

    found = InstanceTypeCatalog(ec2).offered(["us-east-1a"], names)

    assert [f.name for f in found] == ["m5.large"]
    assert ec2.offering_filters() == [{"location": ["us-east-1a"]}]


def test_more_types_than_a_call_takes_are_asked_for_in_several_calls() -> None:
    # DescribeInstanceTypes takes at most 100 InstanceTypes a call (EC2 API Reference,
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html).
    ec2 = _Ec2()
    names = [f"x{n}.large" for n in range(249)] + ["m5.large"]

    found = InstanceTypeCatalog(ec2).offered(["us-east-1a"], names)

    assert [f.name for f in found] == ["m5.large"]
    asked = [kw["InstanceTypes"] for op, kw in ec2.requests if op == "describe_instance_types"]
    assert [len(chunk) for chunk in asked] == [100, 100, 50]
    assert sorted(n for chunk in asked for n in chunk) == sorted(names)


def test_a_warm_catalog_answers_the_same_types_without_building_them_again() -> None:
    ec2 = _Ec2()
    catalog = InstanceTypeCatalog(ec2, answers_kept=SYNC_ANSWERS_KEPT)

    first = catalog.offered(["us-east-1a", "us-east-1b"])
    again = catalog.offered(["us-east-1b", "us-east-1a"])

    assert again == first and again is not first
    assert all(a is b for a, b in zip(again, first, strict=True))
    # and each answer is the caller's own list
    again.clear()
    assert catalog.offered(["us-east-1a", "us-east-1b"]) == first


def test_listings_read_again_are_built_again() -> None:
    clock = [0.0]
    ec2 = _Ec2()
    catalog = InstanceTypeCatalog(ec2, offerings_seconds=600, answers_kept=SYNC_ANSWERS_KEPT)
    catalog._offered._clock = lambda: clock[0]
    first = catalog.offered(["us-east-1a", "us-east-1b"])

    # When the offerings expire and p5.48xlarge is now offered in us-east-1b too
    OFFERINGS.append(("p5.48xlarge", "us-east-1b"))
    try:
        clock[0] = 601.0
        found = catalog.offered(["us-east-1a", "us-east-1b"])
    finally:
        OFFERINGS.remove(("p5.48xlarge", "us-east-1b"))

    # Then the answer is built from the listing read again
    assert len(ec2.offering_filters()) == 2
    p5 = next(f for f in found if f.name == "p5.48xlarge")
    assert p5.zones == frozenset({"us-east-1a", "us-east-1b"})
    assert next(f for f in first if f.name == "p5.48xlarge").zones == frozenset({"us-east-1a"})


def test_a_launcher_s_catalog_keeps_no_answer_built() -> None:
    catalog = InstanceTypeCatalog(_Ec2())

    first = catalog.offered(["us-east-1a"])
    again = catalog.offered(["us-east-1a"])

    assert again == first and not any(a is b for a, b in zip(again, first, strict=True))
