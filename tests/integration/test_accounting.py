"""Issue 11: pool usage and reservation slots are counted exactly once, whatever the interleaving.

Each test reproduces one way the accounting broke: a redelivery after settle, the sync and an
instance event releasing the same instance, a start after a stop, slots kept after an exception
or a gang failure, and a sync running in the middle of a launch.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.pool_items import PoolItems
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.capacity.fleet import ManagedInstance
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.status import RequestStatus, format_timestamp
from capacity_launcher.service.instance_events import RELEASING_STATES, STARTING_STATES
from capacity_launcher.service.lease_settlement import settle as settle_lease
from capacity_launcher.service.usage_recount import recount_pool
from capacity_launcher.settings import get_settings
from local_cloud.lambda_runtime import running
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_reservations import (
    ZONE,
    expire_idempotency_claims,
    setup_pool,
)
from tests.integration.test_reservation_sync import (
    LambdaContext,
    handler,
    sample_event,
    snapshot,
    sync,
    targeted_pool,
    use_snapshots,
)
from tests.support.cloud import Cloud, launch_request
from tests.support.leases import reserve_room
from tests.support.template import load_template

STATE_CHANGE = "ec2_instance_state_change.json"


@pytest.fixture
def snapshot_launchers(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return use_snapshots(cloud, monkeypatch)


def usage(pool: str = "general") -> int:
    return PoolUsageStore(get_settings().state_table_name).usage(pool).instances


def members() -> PoolMemberStore:
    return PoolMemberStore(get_settings().state_table_name, clock=time.time)


def usage_store() -> PoolUsageStore:
    return PoolUsageStore(get_settings().state_table_name)


def deliver(instance_id: str, state: str) -> str:
    event = sample_event(STATE_CHANGE, **{"instance-id": instance_id, "state": state})
    event["time"] = format_timestamp(CLOCK.now())  # the change happens now, as EC2 stamps it
    return str(handler("instance_events")(event, LambdaContext())["action"])


def forget_dry_offerings(cloud: Cloud) -> None:
    """The ICE cache's items expired (180 s later, in production)."""
    db = aws.client("dynamodb")
    table = cloud.names.unavailable_offerings_table
    for item in db.scan(TableName=table)["Items"]:
        db.delete_item(TableName=table, Key={"offering": item["offering"]})


def test_a_redelivery_after_settle_finishes_the_record_and_never_launches_more(
    cloud, subnets, image, monkeypatch
):
    # Given a pool limited to 3 and a request for 3 that got 1 (EC2 had no more), whose worker
    # settled the lease and then failed to write the record
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    request = launch_request("settled-short-1", nodePool="general", count=3)

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError("record write failed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "put_records", fail)  # the visit's records
        assert len(cloud.send(request)) == 1
    assert cloud.record("settled-short-1") is None
    assert usage() == 1
    # and, meanwhile, EC2 has capacity again and another request takes the pool's other 2
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    forget_dry_offerings(cloud)
    cloud.send(launch_request("other-1", nodePool="general", count=2), batch=cloud.fresh_batch())
    assert usage() == 3
    expire_idempotency_claims(cloud)
    # When the first request is delivered again
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then its record says what it launched before, and nothing more runs than the limit
    record = cloud.record("settled-short-1")
    assert record is not None
    assert record.launched == 1
    assert record.status is RequestStatus.PARTIALLY_FULFILLED
    assert len(cloud.managed_instances()) == 3
    assert usage() == 3


def test_a_redelivery_after_settle_keeps_what_events_recorded_since(
    cloud, subnets, image, monkeypatch
):
    # Given a request that launched 1 and settled, whose record write failed, and whose instance
    # was terminated and released by its event before the message came back
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    request = launch_request("settled-gone-1", nodePool="general")

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError("record write failed")

    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, "put_records", fail)  # the visit's records
        assert len(cloud.send(request)) == 1
    (instance,) = cloud.managed_instances()
    instance_id = instance["InstanceId"]
    cloud.ec2.terminate_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "terminated") == "released"
    assert usage() == 0
    expire_idempotency_claims(cloud)
    # When the request is delivered again
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    # Then the instance's item still says it was released (a rewrite would make it look running
    # and let a late writer count it back), and the pool's usage stays what runs
    item = InstanceRecords(get_settings().state_table_name, clock=time.time).stored_item(
        instance_id
    )
    assert item is not None
    assert item["state"] == "terminated"
    assert "releasedAt" in item
    record = cloud.record("settled-gone-1")
    assert record is not None and record.launched == 1
    assert usage() == 0


