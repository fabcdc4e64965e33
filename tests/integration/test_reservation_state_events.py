"""Issue 27: EC2 announces each state a future-dated reservation enters (`EC2 Capacity
Reservation <State>`, EC2 User Guide, "Monitor state changes for future-dated Capacity
Reservations", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-fcr-state.html).
The reservation sync's rule receives them and refreshes that one snapshot at once, instead of
launchers waiting for the next sync."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import moto_capacity
from moto_capacity.core.clock import CLOCK
from tests.integration.test_launch_into_gpu_reservations import reserved_only_pool
from tests.integration.test_reservation_sync import LambdaContext, handler, snapshot, sync
from tests.integration.test_wait_for_scheduled_capacity import FUTURE_TYPE, future_dated
from tests.support.cloud import Cloud


def _calls(operation: str) -> int:
    counted = moto_capacity.state()["operations"]
    return int(counted.get(operation, {}).get("calls", 0))  # type: ignore[attr-defined]


def _announced(reservation_id: str, detail_type: str) -> dict[str, Any]:
    """The event the emulator put on the default bus, as EventBridge hands it to the rule."""
    (event,) = [
        e
        for e in moto_capacity.state()["ec2Events"]  # type: ignore[attr-defined]
        if e["detail-type"] == detail_type
        and e["detail"]["capacity-reservation-id"] == reservation_id
    ]
    return {"version": "0", "id": "e-1", **event}


def test_a_state_event_refreshes_that_reservations_snapshot_without_a_whole_sync(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a future-dated reservation a pool targets, snapshotted by a sync while assessing
    rid = future_dated(cloud, CLOCK.now().replace(microsecond=0) + timedelta(days=6))
    reserved_only_pool(cloud, subnets, image, rid, types=(FUTURE_TYPE,))
    sync()
    assert snapshot(rid).snapshot.state == "assessing"
    moto_capacity.advance_clock(600)  # past the emulator's pending window for new reservations

    # When EC2 delays it, then delivers it, and each event reaches the sync's rule
    for state, detail_type in (
        ("delayed", "EC2 Capacity Reservation Delayed"),
        ("active", "EC2 Capacity Reservation Active"),
    ):
        moto_capacity.set_reservation_state(rid, state)
        described = _calls("ec2:DescribeInstances")
        answer = handler("reservation_sync")(_announced(rid, detail_type), LambdaContext())

        # Then that snapshot says so at once, without the whole sync (no reconciliation)
        assert (answer["reservationId"], answer["synced"]) == (rid, [rid])
        assert snapshot(rid).snapshot.state == state
        assert _calls("ec2:DescribeInstances") == described
    assert snapshot(rid).snapshot.usable


def test_a_state_event_of_a_reservation_no_node_class_uses_is_left_to_the_sync(
    cloud: Cloud,
) -> None:
    # Given a future-dated reservation no pool targets
    rid = future_dated(cloud, CLOCK.now().replace(microsecond=0) + timedelta(days=6))
    moto_capacity.set_reservation_state(rid, "delayed")
    # When its event arrives, then nothing is stored
    answer = handler("reservation_sync")(
        _announced(rid, "EC2 Capacity Reservation Delayed"), LambdaContext()
    )
    assert answer["synced"] == []
