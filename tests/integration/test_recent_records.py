"""`get requests` reads the newest records from the RecentRequests index, newest first, one
Query per shard: bounded by the page asked for, never a Scan of history."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import RECENT_INDEX, LaunchRecords
from capacity_launcher.domain.records.index_shards import INDEX_SHARDS
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.settings import get_settings
from tests.support.cloud import Cloud

START = datetime(2026, 11, 1, tzinfo=UTC)


def _record(n: int) -> RequestRecord:
    received = START + timedelta(minutes=n)
    return RequestRecord(
        request_id=f"r-{n:03d}", status=RequestStatus.FULFILLED, requested=1, launched=1,
        received_at=received, finished_at=received + timedelta(seconds=30),
    )  # fmt: skip


def test_the_newest_page_of_records_comes_from_the_index_without_a_scan(cloud: Cloud) -> None:
    # Given 40 records written in a shuffled order, received a minute apart
    records = LaunchRecords(
        get_settings().state_table_name, aws.client("dynamodb"), clock=time.time
    )
    for n in sorted(range(40), key=lambda n: (n * 17) % 40):
        records.put_record(_record(n))
    calls: list[tuple[str, str]] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.name, params.get("IndexName", "")))

    records._db.meta.events.register("provide-client-params.dynamodb.*", note)
    # When the newest 10 are listed
    newest = records.list_records(limit=10)
    # Then they are the 10 received last, newest first
    assert [r.request_id for r in newest] == [f"r-{n:03d}" for n in range(39, 29, -1)]
    # And they were read by one Query per shard of the index, with no Scan
    assert calls == [("Query", RECENT_INDEX)] * INDEX_SHARDS
