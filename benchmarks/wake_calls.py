"""The calls and items of one wake of an admission queue (issue 37) with 10, 1,000 and 10,000
requests waiting in it across 20 teams, each with its quota in one cohort: flat in the number
waiting (one Query of the pool's partition's first FAIR_WINDOW entries, one BatchGetItem of the
cohort's usage item to order them by share, one GetItem of the chosen entry's record, one
SendMessage, one conditional UpdateItem handing the wait to it, one UpdateItem marking the entry
woken; the container's copy of the quotas is read before, as a warm container holds it).

The queue and the Waiting records are written straight to the table (BatchWriteItem), as the
launcher would have left them; only the wake is counted.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.wake_calls
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from benchmarks.scene import apply_pool, bench_cloud
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.dynamodb import to_item
from capacity_launcher.adapters.launch_records import RECORD, request_pk
from capacity_launcher.domain.accounting.admission_queue import (
    QueueEntry,
    limit_awaited,
    queue_partition,
)
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from local_cloud.documents import capacity_quota
from moto_capacity.core.clock import CLOCK
from tests.support.cloud import Cloud

WAITING = (10, 1_000, 10_000)
TEAMS = 20
POOL = "general"


@dataclass(frozen=True)
class WakeCalls:
    waiting: int
    calls: int
    # Items the wake read (Query and GetItem), and the calls by operation.
    items_read: int
    operations: str


@contextmanager
def _counting() -> Iterator[tuple[Counter[str], list[int]]]:
    calls: Counter[str] = Counter()
    items: list[int] = []

    def before(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    def after(model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name == "Query":
            items.append(len(parsed.get("Items", [])))
        elif model.name == "GetItem":
            items.append(1 if parsed.get("Item") else 0)
        elif model.name == "BatchGetItem":
            items.append(sum(len(found) for found in parsed.get("Responses", {}).values()))

    clients = [aws.client(name) for name in ("dynamodb", "sqs")]
    for c in clients:
        c.meta.events.register("before-call.*.*", before)
        c.meta.events.register("after-call.*.*", after)
    try:
        yield calls, items
    finally:
        for c in clients:
            c.meta.events.unregister("before-call.*.*", before)
            c.meta.events.unregister("after-call.*.*", after)


def _fill(cloud: Cloud, count: int) -> None:
    """`count` Waiting requests of TEAMS teams, each with its record and its queue entry."""
    now = CLOCK.now()
    deadline = now + timedelta(days=1)
    rows: list[dict[str, Any]] = []
    for n in range(count):
        request_id = f"wait-{n}"
        record = RequestRecord(
            request_id=request_id,
            node_pool=POOL,
            requester=f"team-{n % TEAMS}",
            status=RequestStatus.WAITING,
            requested=1,
            launched=0,
            received_at=now + timedelta(milliseconds=n),
            finished_at=now,
            wait_for_capacity_until=deadline,
            waiting_for=[limit_awaited(POOL, "full")],
        )
        rows.append(
            {
                "pk": request_pk(request_id),
                "sk": RECORD,
                "status": "Waiting",
                "detail": json.dumps(record.to_detail()),
                "heldBy": f"held-{n}",
            }
        )
        entry = QueueEntry.of(
            POOL,
            request_id,
            n % 7,
            record.received_at,
            deadline,
            json.dumps({"requestId": request_id, "count": 1, "nodePool": POOL}),
            cloud.names.launch_queue_arn,
        )
        rows.append(
            {
                "pk": queue_partition(POOL),
                "sk": entry.key,
                "requestId": request_id,
                "priority": entry.priority,
                "arrival": entry.arrival.isoformat(),
                "deadline": deadline.isoformat(),
                "body": entry.body,
                "queueArn": entry.queue_arn,
                "requester": f"team-{n % TEAMS}",
            }
        )
    db = aws.client("dynamodb")
    table = get_settings().state_table_name
    for start in range(0, len(rows), 25):
        chunk = rows[start : start + 25]
        db.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": to_item(r)}} for r in chunk]}
        )


def _measure(count: int) -> WakeCalls:
    with bench_cloud() as cloud:
        apply_pool(cloud)
        cloud.apply(
            *(
                capacity_quota(f"team-{t}", POOL, {"instances": "1"}, allowBorrowing=True)
                for t in range(TEAMS)
            )
        )
        _fill(cloud, count)
        adapters = wiring.Adapters(get_settings())
        config = adapters.config_store(cached=True)
        config.capacity_quotas()  # a warm container's copy
        admission = adapters.admission_queue(config)
        with _counting() as (calls, items):
            woken = admission.wake(POOL)
        assert woken is not None
    operations = ", ".join(f"{name} {n}" for name, n in sorted(calls.items()))
    return WakeCalls(count, sum(calls.values()), sum(items), operations)


def run() -> list[WakeCalls]:
    return [_measure(count) for count in WAITING]


def table(points: list[WakeCalls]) -> list[str]:
    lines = [
        f"| requests waiting ({TEAMS} teams, one pool) | calls of one wake | items read | calls |",
        "|---|---|---|---|",
    ]
    lines += [f"| {p.waiting:,} | {p.calls} | {p.items_read} | {p.operations} |" for p in points]
    return lines


if __name__ == "__main__":
    print("\n".join(table(run())))