def test_the_sync_and_a_termination_event_release_an_instance_once(
    cloud, subnets, image, monkeypatch
):
    # Given two instances of ours, one terminated in EC2
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "3"})
    cloud.send(launch_request("twice-1", nodePool="general", count=2))
    record = cloud.record("twice-1")
    assert record is not None and record.launched == 2
    gone = record.instances[0].instance_id
    cloud.ec2.terminate_instances(InstanceIds=[gone])
    # When its termination event is processed while the sync is between its reads and its repair
    real = Fleet.find_managed

    def event_meanwhile(self: Fleet, *args: Any, **kwargs: Any) -> list[ManagedInstance]:
        found = real(self, *args, **kwargs)
        assert deliver(gone, "terminated") == "released"
        return found

    monkeypatch.setattr(Fleet, "find_managed", event_meanwhile)
    sync()
    monkeypatch.undo()
    # Then the instance was released once: usage is what runs, and stays so
    assert usage() == 1
    deliver(gone, "terminated")
    sync()
    assert usage() == 1
    # and the pool's limit holds: 2 more fit, not 3
    cloud.send(launch_request("twice-2", nodePool="general", count=3, minCount=1))
    assert len(cloud.managed_instances()) == 3
    assert usage() == 3


def test_a_stopped_instance_started_again_is_counted_again_at_once(cloud, subnets, image):
    # Given an instance of ours in a pool limited to 1, stopped (its usage released)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("restart-1", nodePool="general"))
    record = cloud.record("restart-1")
    assert record is not None and record.launched == 1
    instance_id = record.instances[0].instance_id
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "stopped") == "released"
    assert usage() == 0
    # When it is started again, and EC2 says so
    cloud.ec2.start_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "pending") == "counted"
    assert deliver(instance_id, "running") == "duplicate"
    # Then it counts again at once (a sync does not undo it), and the pool has no room left
    assert usage() == 1
    sync()
    assert usage() == 1
    cloud.send(launch_request("restart-2", nodePool="general"))
    refused = cloud.record("restart-2")
    assert refused is not None and refused.status is RequestStatus.FAILED
    assert len(cloud.managed_instances()) == 1
    # and it is released again when it stops again
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "stopping") == "released"
    assert usage() == 0


def test_a_start_that_overruns_the_pool_is_counted_and_reported(cloud, subnets, image):
    # Given a stopped instance whose room in a pool of 1 was taken by another launch
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("first-1", nodePool="general"))
    record = cloud.record("first-1")
    assert record is not None
    instance_id = record.instances[0].instance_id
    cloud.ec2.stop_instances(InstanceIds=[instance_id])
    deliver(instance_id, "stopped")
    cloud.send(launch_request("second-1", nodePool="general"))
    assert usage() == 1
    # When someone starts it again
    cloud.ec2.start_instances(InstanceIds=[instance_id])
    # Then it is counted (it runs), and the overrun is reported
    assert deliver(instance_id, "running") == "overrun"
    assert usage() == 2


def test_the_template_routes_the_states_the_instance_events_act_on():
    rule = load_template()["Resources"]["InstanceEventsFunction"]["Properties"]["Events"][
        "InstanceStateChange"
    ]
    states = set(rule["Properties"]["Pattern"]["detail"]["state"])
    assert states == set(RELEASING_STATES | STARTING_STATES)


