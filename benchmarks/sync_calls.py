"""The reservation sync's AWS calls per run against the reservations its NodeClasses select, with
nothing changed since the last run and with a tenth of them changed (issue 38).

The baseline, measured in the same run on the same emulator, is the sync writing every selected
snapshot each minute whether it changed or not (what it did before `domain.reservations.unchanged`):
the same code with that test answering "changed" always.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.sync_calls
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import moto_capacity
from benchmarks.scene import apply_pool, bench_cloud
from capacity_launcher.adapters import aws
from capacity_launcher.service import reservation_sync, wiring
from capacity_launcher.settings import get_settings
from tests.support.cloud import Cloud

RESERVATIONS = (10, 100, 1_000)
TAG = {"bench": "sync-calls"}
SERVICES = ("dynamodb", "ec2", "events", "resource-groups", "iam")


@dataclass(frozen=True)
class SyncCalls:
    reservations: int
    # Calls of one run with nothing changed, and with a tenth of the reservations changed.
    unchanged: int
    tenth_changed: int
    baseline_unchanged: int
    baseline_tenth_changed: int
    writes: int
    baseline_writes: int


@contextmanager
def _counting() -> Iterator[Counter[str]]:
    """Every API call of the service's shared clients, by operation, while inside."""
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    clients = [aws.client(name) for name in SERVICES]
    for c in clients:
        c.meta.events.register("before-call.*.*", note)
    try:
        yield calls
    finally:
        for c in clients:
            c.meta.events.unregister("before-call.*.*", note)


def _reserve(cloud: Cloud, count: int) -> list[str]:
    tags = [{"Key": k, "Value": v} for k, v in TAG.items()]
    return [
        cloud.ec2.create_capacity_reservation(
            InstanceType="m5.large",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=4,
            InstanceMatchCriteria="targeted",
            TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": tags}],
        )["CapacityReservation"]["CapacityReservationId"]
        for _ in range(count)
    ]


def _run() -> Counter[str]:
    with _counting() as calls:
        wiring.Adapters(get_settings()).reservation_sync().run()
    return calls


def _measure(size: int, always_write: bool) -> tuple[int, int, int]:
    """Calls of a run with nothing changed, of one with a tenth changed, and the snapshot writes
    (PutItem) of the unchanged run."""
    patch = pytest.MonkeyPatch()
    if always_write:
        patch.setattr(reservation_sync, "unchanged", lambda prev, new: False)
    try:
        with bench_cloud() as cloud:
            ids = _reserve(cloud, size)
            apply_pool(cloud, capacity_types=("reserved", "on-demand"), selector_tags=TAG)
            cloud.wait_out_consistency()
            _run()
            moto_capacity.advance_clock(60)
            quiet = _run()
            for reservation_id in ids[: max(1, size // 10)]:
                cloud.ec2.modify_capacity_reservation(
                    CapacityReservationId=reservation_id, InstanceCount=5
                )
            moto_capacity.advance_clock(60)
            moved = _run()
    finally:
        patch.undo()
    return sum(quiet.values()), sum(moved.values()), quiet["PutItem"]


def run() -> list[SyncCalls]:
    points = []
    for size in RESERVATIONS:
        quiet, moved, writes = _measure(size, always_write=False)
        base_quiet, base_moved, base_writes = _measure(size, always_write=True)
        points.append(SyncCalls(size, quiet, moved, base_quiet, base_moved, writes, base_writes))
    return points


def table(points: list[SyncCalls]) -> list[str]:
    lines = [
        "| selected reservations | calls per run, nothing changed (baseline) | ratio "
        "| calls, a tenth changed (baseline) | PutItem, nothing changed (baseline) |",
        "|---|---|---|---|---|",
    ]
    for p in points:
        ratio = p.unchanged / p.baseline_unchanged if p.baseline_unchanged else 0.0
        lines.append(
            f"| {p.reservations:,} | {p.unchanged} ({p.baseline_unchanged}) | {ratio:.2f}x "
            f"| {p.tenth_changed} ({p.baseline_tenth_changed}) "
            f"| {p.writes} ({p.baseline_writes}) |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table(run())))
