"""A picture of the CloudWatch dashboard, for docs/: `python -m benchmarks.dashboard_picture`.

The widgets come from template.yaml's own DashboardBody (resolved with the parameters' defaults
and a stack named capacity-launcher), so the picture cannot drift from what is deployed: each
widget is drawn where the dashboard puts it (its 24-column grid), with its title, its series (one
per metric line; one per group of a Metrics Insights GROUP BY), its stacking, axis bounds and
horizontal annotations. The numbers are SAMPLE DATA, generated and labelled as such: no account
is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_cloud.template import _Scope, load_template, parameter_defaults, resolve

STACK = "capacity-launcher"
REGION = "us-east-1"
POINTS = 36  # three hours of 5-minute periods
DEFAULT_PICTURE = Path("docs") / "dashboard.png"
# Illustrative dimension values for GROUP BY series.
SAMPLE_GROUPS: Mapping[str, Sequence[str]] = {
    "nodePool": ("training", "batch", "general"),
    "requester": ("team-ml", "team-batch", "team-research"),
    "status": ("Fulfilled", "Failed", "Waiting"),
    "reservationId": ("cr-0a1b2c3d4e5f60001", "cr-0a1b2c3d4e5f60002"),
    "quota": ("team-ml", "team-batch"),
    "resource": ("cpu", "instances"),
}
# The value each dashboard variable is drawn as having been chosen (a property variable
# replaces its dimension's value in every metric row: the picture shows the rows as written).
SAMPLE_CHOICES: Mapping[str, str] = {"nodePool": "general", "requester": "team-ml"}
_GROUP_BY = re.compile(r"GROUP BY (.+)$")


@dataclass(frozen=True)
class Series:
    label: str
    metric: str


@dataclass(frozen=True)
class Panel:
    """One widget as the picture draws it."""

    title: str
    x: int
    y: int
    width: int
    height: int
    series: tuple[Series, ...]
    stacked: bool = False
    y_min: float | None = None
    y_max: float | None = None
    lines: tuple[tuple[str, float], ...] = ()


def dashboard_body(template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """template.yaml's DashboardBody, resolved as a stack named capacity-launcher would have it."""
    template = template or load_template()
    pattern, variables = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"][
        "Fn::Sub"
    ]
    queues = [
        name for name, r in template["Resources"].items() if r.get("Type") == "AWS::SQS::Queue"
    ]
    scope = _Scope(
        refs={**parameter_defaults(template), "AWS::Region": REGION, "AWS::StackName": STACK},
        attributes={(q, "QueueName"): f"{STACK}-{q}" for q in queues},
    )
    body: dict[str, Any] = json.loads(resolve({"Fn::Sub": [pattern, variables]}, scope))
    return body


def _row_series(row: Sequence[Any], previous: Sequence[Any]) -> list[Series]:
    """The series one `metrics` line draws: an expression's groups, or one metric."""
    options = row[-1] if row and isinstance(row[-1], dict) else {}
    if options.get("visible") is False:
        return []  # an input of an expression, not drawn
    if "expression" in options:
        expression = options["expression"]
        metric = re.search(r"\((\w+)\)", expression)
        name = metric.group(1) if metric else "expression"
        grouped = _GROUP_BY.search(expression)
        if not grouped:
            return [Series(str(options.get("label", name)), name)]
        keys = [k.strip() for k in grouped.group(1).split(",")]
        labels = [""]
        for key in keys:
            labels = [f"{a} {b}".strip() for a in labels for b in SAMPLE_GROUPS[key][:2]]
        return [Series(label, name) for label in labels]
    fields = [f for f in row if not isinstance(f, dict)]
    if fields and fields[0] == "...":
        fields = [*previous[: len(previous) - len(fields) + 1], *fields[1:]]
    label = options.get("label") or str(fields[-1])
    # Percentiles of one metric differ by their statistic: each is its own series.
    return [
        Series(label, f"{fields[1]}:{options['stat']}" if "stat" in options else str(fields[1]))
    ]


