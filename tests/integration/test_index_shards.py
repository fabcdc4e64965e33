"""Issue 27: the single-valued sparse indexes (`OpenLeases`, `WaitingRequests`) take their
writes over `INDEX_SHARDS` key values, and their readers query every shard and the single value
items written before sharding carry, so those stay readable (domain/records/index_shards.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.index_shards import INDEX_SHARDS, read_values
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud
from tests.support.leases import reserve_room

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


def _items(cloud: Cloud, attribute: str) -> list[dict[str, Any]]:
    pages = (
        aws.client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=cloud.names.state_table, FilterExpression=f"attribute_exists({attribute})"
        )
    )
    return [i for page in pages for i in page["Items"]]


def _legacy_copy(
    cloud: Cloud, item: dict[str, Any], attribute: str, value: str, **keys: str
) -> None:
    """An item as the version before sharding wrote it: the single index key value."""
    copy = {**item, attribute: {"S": value}, **{k: {"S": v} for k, v in keys.items()}}
    aws.client("dynamodb").put_item(TableName=cloud.names.state_table, Item=copy)


def test_open_leases_spread_over_the_shards_and_old_ones_stay_readable(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given 40 open leases written now, in a pool
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    store = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time)
    for n in range(40):
        reserve_room(
            store, "general", f"l-{n}", Resources(cpu=2, memory_mib=8192, instances=1), 1, 1, None
        )
    written = _items(cloud, "openLease")
    # Then they carry several shard values, none the single value of before
    values = {i["openLease"]["S"] for i in written}
    assert values <= set(read_values("open")[1:]) and len(values) > INDEX_SHARDS // 2
    # And one written by the version before (openLease = "open") is read with them
    _legacy_copy(cloud, written[0], "openLease", "open", sk="Lease#legacy")
    leases = {lease.lease_id for lease in store.leases()}
    assert leases == {f"l-{n}" for n in range(40)} | {"legacy"}


def test_waiting_requests_spread_over_the_shards_and_old_ones_stay_readable(cloud: Cloud) -> None:
    # Given 20 waiting requests past their deadline, written now
    records = LaunchRecords(
        get_settings().state_table_name, aws.client("dynamodb"), clock=time.time
    )
    for n in range(20):
        records.put_record(
            RequestRecord(
                request_id=f"w-{n}",
                status=RequestStatus.WAITING,
                requested=1,
                launched=0,
                received_at=NOW,
                finished_at=NOW,
                wait_for_capacity_until=NOW,
            ),
            held_by=f"m-{n}",
        )
    written = _items(cloud, "waiting")
    values = {i["waiting"]["S"] for i in written}
    assert values <= set(read_values("waiting")[1:]) and len(values) > INDEX_SHARDS // 2
    # And one written before sharding (waiting = "waiting") is read with them
    _legacy_copy(cloud, written[0], "waiting", "waiting", pk="Request#w-legacy")
    overdue = records.overdue_waits(NOW + timedelta(seconds=1))
    assert len(overdue) == 21
    assert {w.held_by for w in overdue} == {f"m-{n}" for n in range(20)} | {
        written[0]["heldBy"]["S"]
    }
