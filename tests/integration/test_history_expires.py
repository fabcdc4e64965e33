"""Issue 14: history expires (the state table's `ttl`, RECORD_RETENTION_DAYS) and the minute's
sync reads live work (open leases, live instances), never the history of past requests."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.settings import get_settings
from tests.integration.test_launch_into_reservations import setup_pool
from tests.integration.test_reservation_sync import sync
from tests.support.cloud import Cloud, emulator_seconds, launch_request
from tests.support.leases import reserve_room

DAY = 24 * 3600


def state_items(cloud: Cloud) -> dict[tuple[str, str], dict[str, Any]]:
    items = aws.client("dynamodb").scan(TableName=cloud.names.state_table)["Items"]
    return {
        (i["pk"]["S"], i["sk"]["S"]): {k: next(iter(v.values())) for k, v in i.items()}
        for i in items
    }


def test_records_and_intents_expire_after_the_configured_retention(cloud, subnets, image):
    # Given the deployed retention (RecordRetentionDays → RECORD_RETENTION_DAYS)
    days = get_settings().record_retention_days
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    before = emulator_seconds()
    # When a request is served
    cloud.send(launch_request("old-1", nodePool="general"))
    # Then its record, its body's hash, its intent and the intent's pointer carry the table's
    # TTL attribute
    items = state_items(cloud)
    history = {k: v for k, v in items.items() if k[0] == "Request#old-1" or k[1] == "Intent"}
    kinds = {k[1] if k[1] in ("Record", "Body") else "Intent" for k in history}
    assert kinds == {"Record", "Body", "Intent"} and len(history) == 4
    for item in history.values():
        # (on the emulator's clock, which the service reads and its waits move)
        assert before + days * DAY <= int(item["ttl"]) <= emulator_seconds() + days * DAY


def test_a_terminated_instances_item_expires_and_a_live_ones_does_not(cloud, subnets, image):
    # Given two launched instances
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.send(launch_request("old-2", nodePool="general", count=2))
    record = cloud.record("old-2")
    assert record is not None
    gone, live = (i.instance_id for i in record.instances)
    items = InstanceRecords(
        get_settings().state_table_name, retention_seconds=3 * DAY, clock=time.time
    )
    # When one terminates and the other only stops
    at = datetime.now(UTC).isoformat()
    items.release(gone, "terminated", at)
    items.release(live, "stopped", at)
    # Then only the terminated one's item expires (after the retention)
    assert int(items.stored_item(gone)["ttl"]) >= int(time.time()) + 3 * DAY - 5  # type: ignore[index]
    assert "ttl" not in items.stored_item(live)  # type: ignore[operator]
    # And a stopped instance that runs again is not history either
    items.release(live, "terminated", at)  # (released before: only its state and expiry move)
    items.rearm(live)
    assert "ttl" not in items.stored_item(live)  # type: ignore[operator]


def test_the_sync_reads_open_leases_and_not_the_history_of_past_requests(cloud, subnets, image):
    # Given history (records, intents, instances of finished requests) and one open lease
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    for n in range(5):
        cloud.send(launch_request(f"past-{n}", nodePool="general"))
    store = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time)
    reserve_room(
        store, "general", "in-flight", Resources(cpu=2, memory_mib=8192, instances=1), 1, 1, None
    )
    settled = {k[1] for k in state_items(cloud) if k[1].startswith("Settled#")}
    read: list[tuple[str, str]] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("TableName") == cloud.names.state_table:
            read.append((model.name, params.get("IndexName", "")))

    def items_read(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("Scan", "Query"):
            returned.extend(i["pk"]["S"] for i in parsed.get("Items", []))
            sort_keys.extend(i["sk"]["S"] for i in parsed.get("Items", []))

    returned: list[str] = []
    sort_keys: list[str] = []
    dynamodb = aws.client("dynamodb")
    dynamodb.meta.events.register("provide-client-params.dynamodb.*", note)
    dynamodb.meta.events.register("after-call.dynamodb.*", items_read)
    # When the minute's sync runs
    report = sync()
    # Then it never scanned the state table, and no item it queried is a past request's
    assert report is not None
    assert ("Scan", "") not in read
    assert ("Query", "OpenLeases") in read
    assert not [pk for pk in returned if pk.startswith(("Request#", "Intent#", "Instance#"))]
    # And none is the proof that a past request's lease settled (kept a week, outside the range
    # of leases and members the recounts read)
    assert settled == {f"Settled#past-{n}" for n in range(5)}
    assert not settled & set(sort_keys)
    assert "Lease#in-flight" in sort_keys
    # And the open lease is still seen (not reclaimed: it has not expired)
    assert store.lease("general", "in-flight") is not None
