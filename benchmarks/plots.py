"""The curves of docs/BENCHMARKS.md as PNGs in docs/ (matplotlib, no display needed): items read
per request and per sync run (`items_read`), AWS calls per request and per sync run (`calls`),
each beside the baseline revision measured in the same run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks import fresh_burst, offering_calls, reservation_calls
from benchmarks.scaling import BASELINE, Point, SyncPoint
from benchmarks.sync_calls import SyncCalls

# Four panels a row: every title stays legible at the page's width.
_COLUMNS = 4


def items_read(points: list[Point], syncs: list[SyncPoint], docs: Path) -> list[str]:
    """One panel per curve (log x): items read per request, cold and warm; the sync's cost."""
    curves = sorted({p.curve for p in points})
    figure, axes = _panels(len(curves) + 1)
    for axis, curve in zip(axes, curves, strict=False):
        mine = [p for p in points if p.curve == curve]
        axis.plot([p.size for p in mine], [p.cold for p in mine], "o-", label="cold container")
        axis.plot([p.size for p in mine], [p.warm for p in mine], "s--", label="warm container")
        before = [p for p in mine if p.before_cold is not None]
        if before:  # the baseline revision's, measured beside (benchmarks/scaling.py BASELINE)
            axis.plot(
                [p.size for p in before],
                [p.before_cold for p in before],
                "x:",
                label=f"cold, before ({BASELINE})",
            )
        axis.set_xscale("log")
        axis.set_title(f"per request vs\n{curve}")
        axis.set_xlabel(curve)
        axis.set_ylabel("DynamoDB items read")
        top = max(max(p.cold, p.before_cold or 0) for p in mine)
        axis.set_ylim(0, 1.5 * top)  # room for the legend
        axis.legend()
    last = axes[len(curves)]
    history = [s.past_requests for s in syncs]
    last.plot(history, [s.items_read for s in syncs], "o-", label="all")
    # Live work grows between points (each point's requests launch); the rest must stay flat.
    outside = [s.items_read - s.live_read for s in syncs]
    last.plot(history, outside, "s--", label="outside live work")
    last.set_xscale("log")
    last.set_ylim(0, 1.5 * max(s.items_read for s in syncs))
    last.legend()
    last.set_title("one sync run vs history")
    last.set_xlabel("past requests")
    last.set_ylabel("state-table items read")
    return [_saved(figure, docs / "bench-items-read.png")]


def calls(
    offerings: offering_calls.Result,
    reservations: reservation_calls.Result,
    syncs: Sequence[SyncCalls],
    burst: fresh_burst.Result,
    docs: Path,
) -> list[str]:
    """AWS calls, this revision beside the baseline's: a warm request against the offerings of
    its fleet and against the reservations it could use, each with its goal; one sync run
    against the reservations selected, nothing or a tenth changed; a burst of fresh containers'
    Describes by kind."""
    figure, axes = _panels(4)
    on_demand, reserved, sync, fresh = axes[:4]
    for curve, style in ((offerings.ours, "o-"), (offerings.baseline, "x:")):
        on_demand.plot(
            [p.offerings for p in curve.points],
            [p.total for p in curve.points],
            style,
            label=curve.label,
        )
    _goal(on_demand, offering_calls.GOAL_CALLS)
    _axes(on_demand, "a warm on-demand request vs\nthe offerings in its fleet", "offerings")
    for kind in reservation_calls.KINDS:
        for found, style, label in (
            (reservations.ours, "o-", kind),
            (reservations.baseline, "x:", f"{kind}, {reservations.baseline_label} (before)"),
        ):
            mine = sorted((p for p in found if p.kind == kind), key=lambda p: p.usable)
            reserved.plot([p.usable for p in mine], [p.total for p in mine], style, label=label)
    _goal(reserved, reservation_calls.GOAL_CALLS)
    _axes(
        reserved,
        "a warm request into a reservation vs\nthe reservations it could use",
        "usable reservations",
    )
    sizes = [p.reservations for p in syncs]
    for values, style, label in (
        ([p.unchanged for p in syncs], "o-", "nothing changed"),
        ([p.tenth_changed for p in syncs], "s--", "a tenth changed"),
        ([p.baseline_unchanged for p in syncs], "x:", "nothing changed, writing every snapshot"),
    ):
        sync.plot(sizes, values, style, label=label)
    sync.set_yscale("log")
    _axes(sync, "one sync run vs\nthe reservations it selects", "selected reservations")
    kinds = list(fresh_burst.DESCRIBES)
    at = range(len(kinds))
    width = 0.4
    ours, before = burst.ours.describes(), burst.baseline.describes()
    fresh.bar([x - width / 2 for x in at], [ours[k] for k in kinds], width, label="this revision")
    fresh.bar(
        [x + width / 2 for x in at],
        [before[k] for k in kinds],
        width,
        label=f"{burst.baseline_label} (before)",
    )
    _goal(fresh, fresh_burst.GOAL_PER_KIND)
    fresh.set_xticks(list(at), [k.removeprefix("Describe") for k in kinds], rotation=45)
    fresh.set_title(f"a burst of {fresh_burst.CONTAINERS} fresh containers:\nDescribes by kind")
    fresh.set_ylabel("AWS calls")
    fresh.set_ylim(0, 1.7 * max(*ours.values(), *before.values(), fresh_burst.GOAL_PER_KIND))
    fresh.legend(fontsize="small")
    return [_saved(figure, docs / "bench-calls.png")]


def _panels(count: int) -> tuple[Any, list[Any]]:
    """A figure of `count` panels, at most `_COLUMNS` a row; the cells left over hidden."""
    rows = -(-count // _COLUMNS)
    columns = min(count, _COLUMNS)
    figure, grid = plt.subplots(rows, columns, figsize=(4 * columns, 3.6 * rows), squeeze=False)
    cells = [axis for row in grid for axis in row]
    for spare in cells[count:]:
        spare.set_visible(False)
    return figure, cells


def _goal(axis: Any, calls: int) -> None:
    axis.axhline(calls, color="grey", linewidth=0.8, label=f"goal: {calls}")


def _axes(axis: Any, title: str, x: str) -> None:
    axis.set_xscale("log")
    if axis.get_yscale() == "linear":  # room above the curves for the legend
        axis.set_ylim(0, 1.7 * max(max(line.get_ydata()) for line in axis.get_lines()))
    axis.set_title(title)
    axis.set_xlabel(x)
    axis.set_ylabel("AWS calls")
    axis.legend(fontsize="small")


def _saved(figure: Any, path: Path) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path.name
