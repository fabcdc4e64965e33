"""What the reliability suites check after a run: one set of instances per request, one final
status, limits that match what runs."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.reconciliation import Reconciliation, ReconciliationReport
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from tests.support.cloud import Cloud

TERMINAL = frozenset(
    {
        RequestStatus.FULFILLED,
        RequestStatus.PARTIALLY_FULFILLED,
        RequestStatus.FAILED,
        RequestStatus.REJECTED,
    }
)


def tagged_instances(cloud: Cloud) -> dict[str, set[str]]:
    """request id → ids of the running instances tagged with it."""
    found: dict[str, set[str]] = {}
    for instance in cloud.managed_instances():
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        request_id = tags.get("capacity-launcher:request-id", "<untagged>")
        found.setdefault(request_id, set()).add(instance["InstanceId"])
    return found


def assert_each_launched_once(cloud: Cloud, request_ids: Iterable[str]) -> int:
    """Every request has a terminal record naming exactly the instances tagged with it, and no
    instance runs for anyone else; returns how many run."""
    tagged = tagged_instances(cloud)
    launched = 0
    for request_id in request_ids:
        record = cloud.record(request_id)
        assert record is not None, f"{request_id}: lost (no record)"
        assert record.status in TERMINAL, f"{request_id}: {record.status}"
        recorded = {i.instance_id for i in record.instances}
        assert len(recorded) == record.launched, f"{request_id}: {record}"
        assert tagged.pop(request_id, set()) == recorded, f"{request_id}: launched twice or lost"
        launched += record.launched
    assert tagged == {}, f"instances no record accounts for: {tagged}"
    return launched


def pool_usage(cloud: Cloud) -> PoolUsageStore:
    return PoolUsageStore(cloud.names.state_table, aws.client("dynamodb"))


def pool_leases(cloud: Cloud) -> PoolLeaseStore:
    return PoolLeaseStore(cloud.names.state_table, 900, aws.client("dynamodb"), clock=time.time)


def reconcile_after_leases_expire() -> ReconciliationReport:
    """The sync's reconciliation, run once every lease alive now has expired."""
    settings = get_settings()
    later = settings.limit_lease_seconds + 1
    dynamodb, ec2 = aws.client("dynamodb"), aws.client("ec2")
    table = settings.state_table_name
    return Reconciliation(
        leases=PoolLeaseStore(
            table, settings.limit_lease_seconds, dynamodb, clock=lambda: time.time() + later
        ),
        members=PoolMemberStore(table, dynamodb, clock=lambda: time.time() + later),
        usage=PoolUsageStore(table, dynamodb),
        instances=Fleet(ec2),
        items=InstanceRecords(settings.state_table_name, dynamodb, clock=time.time),
        facts=InstanceTypeCatalog(ec2),
        pools=ConfigStore(settings.state_table_name, dynamodb, clock=system_clock),
        now=lambda: datetime.now(UTC) + timedelta(seconds=later),
    ).run()
