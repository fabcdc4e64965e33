"""Sustained throughput: requests/s and CreateFleet/s for one worker and for N workers on one pool
(one limits item: every lease and settle is a transaction on it), with the emulator's transaction
conflicts on (5 %, as in the simulation) and the conflicts the workers met counted."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import moto_capacity
from benchmarks.scene import POOL, apply_pool, bench_cloud, request
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.pool_items import USAGE, limits_pk

REQUESTS = 16
WORKER_COUNTS = (1, 4, 8)
# DynamoDB's documented ceiling for one partition (so for one item): 1,000 write units a second;
# a transactional write of an item up to 1 KB costs 2 of them.
PARTITION_WRITE_UNITS = 1000
TRANSACTIONAL_UNITS_PER_KB = 2
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
    # Writes (transactional or not) that named the pool's usage item, and its size at the end.
    usage_item_writes: int = 0
    usage_item_bytes: int = 0
    usage_item_transactional: int = 0

    @property
    def usage_writes_per_request(self) -> float:
        return self.usage_item_writes / max(self.requests, 1)

    @property
    def ceiling_requests_per_second(self) -> float:
        """What one usage item allows: DynamoDB's per-partition write units over its writes."""
        kilobytes = max(1, -(-self.usage_item_bytes // 1024))
        transactional = self.usage_item_transactional / max(self.usage_item_writes, 1)
        units_per_write = kilobytes * (1 + transactional * (TRANSACTIONAL_UNITS_PER_KB - 1))
        per_request = self.usage_writes_per_request * units_per_write
        return PARTITION_WRITE_UNITS / per_request if per_request else float("inf")

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


def _watch_usage_item(pk: str) -> list[int]:
    """[writes naming the usage item, of which transactional]."""
    seen = [0, 0]
    lock = threading.Lock()

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = []
        if model.name == "TransactWriteItems":
            for action in params.get("TransactItems", []):
                for operation, body in action.items():
                    if operation != "ConditionCheck":
                        keys.append((body.get("Key") or body.get("Item") or {}, True))
        elif model.name in ("UpdateItem", "PutItem", "DeleteItem"):
            keys.append((params.get("Key") or params.get("Item") or {}, False))
        hits = [
            t
            for k, t in keys
            if k.get("pk", {}).get("S") == pk and k.get("sk", {}).get("S") == USAGE
        ]
        with lock:
            seen[0] += len(hits)
            seen[1] += sum(hits)

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    return seen


def _item_bytes(table: str, pk: str) -> int:
    """The item's size as DynamoDB counts it: attribute names plus values (approximately)."""
    item = (
        aws.client("dynamodb")
        .get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": USAGE}}, ConsistentRead=True)
        .get("Item", {})
    )
    return sum(len(name) + len(json.dumps(value)) for name, value in item.items())


def _measure(workers: int) -> Throughput:
    with bench_cloud() as cloud:
        apply_pool(cloud, types=("m5.large",))
        batches = [cloud.fresh_batch() for _ in range(workers)]
        for n, batch in enumerate(batches):
            cloud.send(request(f"warm-{workers}-{n}"), batch=batch)  # warm containers
        moto_capacity.reset()
        moto_capacity.set_transaction_conflicts(CONFLICT_RATE, seed=1)
        conflicts = _count_conflicts()
        usage = _watch_usage_item(limits_pk(POOL))
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
            usage[0],
            _item_bytes(cloud.names.state_table, limits_pk(POOL)),
            usage[1],
        )


def run() -> list[Throughput]:
    return [_measure(n) for n in WORKER_COUNTS]
