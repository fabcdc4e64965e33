"""`capacity-launcher usage`: its flags, its three outputs, and a price table only when given."""

from __future__ import annotations

import argparse
import csv
import io
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.accounting.team_usage import (
    PriceTable,
    UsageBucket,
    reservation_window,
    usage_report,
)
from capacity_launcher_cli import usage_command
from capacity_launcher_cli.main import parser

NOW = datetime(2026, 11, 28, 15, 0, tzinfo=UTC)
DAY = date(2026, 11, 28)


class Reader:
    """The use case the command reads: a day of usage, whatever range is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[datetime, datetime, PriceTable | None]] = []

    def now(self) -> datetime:
        return NOW

    def usage_between(self, since: datetime, until: datetime, prices: PriceTable | None) -> Any:
        self.asked.append((since, until, prices))
        usage = {
            UsageBucket(DAY, "team-a", "gpu", "reserved", "m5.large", "cr-1"): 6.0,
            UsageBucket(DAY, "team-b", "gpu", "on-demand", "m5.large", None): 2.5,
        }
        reservation = reservation_window(
            "cr-1", "default", "m5.large", 2, 1, NOW - timedelta(hours=6), NOW
        )
        return usage_report(since, until, usage, [reservation], prices)


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Reader:
    found = Reader()
    monkeypatch.setattr(usage_command, "queries", lambda deployment: found)
    return found


def run(*argv: str) -> tuple[int, argparse.Namespace]:
    args = parser().parse_args(["usage", *argv])
    return usage_command.usage(args, None), args  # type: ignore[arg-type]


def test_csv_has_one_row_per_team_pool_kind_and_type(reader, capsys):
    code, _ = run("-o", "csv")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert code == 0
    assert [(r["requester"], r["capacityType"], r["instanceHours"]) for r in rows] == [
        ("team-a", "reserved", "6.0"),
        ("team-b", "on-demand", "2.5"),
    ]
    # paid 12, used 6 in cr-1: its 6 idle hours are team-a's, the only team that used it
    assert rows[0]["idleShareHours"] == "6.0"
    assert rows[0]["estimatedCost"] == ""


def test_json_states_the_idle_rule_and_no_cost_without_prices(reader, capsys):
    run("-o", "json")
    answer = json.loads(capsys.readouterr().out)
    assert answer["estimatedCost"] is None and answer["currency"] is None
    assert "in proportion" in answer["idleShareRule"]
    [reservation] = answer["reservations"]
    assert (reservation["paidHours"], reservation["usedHours"], reservation["idleHours"]) == (
        12.0,
        6.0,
        6.0,
    )


def test_prices_from_a_file_cost_only_what_they_price(reader, capsys, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("onDemand:\n  m5.large: 0.096\n", encoding="utf-8")
    run("-o", "json", "--prices", str(prices))
    answer = json.loads(capsys.readouterr().out)
    costs = {u["requester"]: u["estimatedCost"] for u in answer["usage"]}
    assert costs == {"team-a": None, "team-b": "0.24"}
    assert answer["estimatedCost"] == "0.24"


def test_the_table_marks_what_the_prices_do_not_price(reader, capsys, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"onDemand": {"m5.large": 0.096}}', encoding="utf-8")
    run("--prices", str(prices))
    out = capsys.readouterr().out
    assert "no price" in out and "team-b" in out and "cr-1" in out


def test_since_and_until_default_to_today_and_a_bare_until_date_is_its_whole_day(reader):
    run()
    assert reader.asked[-1][:2] == (datetime(2026, 11, 28, tzinfo=UTC), NOW)
    run("--since", "2026-11-01", "--until", "2026-11-02")
    assert reader.asked[-1][:2] == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 11, 3, tzinfo=UTC),
    )
    run("--since", "2026-11-01T06:00:00Z", "--until", "2026-11-01T07:30:00")
    assert reader.asked[-1][:2] == (
        datetime(2026, 11, 1, 6, tzinfo=UTC),
        datetime(2026, 11, 1, 7, 30, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--since", "yesterday"), "--since 'yesterday'"),
        (("--prices", "/nonexistent/prices.yaml"), "--prices /nonexistent/prices.yaml"),
    ],
)
def test_a_bad_flag_is_an_error_naming_it(reader, argv, named):
    with pytest.raises(usage_command.UsageArgumentError) as error:
        run(*argv)
    assert named in str(error.value)
