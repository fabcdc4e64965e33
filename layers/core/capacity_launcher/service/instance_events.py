"""What EC2's own events mean for us: an instance stopped or terminated, a reservation interrupted.

Most events on the default bus are for instances we did not launch: one GetItem tells, and they
are ignored with no other call. For ours, the instance item's conditional update is the gate that
makes the release exactly once (stopping then terminated, duplicates, retries); a crash after it
leaves usage that the next reconciliation repairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from capacity_launcher.adapters.instance_records import item_resources
from capacity_launcher.adapters.publisher import Event
from capacity_launcher.domain.offerings import RESERVED, offering_key
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.status import INSTANCE_TERMINATED, format_timestamp
from capacity_launcher.observability import MetricUnit, logger, metrics

STATE_CHANGE = "EC2 Instance State-change Notification"
INTERRUPTION_WARNING = "EC2 Capacity Reservation Instance Interruption Warning"
# States in which an instance no longer uses its pool's limits nor its reservation slot.
RELEASING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
INTERRUPTION_REASON = "CapacityReservationInterruption"
INSTANCES_RELEASED = "InstancesReleased"
RESERVATIONS_INTERRUPTED = "ReservationsInterrupted"


class InstanceItems(Protocol):
    def get(self, instance_id: str) -> dict[str, Any] | None: ...
    def release(self, instance_id: str, state: str, at: str) -> dict[str, Any] | None: ...
    def note_on_request(self, request_id: str, instance_id: str, state: str) -> None: ...


class PoolRelease(Protocol):
    def release(self, pool: str, amount: Resources) -> None: ...


class ReservationSlots(Protocol):
    def release_slot(self, reservation_id: str) -> bool: ...
    def mark_exhausted(self, reservation_ids: list[str]) -> None: ...


class OfferingCache(Protocol):
    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> Any: ...


@dataclass(frozen=True)
class Outcome:
    """What one event did: `ignored` (not ours, or nothing to do), `released`, `duplicate`,
    `marked` (a reservation marked exhausted)."""

    action: str
    instance_id: str
    capacity_reservation_id: str | None = None


class InstanceEvents:
    def __init__(
        self,
        items: InstanceItems,
        limits: PoolRelease,
        reservations: ReservationSlots,
        unavailable: OfferingCache,
        publish: Callable[..., None],
        now: Callable[[], datetime],
    ) -> None:
        self._items = items
        self._limits = limits
        self._reservations = reservations
        self._unavailable = unavailable
        self._publish = publish
        self._now = now

    def handle(self, detail_type: str, detail: Mapping[str, Any]) -> Outcome:
        instance_id = str(detail.get("instance-id", ""))
        if detail_type == STATE_CHANGE:
            return self.state_changed(instance_id, str(detail.get("state", "")))
        if detail_type == INTERRUPTION_WARNING:
            return self.interruption_warning(instance_id)
        logger.warning("unexpected event", extra={"detailType": detail_type})
        return Outcome("ignored", instance_id)

    def state_changed(self, instance_id: str, state: str) -> Outcome:
        if state not in RELEASING_STATES or not instance_id:
            return Outcome("ignored", instance_id)
        item = self._items.get(instance_id)
        if item is None:
            return Outcome("ignored", instance_id)
        at = format_timestamp(self._now())
        released = self._items.release(instance_id, state, at)
        if released is None:
            return Outcome("duplicate", instance_id, item.get("capacityReservationId"))
        pool = released.get("nodePool")
        if pool:
            self._limits.release(str(pool), item_resources(released))
        reservation_id = released.get("capacityReservationId")
        if reservation_id:
            self._reservations.release_slot(str(reservation_id))
        request_id = released.get("requestId")
        if request_id:
            self._items.note_on_request(str(request_id), instance_id, state)
        self._publish(Event(INSTANCE_TERMINATED, _detail(released, state, at)))
        metrics.add_metric(name=INSTANCES_RELEASED, unit=MetricUnit.Count, value=1)
        logger.info(
            "instance released",
            extra={"instanceId": instance_id, "state": state, "nodePool": pool},
        )
        return Outcome("released", instance_id, reservation_id)

    def interruption_warning(self, instance_id: str) -> Outcome:
        """EC2 is reclaiming the reservation's capacity: no new launches into it until a sync."""
        item = self._items.get(instance_id) if instance_id else None
        reservation_id = (item or {}).get("capacityReservationId")
        if not reservation_id:
            return Outcome("ignored", instance_id)
        self._reservations.mark_exhausted([str(reservation_id)])
        self._unavailable.mark(
            [
                (
                    offering_key(RESERVED, None, None, str(reservation_id)),
                    INTERRUPTION_REASON,
                    f"instance {instance_id} is being interrupted in {reservation_id}",
                )
            ]
        )
        metrics.add_metric(name=RESERVATIONS_INTERRUPTED, unit=MetricUnit.Count, value=1)
        logger.info(
            "reservation interrupted",
            extra={"instanceId": instance_id, "capacityReservationId": reservation_id},
        )
        return Outcome("marked", instance_id, str(reservation_id))


def _detail(item: Mapping[str, Any], state: str, at: str) -> dict[str, Any]:
    return {
        "instanceId": item.get("instanceId"),
        "requestId": item.get("requestId"),
        "nodePool": item.get("nodePool"),
        "nodeClass": item.get("nodeClass"),
        "requester": item.get("requester"),
        "instanceType": item.get("instanceType"),
        "zone": item.get("zone"),
        "capacityType": item.get("capacityType"),
        "capacityReservationId": item.get("capacityReservationId"),
        "state": state,
        "releasedAt": at,
    }
