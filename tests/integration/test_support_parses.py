"""The tests' process parses EC2's large catalogue answers once (tests/support/process_caches.py
`remembered_parses`, open for the whole session): a cold container's listing of every instance
type, asked again by the next cold container, is handed a copy of the first parse."""

from __future__ import annotations

from typing import Any

import boto3
import botocore.parsers
import pytest

from tests.support.cloud import REGION, Cloud
from tests.support.process_caches import LARGE_BODY_BYTES


def _listing() -> dict[str, Any]:
    """Every instance type, as a new container's client reads them (its own session)."""
    ec2 = boto3.Session(region_name=REGION).client("ec2")
    answer: dict[str, Any] = ec2.describe_instance_types()
    return answer


@pytest.fixture
def parsed_xml(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every XML body botocore parses from now on."""
    sizes: list[int] = []
    original = botocore.parsers.BaseXMLResponseParser._parse_xml_string_to_dom

    def counted(parser: Any, body: bytes) -> Any:
        sizes.append(len(body))
        return original(parser, body)

    monkeypatch.setattr(botocore.parsers.BaseXMLResponseParser, "_parse_xml_string_to_dom", counted)
    return sizes


def test_a_catalogue_listing_is_parsed_once_and_each_reader_gets_its_own_copy(
    cloud: Cloud, parsed_xml: list[int]
) -> None:
    # Given a first listing of the region's instance types (its answer, a large body)
    first = _listing()
    assert len(first["InstanceTypes"]) > 1000
    parsed_xml.clear()
    # When another container lists them, and the first changes what it was given
    second = _listing()
    first["InstanceTypes"][0]["InstanceType"] = "changed.by-its-reader"
    third = _listing()
    # Then no large body was parsed again, and each got the same answer, its own copy of it
    assert [size for size in parsed_xml if size >= LARGE_BODY_BYTES] == []
    assert second["InstanceTypes"] == third["InstanceTypes"]
    assert second["InstanceTypes"][0]["InstanceType"] != "changed.by-its-reader"
    assert second["InstanceTypes"] is not third["InstanceTypes"]
    # with its own response's metadata (botocore adds it to each copy)
    assert second["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_zone_s_offerings_are_parsed_once(cloud: Cloud, parsed_xml: list[int]) -> None:
    """Each cold container and each sync lists its zones' offerings (178 KB for one zone)."""
    ec2 = boto3.Session(region_name=REGION).client("ec2")

    def offerings() -> dict[str, Any]:
        answer: dict[str, Any] = ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "location", "Values": ["us-east-1a"]}],
        )
        return answer

    first = offerings()
    parsed_xml.clear()
    second = offerings()
    assert second["InstanceTypeOfferings"] == first["InstanceTypeOfferings"]
    assert len(first["InstanceTypeOfferings"]) > 100
    assert parsed_xml == []


def test_a_small_answer_is_parsed_every_time(cloud: Cloud, parsed_xml: list[int]) -> None:
    ec2 = boto3.Session(region_name=REGION).client("ec2")
    for _ in range(2):
        ec2.describe_availability_zones()
    assert len(parsed_xml) == 2
