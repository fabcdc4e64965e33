"""The scaling curves as PNGs in docs/ (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.scaling import BASELINE, Point, SyncPoint


def items_read(points: list[Point], syncs: list[SyncPoint], docs: Path) -> list[str]:
    """One panel per curve (log x): items read per request, cold and warm; the sync's cost."""
    curves = sorted({p.curve for p in points})
    figure, axes = plt.subplots(1, len(curves) + 1, figsize=(4 * (len(curves) + 1), 3.5))
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
        axis.set_title(f"per request vs {curve}")
        axis.set_xlabel(curve)
        axis.set_ylabel("DynamoDB items read")
        top = max(max(p.cold, p.before_cold or 0) for p in mine)
        axis.set_ylim(0, 1.5 * top)  # room for the legend
        axis.legend()
    last = axes[-1]
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
    figure.tight_layout()
    name = "bench-items-read.png"
    figure.savefig(docs / name, dpi=80)
    plt.close(figure)
    return [name]
