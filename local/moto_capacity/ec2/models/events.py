"""The `aws.ec2` events EC2 sends to the default EventBridge bus for capacity, put on moto's.

moto emits no EC2 events. The lifecycle (`lifecycle`) calls `emit` when EC2 would send one;
each goes through moto's events backend, so rules on the default bus deliver it to their
targets, and is kept in a log `state()` reports.
"""

import json
import threading
from datetime import datetime
from typing import Any

from moto_capacity.core.clock import aware

SOURCE = "aws.ec2"
# EC2 User Guide, "Monitor Capacity Blocks using EventBridge".
BLOCK_DELIVERED = "Capacity Block Reservation Delivered"
BLOCK_EXPIRATION_WARNING = "Capacity Block Reservation Expiration Warning"
# EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and CloudTrail".
INTERRUPTION_WARNING = "EC2 Capacity Reservation Instance Interruption Warning"
RECLAMATION_COMPLETED = "EC2 Interruptible Capacity Reservation Allocation Reclamation Completed"
# EC2 User Guide, "Monitor state changes for future-dated Capacity Reservations"
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-fcr-state.html): the state a
# future-dated reservation enters names its event; the detail carries its id and state. (The
# documented `Failed` has no state in this emulator.)
FUTURE_DATED_STATE_EVENTS = {
    "scheduled": "EC2 Capacity Reservation Scheduled",
    "active": "EC2 Capacity Reservation Active",
    "delayed": "EC2 Capacity Reservation Delayed",
    "unsupported": "EC2 Capacity Reservation Unsupported",
    "expired": "EC2 Capacity Reservation Expired",
}


def iso(moment: datetime) -> str:
    return aware(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


class Ec2EventLog:
    """Every event emitted since the last reset, oldest first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []

    def emit(
        self,
        account_id: str,
        region: str,
        detail_type: str,
        at: datetime,
        resources: list[str],
        detail: dict[str, Any],
    ) -> None:
        event = {
            "source": SOURCE,
            "detail-type": detail_type,
            "account": account_id,
            "region": region,
            "time": iso(at),
            "resources": resources,
            "detail": detail,
        }
        with self._lock:
            self._events.append(event)
        _put_on_default_bus(account_id, region, detail_type, at, resources, detail)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(event) for event in self._events]

    def reset(self) -> None:
        with self._lock:
            self._events.clear()


def _put_on_default_bus(
    account_id: str,
    region: str,
    detail_type: str,
    at: datetime,
    resources: list[str],
    detail: dict[str, Any],
) -> None:
    from moto.events.models import events_backends

    events_backends[account_id][region].put_events(
        [
            {
                "Source": SOURCE,
                "DetailType": detail_type,
                "Detail": json.dumps(detail),
                "Resources": resources,
                "EventBusName": "default",
                "Time": aware(at).timestamp(),
            }
        ]
    )


EC2_EVENTS = Ec2EventLog()
