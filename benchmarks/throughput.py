"""Sustained throughput: requests/s and CreateFleet/s for one worker and for N workers on one pool
(one limits item: every lease and settle is a transaction on it), with the emulator's transaction
conflicts on (5 %, as in the simulation) and the conflicts the workers met counted."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import moto_capacity
from benchmarks.scene import apply_pool, bench_cloud, request
from capacity_launcher.adapters import aws

REQUESTS = 16
WORKER_COUNTS = (1, 4)
CONFLICT_RATE = 0.05
_CONFLICTS = ("TransactionCanceledException", "TransactionConflictException")


@dataclass(frozen=True)
class Throughput:
    workers: int
    requests: int
    seconds: float
    create_fleet_calls: int
    launched: int
    conflicts: int

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def fleets_per_second(self) -> float:
        return self.create_fleet_calls / self.seconds


def _count_conflicts() -> list[int]:
    seen = [0]
    lock = threading.Lock()

    def note(response: Any = None, **_: Any) -> None:
        parsed: dict[str, Any] = (response or (None, {}))[1] or {}
        if parsed.get("Error", {}).get("Code") in _CONFLICTS:
            with lock:
                seen[0] += 1

    aws.client("dynamodb").meta.events.register("needs-retry.dynamodb", note)
    return seen


def _measure(workers: int) -> Throughput:
    with bench_cloud() as cloud:
        apply_pool(cloud, types=("m5.large",))
        batches = [cloud.fresh_batch() for _ in range(workers)]
        for n, batch in enumerate(batches):
            cloud.send(request(f"warm-{workers}-{n}"), batch=batch)  # warm containers
        moto_capacity.reset()
        moto_capacity.set_transaction_conflicts(CONFLICT_RATE, seed=1)
        conflicts = _count_conflicts()
        per_worker = REQUESTS // workers
        started = time.perf_counter()

        def work(w: int) -> None:
            for i in range(per_worker):
                cloud.send(request(f"tp-{workers}-{w}-{i}"), batch=batches[w])

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(workers)))
        seconds = time.perf_counter() - started
        moto_capacity.set_transaction_conflicts(0)
        operations: dict[str, dict[str, int]] = moto_capacity.state()["operations"]  # type: ignore[assignment]
        ids = [f"tp-{workers}-{w}-{i}" for w in range(workers) for i in range(per_worker)]
        launched = sum(r.launched for r in map(cloud.record, ids) if r is not None)
        return Throughput(
            workers,
            per_worker * workers,
            seconds,
            operations.get("ec2:CreateFleet", {}).get("calls", 0),
            launched,
            conflicts[0],
        )


def run() -> list[Throughput]:
    return [_measure(n) for n in WORKER_COUNTS]
