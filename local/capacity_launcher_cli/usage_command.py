"""`capacity-launcher usage`: usage by team over a range of days, as the sync rolled it up.

Instance-hours per requester, pool, capacity kind (reserved, block, on-demand, spot), instance
type and reservation; each reservation's paid, used and idle hours; the idle share attributed to
the teams that used the reservation (domain/accounting/team_usage.py states the rule); an
estimated cost only with `--prices FILE`, the operator's own price table.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from capacity_launcher.domain.accounting.team_usage import (
    PriceTable,
    UsageReport,
    price_table,
)
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.service import queries

if TYPE_CHECKING:  # rich loads when a table is made (views): -o json and csv never load it
    from rich.table import Table

CSV_COLUMNS = (
    "requester",
    "nodePool",
    "capacityType",
    "instanceType",
    "capacityReservationId",
    "instanceHours",
    "idleShareHours",
    "estimatedCost",
)


class UsageArgumentError(CapacityLauncherError):
    """A --since, --until or --prices the command cannot use: names the flag and the rule."""


def moment(flag: str, text: str) -> datetime:
    """A date (its midnight, UTC) or an ISO-8601 time (UTC when naive); --until's bare date
    means the end of that day."""
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageArgumentError(
            f"{flag} {text!r}: a date (2026-11-28) or an ISO-8601 time (2026-11-28T10:00:00Z)"
        ) from None
    found = found if found.tzinfo else found.replace(tzinfo=UTC)
    bare_date = len(text) == len("2026-11-28")
    return found + timedelta(days=1) if bare_date and flag == "--until" else found


def _prices(path: str | None) -> PriceTable | None:
    if path is None:
        return None
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise UsageArgumentError(f"--prices {path}: {error}") from None
    return price_table(document if document is not None else {})


def usage(args: argparse.Namespace, deployment: Deployment) -> int:
    prices = _prices(args.prices)
    reader = queries(deployment)
    now = reader.now()
    since = (
        moment("--since", args.since)
        if args.since
        else datetime.combine(now.date(), time(), tzinfo=UTC)
    )
    until = moment("--until", args.until) if args.until else now
    report = reader.usage_between(since, until, prices)
    if args.output == "json":
        print(json.dumps(report_json(report), indent=2))
    elif args.output == "csv":
        write_csv(report, sys.stdout)
    else:
        views.show(usage_table(report))
        views.show(reservation_table(report))
    return 0


def _hours(value: float) -> float:
    return round(value, 4)


def _cost(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def report_json(report: UsageReport) -> dict[str, Any]:
    return {
        "since": report.since.isoformat(),
        "until": report.until.isoformat(),
        "idleShareRule": (
            "a reservation's idle hours of a day are attributed to the requesters in proportion "
            "to their instance-hours in it that day; a day none of ours used it stays unattributed"
        ),
        "usage": [
            {
                "requester": r.requester,
                "nodePool": r.node_pool,
                "capacityType": r.capacity_kind,
                "instanceType": r.instance_type,
                "capacityReservationId": r.reservation_id,
                "instanceHours": _hours(r.instance_hours),
                "idleShareHours": _hours(r.idle_share_hours),
                "estimatedCost": _cost(r.estimated_cost),
            }
            for r in report.rows
        ],
        "reservations": [
            {
                "capacityReservationId": r.reservation_id,
                "reservationType": r.reservation_type,
                "instanceType": r.instance_type,
                "paidHours": _hours(r.paid_hours),
                "usedHours": _hours(r.used_hours),
                "usedByUsHours": _hours(r.ours_hours),
                "idleHours": _hours(r.idle_hours),
                "unattributedIdleHours": _hours(r.unattributed_idle_hours),
            }
            for r in report.reservations
        ],
        "estimatedCost": _cost(report.estimated_cost),
        "currency": "USD" if report.priced else None,
    }


def write_csv(report: UsageReport, stream: Any) -> None:
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in report_json(report)["usage"]:
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])


def usage_table(report: UsageReport) -> Table:
    from rich.table import Table

    columns = ["REQUESTER", "POOL", "CAPACITY", "TYPE", "RESERVATION", "HOURS", "IDLE SHARE"]
    if report.priced:
        columns.append("EST. COST (USD)")
    table = Table(
        title=f"Usage by team, {report.since.isoformat()} to {report.until.isoformat()}",
        title_justify="left",
        header_style="bold",
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for r in report.rows:
        cells = [
            r.requester or "-",
            r.node_pool or "-",
            r.capacity_kind,
            r.instance_type,
            r.reservation_id or "-",
            f"{r.instance_hours:.2f}",
            f"{r.idle_share_hours:.2f}",
        ]
        if report.priced:
            cells.append(_cost(r.estimated_cost) or "no price")
        table.add_row(*cells)
    return table


def reservation_table(report: UsageReport) -> Table:
    from rich.table import Table

    table = Table(title="Reservations", title_justify="left", header_style="bold")
    for column in ("ID", "KIND", "TYPE", "PAID", "USED", "USED BY US", "IDLE", "UNATTRIBUTED"):
        table.add_column(column, overflow="fold")
    for r in report.reservations:
        table.add_row(
            r.reservation_id,
            r.reservation_type,
            r.instance_type,
            f"{r.paid_hours:.2f}",
            f"{r.used_hours:.2f}",
            f"{r.ours_hours:.2f}",
            f"{r.idle_hours:.2f}",
            f"{r.unattributed_idle_hours:.2f}",
        )
    return table
