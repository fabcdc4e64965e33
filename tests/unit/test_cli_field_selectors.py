"""`get requests --field-selector`: kubectl's field selectors on a request's record (issue 40:
"team X's failed requests today" without jq)."""

from __future__ import annotations

import argparse

import pytest

from capacity_launcher_cli import main
from capacity_launcher_cli.field_selectors import field_selector, selects

pytestmark = pytest.mark.unit

FAILED = {
    "requestId": "r-1",
    "status": "Failed",
    "requester": "team-x",
    "nodePool": "general",
    "errors": [{"code": "QuotaExceeded", "message": "..."}],
}
FULFILLED = {**FAILED, "requestId": "r-2", "status": "Fulfilled", "errors": []}
OTHER_TEAM = {**FAILED, "requestId": "r-3", "requester": "team-y"}


def chosen(text: str) -> list[str]:
    wanted = field_selector(text)
    return [d["requestId"] for d in (FAILED, FULFILLED, OTHER_TEAM) if selects(d, wanted)]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("status=Failed,requester=team-x", ["r-1"]),
        ("status==Failed", ["r-1", "r-3"]),
        ("status!=Failed", ["r-2"]),
        ("requester!=team-x", ["r-3"]),
        ("errors.code=QuotaExceeded,requester=team-y", ["r-3"]),
        ("errors.code!=QuotaExceeded", ["r-2"]),
        ("nodePool=general, requestId=r-2", ["r-2"]),
    ],
)
def test_each_requirement_must_hold(text: str, ids: list[str]) -> None:
    assert chosen(text) == ids


@pytest.mark.parametrize(
    ("text", "words"),
    [("team=x", "'team' is not a field"), ("status", "expected field=value")],
)
def test_a_field_no_selector_can_name_is_a_usage_error_naming_the_fields(
    text: str, words: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=words) as refused:
        field_selector(text)
    if "not a field" in words:
        assert "status, requester, nodePool" in str(refused.value)


def test_the_cli_refuses_a_field_selector_on_another_type() -> None:
    args = main.parser().parse_args(["get", "nodepools", "--field-selector", "status=Failed"])
    assert main._refused(args) == "--field-selector selects requests, not nodepools"
    args = main.parser().parse_args(["get", "requests", "--field-selector", "status=Failed"])
    assert main._refused(args) is None
