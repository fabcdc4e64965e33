"""`capacity-launcher top`: one screen an operator keeps open, refreshed in place.

What it shows, each from where the service keeps it: the launch queue (SQS attributes; the
oldest message's age from CloudWatch, which SQS reports only there), requests in flight (open
pool leases, and Waiting records from the sparse WaitingRequests index: no scan of history),
each NodePool's usage against its limits, each CapacityQuota's usage against its nominal quota,
reservations and Capacity Blocks with the time they have left, and the offerings the ICE cache
holds dry. Sized for a 100-column terminal.

`gather` reads (one pass, a handful of calls); `screen` lays it out (pure: tests render it).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from rich import box
from rich.console import Group, RenderableType
from rich.live import Live
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ACTIVE, ReservationSnapshot
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.domain.records.wait_gauges import total, wait_gauges
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.service import queries

# Longer than any wait for scheduled capacity (waitForCapacityUntil: at most 14 days).
WAITS_WITHIN = timedelta(days=15)
# Rows per section: the screen stays one screen; the rest is counted, never silently dropped.
SECTION_ROWS = 8
_QUEUE_ATTRIBUTES = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int
    delayed: int
    dead_letters: int
    oldest_age_seconds: float | None  # None: CloudWatch has no datapoint (always, locally)


@dataclass(frozen=True)
class TopView:
    """Everything one refresh shows."""

    observed_at: datetime
    where: str
    queue: QueueDepth
    leases: Sequence[Lease] = ()
    records: Sequence[RequestRecord] = ()  # Waiting requests
    pools: Sequence[NodePool] = ()
    pool_statuses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    quotas: Sequence[Mapping[str, Any]] = ()
    reservations: Sequence[ReservationSnapshot] = ()
    dry: Sequence[UnavailableEntry] = ()


def _queue_depth(deployment: Deployment) -> QueueDepth:
    sqs = deployment.client("sqs")
    launch = sqs.get_queue_attributes(
        QueueUrl=deployment.launch_queue_url, AttributeNames=_QUEUE_ATTRIBUTES
    )["Attributes"]
    dead = sqs.get_queue_attributes(
        QueueUrl=deployment.dead_letter_queue_url,
        AttributeNames=["ApproximateNumberOfMessages"],
    )["Attributes"]
    return QueueDepth(
        visible=int(launch.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(launch.get("ApproximateNumberOfMessagesNotVisible", 0)),
        delayed=int(launch.get("ApproximateNumberOfMessagesDelayed", 0)),
        dead_letters=int(dead.get("ApproximateNumberOfMessages", 0)),
        oldest_age_seconds=_oldest_age(deployment),
    )


def _oldest_age(deployment: Deployment) -> float | None:
    """SQS's ApproximateAgeOfOldestMessage for the launch queue, its latest 1-minute maximum."""
    name = deployment.launch_queue_url.rstrip("/").rsplit("/", 1)[-1]
    now = datetime.now(UTC)
    try:
        response = _oldest_age_query(deployment.client("cloudwatch"), name, now)
    except ClientError:  # no cloudwatch:GetMetricData for this caller: the rest still shows
        return None
    values = response["MetricDataResults"][0].get("Values", [])
    return float(values[0]) if values else None


def _oldest_age_query(cloudwatch: Any, name: str, now: datetime) -> Any:
    return cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "oldest",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": name}],
                    },
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=now - timedelta(minutes=10),
        EndTime=now,
        ScanBy="TimestampDescending",
    )


def gather(deployment: Deployment) -> TopView:
    asked = queries(deployment)
    pools, statuses = asked.pool_statuses()
    stored = asked.quota_status_of()
    quotas = [
        {**to_document(q), "status": stored[q.name]}
        for q in sorted(asked.config.capacity_quotas(), key=lambda q: q.name)
    ]
    return TopView(
        observed_at=datetime.now(UTC),
        where=deployment.stack_name or f"local cloud {deployment.endpoint_url}",
        queue=_queue_depth(deployment),
        leases=asked.open_leases(),
        # Every live wait (a wait lasts at most 14 days): one Query of the sparse index.
        records=asked.live_waits(WAITS_WITHIN),
        pools=pools,
        pool_statuses=statuses,
        quotas=quotas,
        reservations=asked.reservation_snapshots(),
        dry=asked.unavailable_offerings(),
    )