def panels(body: Mapping[str, Any]) -> list[Panel]:
    drawn = []
    for widget in body["widgets"]:
        properties = widget["properties"]
        series: list[Series] = []
        previous: Sequence[Any] = []
        for row in properties["metrics"]:
            series += _row_series(row, previous)
            if not isinstance(row[0], dict) and row[0] != "...":
                previous = [f for f in row if not isinstance(f, dict)]
        left = properties.get("yAxis", {}).get("left", {})
        drawn.append(
            Panel(
                title=properties["title"],
                x=widget["x"],
                y=widget["y"],
                width=widget["width"],
                height=widget["height"],
                series=tuple(series),
                stacked=bool(properties.get("stacked")),
                y_min=left.get("min"),
                y_max=left.get("max"),
                lines=tuple(
                    (a.get("label", ""), float(a["value"]))
                    for a in properties.get("annotations", {}).get("horizontal", [])
                ),
            )
        )
    return drawn


# Sample shapes by metric: (typical level, swing); ratios stay below their alarms mostly.
_SHAPES: Mapping[str, tuple[float, float]] = {
    "ReservationUtilization": (0.7, 0.25),
    "QuotaUsageOfNominal": (0.8, 0.4),
    "ApproximateAgeOfOldestMessage": (120.0, 240.0),
    "RequestLatency": (20.0, 30.0),
    "RequestLatency:p50": (8.0, 6.0),
    "RequestLatency:p90": (25.0, 15.0),
    "RequestLatency:p99": (60.0, 30.0),
    "RequestLatency:Maximum": (90.0, 40.0),
    "PoolUsageOfLimit": (0.6, 0.4),
    "LaunchDropped": (0.3, 1.0),
    "OldestWaitSeconds": (900.0, 1200.0),
    "OldestWaitSeconds:Maximum": (1600.0, 900.0),
}


def sample_values(series: Series, points: int = POINTS) -> list[float]:
    """Deterministic, plausible numbers for a series (the same picture on every run)."""
    seed = int(hashlib.sha256(series.label.encode()).hexdigest()[:8], 16)
    level, swing = _SHAPES.get(series.metric, (3.0, 3.0))
    phase = seed % 628 / 100
    values = []
    for i in range(points):
        noise = ((seed >> (i % 24)) & 7) / 7 - 0.5
        value = level + swing * (0.5 * math.sin(i / 5 + phase) + 0.3 * noise)
        values.append(max(value, 0.0))
    return values


def draw(body: Mapping[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = panels(body)
    rows = max(p.y + p.height for p in drawn)
    figure = plt.figure(figsize=(16, rows * 0.62))
    grid = figure.add_gridspec(rows, 24, hspace=2.2, wspace=1.6)
    for panel in drawn:
        axis = figure.add_subplot(
            grid[panel.y : panel.y + panel.height - 1, panel.x : panel.x + panel.width]
        )
        values = [sample_values(s) for s in panel.series]
        if panel.stacked:
            axis.stackplot(range(POINTS), *values, labels=[s.label for s in panel.series])
        else:
            for series, line in zip(panel.series, values, strict=True):
                axis.plot(range(POINTS), line, label=series.label)
        for label, value in panel.lines:
            axis.axhline(value, linestyle="--", color="red", linewidth=1)
            axis.annotate(label, (0, value), color="red", fontsize=7, va="bottom")
        axis.set_ylim(bottom=panel.y_min, top=panel.y_max)
        axis.set_title(panel.title, fontsize=9, loc="left")
        axis.tick_params(labelsize=7)
        axis.set_xticks([])
        axis.legend(fontsize=6, loc="upper left", ncol=2)
    chosen = ", ".join(
        f"{v.get('label', v['property'])}: {SAMPLE_CHOICES.get(v['property'], '?')}"
        for v in body.get("variables", [])
    )
    figure.suptitle(
        "capacity-launcher dashboard: SAMPLE DATA, not measurements "
        f"(widgets from template.yaml's DashboardBody; variables chosen: {chosen})",
        fontsize=11,
    )
    figure.subplots_adjust(left=0.04, right=0.98, top=0.95, bottom=0.02)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=72)
    plt.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    target = Path(args[0]) if args else DEFAULT_PICTURE
    print(draw(dashboard_body(), target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
