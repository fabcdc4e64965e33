"""`make bench`: every scenario, bounded (minutes on 2 cores), written to docs/BENCHMARKS.md."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks import (
    batching,
    burst,
    client_reuse,
    cold_start,
    fresh_burst,
    ice_storm,
    offering_calls,
    plots,
    report,
    reservation_calls,
    scaling,
    sync_calls,
    throughput,
    wake_calls,
    warm_overhead,
)

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def main() -> int:
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    took: dict[str, float] = {}

    def timed(section: str, run: Callable[[], T]) -> T:
        began = time.perf_counter()
        try:
            return run()
        finally:
            took[section] = time.perf_counter() - began

    points, syncs = timed("scaling", scaling.run)
    sync_points = timed("sync calls", sync_calls.run)
    per_offering = timed("offering calls", offering_calls.run)
    per_reservation = timed("reservation calls", reservation_calls.run)
    fresh = timed("fresh burst", fresh_burst.run)
    results = report.Results(
        storm=timed("ICE storm", ice_storm.run),
        batching=timed("batching", batching.run),
        cold_starts=timed("cold start", cold_start.handlers),
        import_steps=timed("import steps", cold_start.import_steps),
        layer=timed("layer size", cold_start.layer_size),
        warm=timed("warm overhead", warm_overhead.run),
        burst=timed("burst", burst.run),
        scaling=(points, syncs),
        plots=timed("plots", lambda: plots.items_read(points, syncs, ROOT / "docs")),
        throughput=timed("throughput", throughput.run),
        healthy=timed("healthy pool", burst.healthy),
        sync_calls=sync_points,
        wake_calls=timed("wake calls", wake_calls.run),
        client_reuse=timed("client reuse", client_reuse.run),
        offering_calls=per_offering,
        reservation_calls=per_reservation,
        fresh_burst=fresh,
        call_plots=timed(
            "calls plots",
            lambda: plots.calls(per_offering, per_reservation, sync_points, fresh, ROOT / "docs"),
        ),
        load=(load_at_start, os.getloadavg()),
        took=took,
    )
    text = report.render(results, time.perf_counter() - started)
    (ROOT / "docs" / "BENCHMARKS.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