def duration(seconds: float | None) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`: short enough for a column, exact enough to act on."""
    if seconds is None:
        return "-"
    seconds = max(int(seconds), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def _section(title: str, *columns: str) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
    )
    for column in columns:
        table.add_column(column, overflow="ellipsis", no_wrap=True, max_width=44)
    return table


def _more(table: Table, shown: int, total: int) -> None:
    """Say how many rows did not fit, or that there are none."""
    if total == 0:
        table.add_row("[dim]none[/]")
    elif total > shown:
        table.caption = f"… {total - shown} more"
        table.caption_justify = "left"


def queue_line(queue: QueueDepth) -> Text:
    oldest = duration(queue.oldest_age_seconds) if queue.oldest_age_seconds is not None else "n/a"
    return Text.assemble(
        ("Launch queue ", "bold"),
        f"{queue.visible} waiting, {queue.in_flight} being served, {queue.delayed} delayed; "
        f"oldest {oldest}   ",
        ("Dead letters ", "bold"),
        (str(queue.dead_letters), "red bold" if queue.dead_letters else ""),
    )


def requests_section(view: TopView) -> Table:
    """Requests in flight: those launching (an open pool lease) and those waiting for scheduled
    capacity (the sparse WaitingRequests index), never a scan of history."""
    open_leases = [lease for lease in view.leases if not lease.settled]
    table = _section(
        f"Requests in flight: {len(open_leases)} launching, {len(view.records)} waiting",
        "REQUEST", "POOL", "REQUESTER", "STATE", "INSTANCES", "TIME LEFT",
    )  # fmt: skip
    now = view.observed_at.timestamp()
    for lease in open_leases[:SECTION_ROWS]:
        table.add_row(
            lease.lease_id, lease.pool, lease.requester or "-", "[cyan]Launching[/]",
            f"≤{lease.count}", f"lease {duration(lease.expires_at - now)}",
        )  # fmt: skip
    for record in view.records[: max(SECTION_ROWS - len(open_leases), 0)]:
        style = views.STATUS_STYLES.get(str(record.status), "")
        until = record.wait_for_capacity_until
        table.add_row(
            record.request_id, record.node_pool or "-", record.requester or "-",
            f"[{style}]{record.status}[/]" if style else str(record.status),
            f"{record.launched}/{record.requested}",
            f"wait {duration(until.timestamp() - now)}" if until else "-",
        )  # fmt: skip
    _more(table, SECTION_ROWS, len(open_leases) + len(view.records))
    return table


def waiting_section(view: TopView) -> Table:
    """How many requests each team has waiting and its oldest wait (the sync publishes the same
    figures as RequestsWaiting and OldestWaitSeconds): the most waiting first."""
    gauges = wait_gauges(view.records, view.observed_at)
    every = total(gauges)
    table = _section(
        f"Waiting by team: {every.waiting} waiting, oldest {duration(every.oldest_seconds)}"
        if gauges
        else "Waiting by team",
        "TEAM", "WAITING", "OLDEST WAIT",
    )  # fmt: skip
    table.min_width = 60  # the title on one line
    for gauge in gauges[:SECTION_ROWS]:
        table.add_row(gauge.team, str(gauge.waiting), duration(gauge.oldest_seconds))
    _more(table, SECTION_ROWS, len(gauges))
    return table


def pools_section(view: TopView) -> Table:
    table = _section("NodePools: used / limit", "POOL", "USED / LIMIT", "IN FLIGHT", "SUFFICIENT")
    in_flight = Counter(lease.pool for lease in view.leases if not lease.settled)
    for pool in view.pools[:SECTION_ROWS]:
        status = view.pool_statuses.get(pool.name, {})
        used = status.get("used", {})
        limits = pool.spec.limits.to_document() if pool.spec.limits else {}
        against = [f"{k} {used.get(k, 0)}/{limits.get(k, '∞')}" for k in {**limits, **used}]
        sufficient = next(
            (c for c in status.get("conditions", []) if c["type"] == "ResourcesSufficient"), None
        )
        table.add_row(
            pool.name,
            ", ".join(against) or "-",
            str(in_flight.get(pool.name, 0)),
            _condition(sufficient),
        )
    _more(table, SECTION_ROWS, len(view.pools))
    return table


def _condition(condition: Mapping[str, Any] | None) -> str:
    if condition is None:
        return "-"
    if condition["status"] == "True":
        return "[green]True[/]"
    return f"[red]False ({condition['reason']})[/]"


def quotas_section(view: TopView) -> Table:
    """Each quota's usage against its nominal quota, per NodePool and resource."""
    table = _section(
        "CapacityQuotas: used / nominal", "QUOTA", "POOL", "RESOURCE", "USED / NOMINAL", "BORROWED"
    )
    rows = [
        (document["metadata"]["name"], flavor, resource, nominal, used, borrowed)
        for document in view.quotas
        for flavor, resource, nominal, used, borrowed in _quota_rows(document["status"])
    ]
    for name, flavor, resource, nominal, used, borrowed in rows[:SECTION_ROWS]:
        table.add_row(name, flavor, resource, f"{used}/{nominal}", borrowed)
    _more(table, SECTION_ROWS, len(rows))
    return table


def _quota_rows(status: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    def totals(part: str) -> dict[tuple[str, str], str]:
        return {
            (f["name"], r["name"]): str(r["total"])
            for f in status.get(part, [])
            for r in f["resources"]
        }

    nominal, used, borrowed = totals("capacity"), totals("usage"), totals("borrowed")
    return [
        (
            flavor,
            resource,
            total,
            used.get((flavor, resource), "0"),
            borrowed.get((flavor, resource), "0"),
        )
        for (flavor, resource), total in nominal.items()
    ]


def reservations_section(view: TopView) -> Table:
    """Active and upcoming reservations, soonest to end first, with the time they have left."""
    table = _section(
        "Reservations and Capacity Blocks",
        "RESERVATION", "TYPE", "ZONE", "KIND", "STATE", "USED", "TIME LEFT",
    )  # fmt: skip
    live = live_reservations(view.reservations, view.observed_at)
    for r in live[:SECTION_ROWS]:
        table.add_row(
            r.reservation_id, r.instance_type, r.zone, views.reservation_kind(r),
            r.state + (" exhausted" if r.exhausted else ""),
            f"{r.total - r.available}/{r.total}", _time_left(r, view.observed_at),
        )  # fmt: skip
    _more(table, SECTION_ROWS, len(live))
    return table


def live_reservations(
    reservations: Sequence[ReservationSnapshot], now: datetime
) -> list[ReservationSnapshot]:
    """The active and upcoming reservations, the soonest to end first (open-ended ones last)."""
    live = [r for r in reservations if r.state == ACTIVE or r.upcoming]
    far = now + timedelta(days=36500)
    live.sort(key=lambda r: (r.end_date or far, r.reservation_id))
    return live


def time_left(r: ReservationSnapshot, now: datetime) -> str:
    """`starts in 2h05m`, `45m`, `no end`."""
    if r.upcoming and r.start_date is not None:
        return f"starts in {duration((r.start_date - now).total_seconds())}"
    if r.end_date is None:
        return "no end"
    return duration((r.end_date - now).total_seconds())


def _time_left(r: ReservationSnapshot, now: datetime) -> str:
    """`time_left`, in red under an hour before the end."""
    shown = time_left(r, now)
    starting = r.upcoming and r.start_date is not None
    if not starting and r.end_date is not None and (r.end_date - now).total_seconds() < 3600:
        return f"[red]{shown}[/]"
    return shown


def dry_section(view: TopView) -> Table:
    table = _section("Dry offerings (ICE cache)", "OFFERING", "REASON", "CLEARS IN")
    now = view.observed_at.timestamp()
    entries = sorted(view.dry, key=lambda e: e.expires_at)
    for entry in entries[:SECTION_ROWS]:
        table.add_row(entry.offering, entry.reason, duration(entry.expires_at - now))
    _more(table, SECTION_ROWS, len(entries))
    return table


def screen(view: TopView, interval: float | None = None) -> RenderableType:
    refresh = f", every {interval:g}s (Ctrl-C quits)" if interval else ""
    header = Text.assemble(
        ("capacity-launcher top", "bold"),
        f"  {view.where}  {view.observed_at.strftime('%H:%M:%S')} UTC{refresh}",
    )
    sections = (
        requests_section,
        waiting_section,
        pools_section,
        quotas_section,
        reservations_section,
        dry_section,
    )
    return Group(
        header,
        queue_line(view.queue),
        *(Padding(section(view), (1, 0, 0, 0)) for section in sections),
    )


def top(args: argparse.Namespace, deployment: Deployment) -> int:
    """Refresh in place until interrupted; once (`--once`, or output that is not a terminal)."""
    console = views.console()
    if args.once or not sys.stdout.isatty():
        # Rich pads each line to its table's width: a file or a pipe gets the text alone.
        with console.capture() as captured:
            console.print(screen(gather(deployment)))
        sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
        return 0
    # SIGTERM ends it as Ctrl-C does: the terminal's own screen comes back.
    signal.signal(signal.SIGTERM, _interrupt)
    with Live(console=console, screen=True, auto_refresh=False) as live:
        try:
            while True:
                live.update(screen(gather(deployment), args.interval), refresh=True)
                time.sleep(args.interval)
        except KeyboardInterrupt:
            pass
    return 0


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt
