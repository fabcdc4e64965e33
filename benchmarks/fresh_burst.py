"""A burst of fresh launcher containers: the Describes each kind costs (issue 38).

20 new launcher containers (each its own adapters, every cache empty) wait at one barrier, then
each serves one request for one instance of the bench's pool (4 types in 2 zones: 8 on-demand
offerings, every one healthy). One reservation sync runs before the burst, as the minute's
schedule would have. Every call of the service's shared clients is counted by operation, the
sync's and the burst's apart (botocore's `provide-client-params`: once per API call).

The baseline is the revision before the shared resolution (`BASELINE`, extracted with `git
archive` into a temporary folder and measured in a child process over its own code), in the same
run on the same emulator: each fresh container resolved its NodeClass itself.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.fresh_burst
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CONTAINERS = 20
# The revision before the shared resolution: each fresh container resolved its NodeClass.
BASELINE = "5e4d773"
SERVICES = ("dynamodb", "ec2", "events", "sqs", "ssm", "resource-groups", "iam")
DESCRIBES = (
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeImages",
    "DescribeInstanceTypeOfferings",
    "DescribeInstanceTypes",
    "GetParameter",
)
GOAL_PER_KIND = 1  # issue 38: at most one Describe per kind for the whole burst


@dataclass(frozen=True)
class Run:
    burst: dict[str, int]  # the burst's calls, by operation
    sync: dict[str, int]  # the sync run's before it, by operation
    launched: int

    def describes(self, of: str = "burst") -> dict[str, int]:
        calls = self.burst if of == "burst" else self.sync
        return {op: calls.get(op, 0) for op in DESCRIBES}

    @property
    def total(self) -> int:
        return sum(self.burst.values())


@dataclass(frozen=True)
class Result:
    ours: Run
    baseline: Run
    baseline_label: str


@contextmanager
def _counting() -> Iterator[Counter[str]]:
    from capacity_launcher.adapters import aws

    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def note(model: Any, **_: Any) -> None:
        with lock:
            calls[model.name] += 1

    clients = [aws.client(s) for s in SERVICES]
    for made in clients:
        made.meta.events.register("provide-client-params", note, unique_id="fresh-burst")
    try:
        yield calls
    finally:
        for made in clients:
            made.meta.events.unregister("provide-client-params", unique_id="fresh-burst")


def measure(containers: int = CONTAINERS) -> Run:
    import moto_capacity
    from benchmarks.scene import apply_pool, bench_cloud, request

    with bench_cloud() as cloud:
        moto_capacity.set_consistency(0, 0)
        apply_pool(cloud)
        batches = [cloud.fresh_batch() for _ in range(containers)]
        with _counting() as sync_calls:
            cloud.adapters().reservation_sync().run()
        barrier = threading.Barrier(containers)
        failed: list[str] = []

        def serve(n: int) -> None:
            barrier.wait()
            failed.extend(cloud.send(request(f"fresh-{n}"), batch=batches[n]))

        with _counting() as calls:
            workers = [threading.Thread(target=serve, args=(n,)) for n in range(containers)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        assert not failed, failed
        launched = 0
        for n in range(containers):
            record = cloud.record(f"fresh-{n}")
            launched += record.launched if record is not None else 0
    return Run(dict(calls), dict(sync_calls), launched)


def _measure_in(root: Path) -> Run:
    """This file's measurement over `root`'s code (its layers, local, tests, benchmarks). The
    child imports only what the baseline's tree has: benchmarks/revisions.py is this run's."""
    from benchmarks.revisions import measured_in

    return Run(**measured_in(root, __file__))


def _baseline(revision: str) -> Run:
    from benchmarks.revisions import extracted

    with extracted(revision) as folder:
        return _measure_in(folder)


def run(baseline: str = BASELINE) -> Result:
    from benchmarks.revisions import REPO

    theirs = _baseline(baseline)
    ours = _measure_in(REPO)
    return Result(ours, theirs, f"{baseline} (before)")


def met(result: Result) -> bool:
    return all(n <= GOAL_PER_KIND for n in result.ours.describes().values())


def render(result: Result) -> str:
    # Imported here, not above: `_measure_in` runs this file over a baseline's tree, which may
    # have no benchmarks/markdown.py.
    from benchmarks import markdown

    ours, theirs = result.ours, result.baseline
    columns = (
        "calls",
        "this revision, the burst",
        "before, the burst",
        "ratio",
        "this revision, the sync run before it",
        "before, the sync run",
    )
    rows: list[tuple[object, ...]] = []
    for op in DESCRIBES:
        mine, before = ours.burst.get(op, 0), theirs.burst.get(op, 0)
        ratio = f"{mine / before:.2f}x" if before else "-"
        rows.append((op, mine, before, ratio, ours.sync.get(op, 0), theirs.sync.get(op, 0)))
    total_ratio = ours.total / theirs.total if theirs.total else 0.0
    rows.append(
        (
            "**AWS calls, all**",
            ours.total,
            theirs.total,
            f"{total_ratio:.2f}x",
            sum(ours.sync.values()),
            sum(theirs.sync.values()),
        )
    )
    rows.append(
        (
            "instances launched",
            f"{ours.launched} of {CONTAINERS}",
            f"{theirs.launched} of {CONTAINERS}",
            "",
            "",
            "",
        )
    )
    lines = markdown.table(columns, rows)
    lines += [
        "",
        "By operation, the burst, this revision: "
        + ", ".join(f"{k} {v}" for k, v in sorted(ours.burst.items()))
        + ".",
        "",
        "By operation, the burst, before: "
        + ", ".join(f"{k} {v}" for k, v in sorted(theirs.burst.items()))
        + ".",
    ]
    return "\n".join(lines)


def section(result: Result) -> list[str]:
    """The report's section (docs/BENCHMARKS.md)."""
    from benchmarks import markdown

    return markdown.section(
        "A burst of fresh containers: one resolution for all (issue 38)",
        f"`benchmarks/fresh_burst.py` (`python -m benchmarks.fresh_burst` runs it alone): "
        f"{CONTAINERS} new launcher containers (every cache empty) start together, each serving "
        "one request for one instance of the bench's pool (4 types in 2 zones, 8 healthy "
        "on-demand offerings), one reservation sync run before them as the minute's schedule "
        "would have; every call of the service's shared clients, by operation. Baseline, in the "
        f"same run: revision `{result.baseline_label.split()[0]}` (extracted with `git "
        "archive`), in which each fresh container resolved its NodeClass itself. The sync now "
        "resolves each NodeClass (subnets, security groups, images, the instance types offered "
        "in its zones) and stores it; a fresh container reads it in one Query "
        "(docs/architecture.md, *Shared resolution*). The class here names its subnets, image "
        "and security groups by id: no DescribeSecurityGroups or GetParameter either way.",
        render(result).splitlines(),
        "A fresh container makes one Query more (its class's resolution) and no Describe; the "
        "sync pays for the resolution once for every container: its subnets', security "
        "groups' and images' Describes, the classes' Query, the heads' BatchGetItem, the parts' "
        "BatchWriteItem and the head's PutItem when a class is due (every 120 s, or applied "
        "since), the instance types' and offerings' as its catalog expires (55 and 5 minutes); "
        "in the minutes between, the Query and the BatchGetItem only. In AWS, "
        "DescribeInstanceTypes pages by 100: about nine pages for a region's types, the sync's "
        "only, once an hour.",
    )


def main() -> int:
    if "--json" in sys.argv:
        print(json.dumps(asdict(measure())))
        return 0
    print("\n".join(section(run())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