def test_slots_claimed_before_an_exception_are_given_back(snapshot_launchers, subnets, image):
    # Given a synced targeted reservation of 2, and EC2 throttling every CreateFleet
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2)
    sync()
    assert snapshot(reservation).snapshot.available == 2
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=50)
    request = launch_request("claim-leak-1", nodePool="general", count=2)
    # When a request claims both slots and its launch raises
    assert len(cloud.send(request)) == 1
    # Then the slots are free again in the shared snapshot, for any worker
    assert snapshot(reservation).snapshot.available == 2
    # and the redelivery, once EC2 calms down, claims and fills them (its lease waited for it).
    # Only the throttling ends: a whole reset would also rewind the emulator's clock, putting the
    # reservation back to pending until real time caught up (botocore's back-off, once slept)
    moto_capacity.inject_fault("ec2:CreateFleet", "RequestLimitExceeded", times=0)
    expire_idempotency_claims(cloud)
    assert cloud.send(request, batch=cloud.fresh_batch()) == []
    record = cloud.record("claim-leak-1")
    assert record is not None and record.launched == 2
    assert [i.capacity_reservation_id for i in record.instances] == [reservation] * 2
    assert snapshot(reservation).snapshot.available == 0
    assert usage() == 2


def test_a_lease_is_given_back_when_the_launch_fails_before_any_intent(
    cloud, subnets, image, monkeypatch
):
    # Given a pool limited to 2, and a launch template that cannot be created right now
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})

    def broken(*_: object, **__: object) -> str:
        raise RuntimeError("launch template store unreachable")

    monkeypatch.setattr(LaunchTemplates, "ensure", broken)
    # When a request leases the whole pool and fails before asking EC2
    assert len(cloud.send(launch_request("no-intent-1", nodePool="general", count=2))) == 1
    # Then its lease is given back at once, not after it expires
    assert usage() == 0
    assert PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases() == []


def test_a_gang_that_misses_min_count_gives_back_its_slots_and_limits(
    snapshot_launchers, subnets, image
):
    # Given a synced reservation of 2 that a reserved-only pool targets
    cloud = snapshot_launchers
    reservation = targeted_pool(cloud, subnets, image, 2, limits={"instances": "10"})
    cloud.apply(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {
                "nodeClassRef": "standard",
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["m5.large"],
                    },
                ],
                "limits": {"instances": "10"},
            },
        }
    )
    sync()
    # When a gang of 4 gets only the 2 reserved instances
    cloud.send(launch_request("gang-slots-1", nodePool="general", count=4, minCount=4))
    record = cloud.record("gang-slots-1")
    assert record is not None and record.status is RequestStatus.FAILED
    # Then what it launched was terminated, and its slots and limits are free again
    assert cloud.managed_instances() == []
    assert snapshot(reservation).snapshot.available == 2
    assert usage() == 0


def test_a_sync_during_a_launch_does_not_count_its_instances_twice(cloud, subnets, image):
    # Given a launch whose instances exist in EC2 but whose lease is not settled yet
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    ran: list[bool] = []

    def sync_now(**_: object) -> None:
        if not ran:
            ran.append(True)
            # The sync is another function, running beside the launcher.
            with running("ReservationSyncFunction", cloud.environment, cloud.names.account_id):
                sync()

    aws.client("ec2").meta.events.register("after-call.ec2.CreateFleet", sync_now)
    # When the sync runs right then
    cloud.send(launch_request("inflight-1", nodePool="general", count=2))
    aws.client("ec2").meta.events.unregister("after-call.ec2.CreateFleet", sync_now)
    # Then, once the launch settles, usage counts its instances once
    assert ran
    record = cloud.record("inflight-1")
    assert record is not None and record.launched == 2
    assert usage() == 2


def test_settling_more_instances_than_one_transaction_holds_counts_each_once(cloud, subnets, image):
    # Given a lease of 120 instances, 5 of which the sync already counted (their lease had expired)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    store = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time)
    one = Resources(cpu=2, memory_mib=8192, instances=1)
    assert reserve_room(store, "general", "big-1", one, 120, 1, None) == 120
    launched = {f"i-{n:017x}": one for n in range(120)}
    for instance_id in list(launched)[:5]:
        assert members().count("general", instance_id, one)
    # When the launcher settles (in chunks), and a retry settles again
    settle_lease(store, "general", "big-1", launched)
    settle_lease(store, "general", "big-1", launched)
    # Then each instance is a member once, usage is exactly theirs, and the lease is settled
    assert sorted(m.instance_id for m in members().members("general")) == sorted(launched)
    assert usage_store().usage("general") == one * 120
    assert store.is_settled("general", "big-1")
    recount = recount_pool(usage_store(), "general")
    assert recount is not None
    assert (recount.stored, recount.recomputed, recount.repaired) == (one * 120, one * 120, False)
    assert sorted(m.instance_id for m in recount.members) == sorted(launched)


