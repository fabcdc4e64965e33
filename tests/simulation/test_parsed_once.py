"""A large EC2 answer given again byte for byte is parsed once (process_caches.remembered_parses,
which every simulation world opens, as the test session does): each caller gets the same content
in objects of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import botocore.parsers
import botocore.session
import pytest

from tests.support.process_caches import (
    FINGERPRINT_BYTES,
    LARGE_BODY_BYTES,
    MOST_REMEMBERED_BODIES,
    _frozen,
    remembered_parses,
)


def _listing(count: int) -> bytes:
    items = "".join(
        f"<item><instanceType>t{n}.large</instanceType><currentGeneration>true</currentGeneration>"
        f"<vCpuInfo><defaultVCpus>{n % 64 + 1}</defaultVCpus></vCpuInfo>"
        "<processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures>"
        "</processorInfo></item>"
        for n in range(count)
    )
    return (
        '<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>r-1</requestId><instanceTypeSet>{items}</instanceTypeSet>"
        "</DescribeInstanceTypesResponse>"
    ).encode()


def _parse(body: bytes) -> Any:
    model = botocore.session.get_session().get_service_model("ec2")
    shape = model.operation_model("DescribeInstanceTypes").output_shape
    parser = botocore.parsers.create_parser("ec2")
    return parser.parse({"status_code": 200, "headers": {}, "body": body}, shape)


def test_a_large_answer_given_again_is_parsed_once_and_copied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses: list[int] = []
    original = botocore.parsers.QueryParser._do_parse

    def counted(self: Any, response: Any, shape: Any) -> Any:
        parses.append(len(response["body"]))
        return original(self, response, shape)

    monkeypatch.setattr(botocore.parsers.QueryParser, "_do_parse", counted)
    large, small = _listing(4000), _listing(3)
    assert len(large) >= LARGE_BODY_BYTES > len(small)
    with remembered_parses():
        # Given a large answer parsed once
        first = _parse(large)
        # When the same bytes come again, and a small answer twice
        second = _parse(large)
        _parse(small), _parse(small)
        # and another large answer
        other = _parse(_listing(4001))
    # Then the large one was parsed once, the small each time, the other on its own
    assert parses == [len(large), len(small), len(small), len(_listing(4001))]
    # and the second caller got the same content in objects of its own
    assert second == first and len(first["InstanceTypes"]) == 4000
    assert second["InstanceTypes"] is not first["InstanceTypes"]
    second["InstanceTypes"][0]["InstanceType"] = "changed"
    assert first["InstanceTypes"][0]["InstanceType"] == "t0.large"
    assert len(other["InstanceTypes"]) == 4001
    # and botocore's own parse is back afterwards
    assert botocore.parsers.QueryParser._do_parse is counted


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of each body botocore's own parse is asked for (under any memo opened after)."""
    found: list[int] = []
    original = botocore.parsers.QueryParser._do_parse

    def counted(self: Any, response: Any, shape: Any) -> Any:
        found.append(len(response["body"]))
        return original(self, response, shape)

    monkeypatch.setattr(botocore.parsers.QueryParser, "_do_parse", counted)
    return found


def test_a_body_of_the_same_length_and_ends_but_other_middle_is_parsed_for_itself(
    parses: list[int],
) -> None:
    large = _listing(4000)
    # Given two bodies alike in length and in their first and last bytes (one type's vCPUs
    # changed, in the middle)
    middle = large.index(b"<defaultVCpus>", len(large) // 2)
    changed = bytearray(large)
    changed[middle + len(b"<defaultVCpus>")] = ord("9")  # a one-digit count: 1..9, or 9x
    other = bytes(changed)
    assert len(other) == len(large) and other != large
    assert other[:FINGERPRINT_BYTES] == large[:FINGERPRINT_BYTES]
    assert other[-FINGERPRINT_BYTES:] == large[-FINGERPRINT_BYTES:]
    with remembered_parses():
        # When each is parsed, the first twice
        first, second, again = _parse(large), _parse(other), _parse(large)
    # Then each was parsed for itself (the first once more: the second took its place)
    assert parses == [len(large)] * 3
    assert first != second and again == first


def test_an_answer_asked_for_again_stays_while_others_come_and_go(parses: list[int]) -> None:
    catalogue = _listing(4000)
    with remembered_parses():
        # Given the catalogue parsed once
        _parse(catalogue)
        # When more other large answers than are kept come, each once, the catalogue asked for
        # again between them
        for n in range(MOST_REMEMBERED_BODIES + 1):
            _parse(_listing(4001 + n))
            _parse(catalogue)
    # Then the catalogue was parsed once
    assert parses.count(len(catalogue)) == 1


def test_a_copy_shares_its_equal_strings_and_nothing_else() -> None:
    large = _listing(4000)
    with remembered_parses():
        # Given a large answer parsed once
        first = _parse(large)
        # When the same bytes come twice again
        second, third = _parse(large), _parse(large)
    # Then each copy's equal strings are one object (a string cannot change)
    items = second["InstanceTypes"]
    assert items[0]["ProcessorInfo"]["SupportedArchitectures"][0] == "x86_64"
    assert (
        items[0]["ProcessorInfo"]["SupportedArchitectures"][0]
        is items[1]["ProcessorInfo"]["SupportedArchitectures"][0]
    )
    # and each dict and list is its own: a change to one copy is seen in no other
    items[1]["ProcessorInfo"]["SupportedArchitectures"].append("arm64")
    items[2]["VCpuInfo"]["DefaultVCpus"] = 99
    for other in (first, third):
        assert other["InstanceTypes"][1]["ProcessorInfo"]["SupportedArchitectures"] == ["x86_64"]
        assert other["InstanceTypes"][2]["VCpuInfo"]["DefaultVCpus"] == 3
    assert third == first


def test_an_answer_that_is_not_plain_data_is_copied_whole() -> None:
    # Given an answer holding a timestamp, bytes and a list met twice
    shared = ["a", "b"]
    answer = {"At": datetime(2026, 1, 2, tzinfo=UTC), "Blob": b"x", "One": shared, "Two": shared}
    # When it is frozen and thawed twice
    thaw, frozen = _frozen(answer)
    copy, again = thaw(frozen), thaw(frozen)
    # Then each copy is equal to it, of the same types, its lists its own
    assert copy == again == answer
    assert type(copy["At"]) is datetime and copy["One"] is not shared
    assert copy["One"] is copy["Two"] and copy["One"] is not again["One"]
