"""`make bench`: every scenario, bounded (minutes on 2 cores), written to docs/BENCHMARKS.md."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from benchmarks import (
    batching,
    burst,
    cold_start,
    ice_storm,
    plots,
    report,
    scaling,
    throughput,
    warm_overhead,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    points, syncs = scaling.run()
    results = report.Results(
        storm=ice_storm.run(),
        batching=batching.run(),
        cold_starts=cold_start.handlers(),
        import_steps=cold_start.import_steps(),
        layer=cold_start.layer_size(),
        warm=warm_overhead.run(),
        burst=burst.run(),
        scaling=(points, syncs),
        plots=plots.items_read(points, syncs, ROOT / "docs"),
        throughput=throughput.run(),
        healthy=burst.healthy(),
        load=(load_at_start, os.getloadavg()),
    )
    text = report.render(results, time.perf_counter() - started)
    (ROOT / "docs" / "BENCHMARKS.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
