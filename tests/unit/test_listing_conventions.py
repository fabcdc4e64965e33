"""kubectl's listing conventions: an empty listing prints nothing on stdout and says
"No resources found" on stderr; a listing with rows prints them."""

from __future__ import annotations

import pytest

from capacity_launcher_cli import views
from capacity_launcher_cli.main import parser


def test_an_empty_listing_says_no_resources_found_on_stderr_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    views.show(views.unavailable_offerings([]))
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "No resources found\n"


def test_a_listing_with_rows_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    table = views.unavailable_offerings([])
    table.add_row("spot:m5.large:us-east-1a", "InsufficientInstanceCapacity", "-", "10s")
    views.show(table)
    out, err = capsys.readouterr()
    assert "spot:m5.large:us-east-1a" in out
    assert err == ""


def test_delete_takes_ignore_not_found() -> None:
    args = parser().parse_args(["delete", "nodepool", "gone", "--ignore-not-found"])
    assert args.ignore_not_found is True
    assert parser().parse_args(["delete", "nodepool", "gone"]).ignore_not_found is False
