"""moto's request ids in answers' bodies (moto_capacity/core/request_ids.py): a body that cannot
hold a `<RequestId>` is not searched for one, and every answer is finished as moto finishes it."""

import re
from collections.abc import Callable
from typing import Any

import pytest
from moto.core.responses import BaseResponse

from moto_capacity.core import request_ids
from moto_capacity.ec2.responses import listings

BODIES: list[Any] = [
    "",
    '{"Items": [{"pk": {"S": "a"}}]}',
    "<DescribeInstancesResponse><requestId>old</requestId></DescribeInstancesResponse>",
    "<R><ResponseMetadata><RequestId>old</RequestId></ResponseMetadata></R>",
    "<RequestId></RequestId>\n<RequestId>a</RequestId><x/><RequestId>b</RequestId>",
    "<RequestId>no end\n</RequestId>",
    b"<RequestId>bytes</RequestId>",
    None,
]


def _mo_tos_own(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
    """moto's own `_enrich_response`, as the extension found it."""
    original: Callable[..., Any] = _ORIGINAL["enrich"]
    return original(headers, body)


_ORIGINAL: dict[str, Any] = {}


@pytest.fixture
def motos_enrich() -> None:
    hooked = BaseResponse.__dict__["_enrich_response"]
    assert hooked.__func__.__module__ == request_ids.__name__
    # The replacement closes over moto's function: found there, as the hook was given it.
    (cell,) = [c for c in hooked.__func__.__closure__ if callable(c.cell_contents)]
    _ORIGINAL["enrich"] = cell.cell_contents
    assert _ORIGINAL["enrich"] is not hooked.__func__


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_every_body_is_finished_as_moto_finishes_it(body: Any, motos_enrich: None) -> None:
    ours_headers, ours = BaseResponse._enrich_response({"status": 200}, body)
    motos_headers, motos = _mo_tos_own({"status": 200}, body)
    # (the request id is a new random one each time: each body is compared with its own)
    assert ours == _with_id(motos, motos_headers, ours_headers["x-amzn-requestid"])
    assert ours_headers.keys() == motos_headers.keys()
    assert ours_headers["status"] == motos_headers["status"] == "200"


def _with_id(body: Any, headers: dict[str, str], request_id: str) -> Any:
    if isinstance(body, str):
        return body.replace(headers["x-amzn-requestid"], request_id)
    return body


def test_a_listing_of_every_instance_type_is_not_searched_for_a_request_id(
    aws_client: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ec2 = aws_client("ec2")
    searched: list[int] = []
    original = re.sub

    def counted(pattern: Any, repl: Any, string: Any, *args: Any, **kwargs: Any) -> Any:
        if "RequestId" in str(pattern):
            searched.append(len(string))
        return original(pattern, repl, string, *args, **kwargs)

    monkeypatch.setattr(re, "sub", counted)
    # When every instance type is listed (5.8 MB of EC2's XML, whose element is `requestId`)
    types = ec2.describe_instance_types()["InstanceTypes"]
    # Then the answer is whole, and its body was not searched for a `<RequestId>` (moto finishes
    # the headers on an empty body)
    assert len(types) > 1000
    assert [length for length in searched if length] == []


def test_a_kept_listing_is_searched_for_a_request_id_once(
    aws_client: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto_capacity gives a catalogue listing it keeps again as the same text
    (ec2/responses/listings.py): searched when it is kept, not at each answer."""
    ec2 = aws_client("ec2")
    monkeypatch.setattr(listings, "_CATALOGUE_ANSWERS", {})
    searched: list[int] = []
    original = request_ids.holds_an_id

    def counted(body: str) -> bool:
        searched.append(len(body))
        return original(body)

    monkeypatch.setattr(request_ids, "holds_an_id", counted)
    # When every instance type is listed three times
    listed = [ec2.describe_instance_types()["InstanceTypes"] for _ in range(3)]
    # Then each answer is whole, and the listing's 5.8 MB were searched once
    assert listed[0] == listed[1] == listed[2] and len(listed[0]) > 1000
    assert len([length for length in searched if length > 1_000_000]) == 1