def test_a_settle_writes_each_instance_s_record_with_its_member_in_transactions_that_fit(
    cloud, subnets, image
):
    # Given a lease of 120 instances, 5 of which the sync already counted, and a record of each
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    table = get_settings().state_table_name
    items = InstanceRecords(table, clock=time.time)
    store = PoolLeaseStore(table, 900, clock=time.time, record_puts=items)
    one = Resources(cpu=2, memory_mib=8192, instances=1)
    assert reserve_room(store, "general", "big-2", one, 120, 1, None) == 120
    launched = {f"i-{n:017x}": one for n in range(120)}
    counted = list(launched)[:5]
    for instance_id in counted:
        assert members().count("general", instance_id, one)
    records = {
        i: InstanceRecord(i, "m5.large", "on-demand", "big-2", "general", cpu=one.cpu)
        for i in launched
    }
    # When the launcher settles with the records (a member and its record: 48 a transaction,
    # DynamoDB allowing 100 actions)
    written, _ = settle_lease(store, "general", "big-2", launched, records)
    # Then every instance not counted before has its record, written with its member
    assert written == frozenset(launched) - set(counted)
    stored = items.many(sorted(launched))
    assert sorted(stored) == sorted(written)
    assert {r.request_id for r in stored.values()} == {"big-2"}
    assert sorted(m.instance_id for m in members().members("general")) == sorted(launched)
    assert usage_store().usage("general") == one * 120
    # And a store that cannot write records refuses them rather than drop them
    bare = PoolLeaseStore(table, 900, clock=time.time)
    with pytest.raises(ValueError, match="records"):
        bare.write_settlement("general", "big-3", None, {"i-x": one}, 1, records)


def test_a_recompute_never_overwrites_a_count_made_while_it_read(cloud, monkeypatch):
    # Given usage that no member explains (3 leaked), and one counted instance
    one = Resources(instances=1)
    assert members().count("general", "i-00000000000000001", one)
    aws.client("dynamodb").update_item(
        TableName=get_settings().state_table_name,
        Key={"pk": {"S": "Limits#general"}, "sk": {"S": "Usage"}},
        UpdateExpression="ADD instances :n",
        ExpressionAttributeValues={":n": {"N": "3"}},
    )
    # When another writer counts an instance while the recompute reads members and leases
    real = PoolItems.live
    writes = iter([True])

    def concurrent(self: PoolItems, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        read = real(self, *args, **kwargs)
        if next(writes, False):
            assert members().count("general", "i-00000000000000002", one)
        return read

    monkeypatch.setattr(PoolItems, "live", concurrent)
    recount = recount_pool(usage_store(), "general")
    # Then the recompute read again, and usage is both members: the concurrent count is kept
    assert recount is not None and recount.repaired
    assert usage_store().usage("general").instances == 2


def test_a_late_pending_event_of_a_terminated_instance_counts_nothing(cloud, subnets, image):
    # Given an instance of ours that terminated, its release published once
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    cloud.send(launch_request("late-1", nodePool="general"))
    record = cloud.record("late-1")
    assert record is not None
    instance_id = record.instances[0].instance_id
    cloud.ec2.terminate_instances(InstanceIds=[instance_id])
    assert deliver(instance_id, "terminated") == "released"
    # When its launch's `pending` event arrives late, and the termination again
    late = deliver(instance_id, "pending")
    again = deliver(instance_id, "terminated")
    # Then nothing is counted or released a second time
    assert (late, again) == ("ignored", "duplicate")
    assert usage() == 0


def test_a_launchs_own_running_event_costs_two_reads_and_no_transaction(cloud, subnets, image):
    # Given an instance our launcher just launched and counted
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "2"})
    cloud.send(launch_request("own-1", nodePool="general"))
    record = cloud.record("own-1")
    assert record is not None
    calls: Counter[str] = Counter()
    aws.client("dynamodb").meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.update([model.name])
    )
    # When EC2's `running` event for it arrives
    outcome = deliver(record.instances[0].instance_id, "running")
    # Then it is a duplicate, told by its instance item and its membership, with no write
    assert outcome == "duplicate"
    assert calls == Counter({"GetItem": 2})
    assert usage() == 1
