"""`describe`'s page: kubectl describe's layout of fields, nested fields and tables."""

from __future__ import annotations

import argparse

import pytest

from capacity_launcher.domain.errors import NotFound
from capacity_launcher_cli import describe_commands
from capacity_launcher_cli.describe import Rows, against, conditions, page


def test_a_page_aligns_fields_nests_mappings_and_prints_tables() -> None:
    text = page(
        [
            ("Name", "general"),
            ("API Version", "capacity-launcher/v1"),
            ("Labels", None),
            ("Spec", {"nodeClassRef": "general", "limits": {"cpu": "100"}}),
            ("Usage", against({"cpu": "100", "instances": "3"}, {"cpu": "4"})),
            ("Conditions", conditions([{"type": "Ready", "status": "True", "reason": "Ready"}])),
            ("Instances", Rows(("INSTANCE", "STATE"), [])),
        ]
    )
    assert text.splitlines() == [
        "Name:         general",
        "API Version:  capacity-launcher/v1",
        "Labels:       <none>",
        "Spec:",
        "  nodeClassRef:  general",
        "  limits:",
        "    cpu:  100",
        "Usage:",
        "  RESOURCE    LIMIT   USED",
        "  cpu         100     4",
        "  instances   3       0",
        "Conditions:",
        "  TYPE    STATUS   REASON   MESSAGE",
        "  Ready   True     Ready    -",
        "Instances:",
        "  <none>",
    ]


def test_an_unlimited_resource_in_use_shows_infinity_and_lists_show_as_items() -> None:
    assert against({}, {"gpu": "2"}).rows == [("gpu", "∞", "2")]
    assert page([("Requirements", [{"key": "zone", "values": ["a"]}, "x"])]).splitlines() == [
        "Requirements:",
        "  - key:  zone",
        "    values:",
        "      - a",
        "  - x",
    ]


def test_a_name_that_is_not_there_is_reported_as_get_and_kubectl_report_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(name: str, deployment: object) -> object:
        raise NotFound("request", name)

    monkeypatch.setitem(describe_commands._PAGES, "requests", missing)
    args = argparse.Namespace(resource="requests", name="nope")

    assert describe_commands.describe(args, deployment=None) == 1  # type: ignore[arg-type]
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        'Error from server (NotFound): requests "nope" not found\n',
    )
