"""What EC2's own events mean for us: an instance stopped, started or terminated, a reservation
interrupted.

Most events on the default bus are for instances we did not launch: one GetItem tells, and they
are ignored with no other call. For ours, the instance item's conditional update is the gate that
publishes a release exactly once (stopping then terminated, duplicates, retries); the pool's usage
follows the instance's membership, a conditional transition of its own, so a retry after a crash,
or the sync getting there first, never counts or releases an instance twice. A start (pending or
running after a stop) counts the instance again, even over the pool's limits: it runs, and
counting the truth keeps new launches out; the overrun is logged and measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from capacity_launcher.domain.capacity.offerings import RESERVED, offering_key
from capacity_launcher.domain.capacity.reservation_state import event_time, slot_counted_free
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.records.instance_records import INTERRUPTED, InstanceRecord
from capacity_launcher.domain.records.status import INSTANCE_TERMINATED, Event, format_timestamp
from capacity_launcher.observability import MetricUnit, logger, metrics
from capacity_launcher.service.accounting_ports import PoolMembers, PoolUsage
from capacity_launcher.service.ports import (
    Configuration,
    InstanceItems,
    ReservationStore,
    UnavailableCache,
)

STATE_CHANGE = "EC2 Instance State-change Notification"
# EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and CloudTrail":
# its pages spell the warning both ways (one of them names the reservation "Interruptible"), so
# both are matched (template.yaml's rule lists both too).
INTERRUPTION_WARNING = "EC2 Capacity Reservation Instance Interruption Warning"
INTERRUPTIBLE_INTERRUPTION_WARNING = (
    "EC2 Interruptible Capacity Reservation Instance Interruption Warning"
)
INTERRUPTION_WARNINGS = frozenset({INTERRUPTION_WARNING, INTERRUPTIBLE_INTERRUPTION_WARNING})
# States in which an instance no longer uses its pool's limits nor its reservation slot.
RELEASING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
# States in which it uses them again (after a stop; a new instance is counted by its launcher).
STARTING_STATES = frozenset({"pending", "running"})
# States it never leaves: a start event delivered after them is stale.
TERMINATED_STATES = frozenset({"shutting-down", "terminated", INTERRUPTED})
INTERRUPTION_REASON = "CapacityReservationInterruption"
INSTANCES_RELEASED = "InstancesReleased"
# A slot's release is decided again on what a sync wrote meanwhile, this many times at most.
RELEASE_TRIES = 3
RESERVATIONS_INTERRUPTED = "ReservationsInterrupted"
INSTANCES_RECOUNTED = "InstancesRecounted"
POOL_LIMIT_OVERRUNS = "PoolLimitOverruns"


@dataclass(frozen=True)
class Outcome:
    """What one event did: `ignored` (not ours, or nothing to do), `released`, `counted`
    (started again), `overrun` (started again, over its pool's limits), `duplicate`, `marked`
    (a reservation marked exhausted)."""

    action: str
    instance_id: str
    capacity_reservation_id: str | None = None


class InstanceEvents:
    def __init__(
        self,
        items: InstanceItems,
        members: PoolMembers,
        usage: PoolUsage,
        reservations: ReservationStore,
        unavailable: UnavailableCache,
        publish: Callable[..., None],
        now: Callable[[], datetime],
        pools: Configuration | None = None,
        wake: Callable[[str], object] | None = None,
    ) -> None:
        self._items = items
        # Room appeared in a pool: the head of its admission queue is woken (issue 37).
        self._wake = wake
        self._members = members
        self._usage = usage
        self._pools = pools
        self._reservations = reservations
        self._unavailable = unavailable
        self._publish = publish
        self._now = now

    def handle(self, detail_type: str, detail: Mapping[str, Any], time: object = None) -> Outcome:
        """One event; `time` is the envelope's, when EC2 saw the change (a late or retried
        delivery keeps it)."""
        instance_id = str(detail.get("instance-id", ""))
        if detail_type == STATE_CHANGE:
            return self.state_changed(instance_id, str(detail.get("state", "")), event_time(time))
        if detail_type in INTERRUPTION_WARNINGS:
            return self.interruption_warning(instance_id, detail.get("instance-termination-time"))
        logger.warning("unexpected event", extra={"detailType": detail_type})
        return Outcome("ignored", instance_id)

    def state_changed(
        self, instance_id: str, state: str, changed_at: datetime | None = None
    ) -> Outcome:
        if state not in RELEASING_STATES | STARTING_STATES or not instance_id:
            return Outcome("ignored", instance_id)
        item = self._items.get(instance_id)
        if item is None:
            return Outcome("ignored", instance_id)
        if state in STARTING_STATES:
            return self._started(instance_id, item)
        at = format_timestamp(self._now())
        released = self._items.release(instance_id, state, at)
        pool = (released or item).node_pool
        if pool:
            # After the gate, and on duplicates too: a retry finishes what a crash left undone.
            self._members.uncount_instance(pool, instance_id)
        if released is None:
            return Outcome("duplicate", instance_id, item.capacity_reservation_id)
        reservation_id = released.capacity_reservation_id
        if reservation_id:
            self._give_back_slot(str(reservation_id), changed_at)
        if released.request_id:
            self._items.note_on_request(released.request_id, instance_id, state)
        self._publish(Event(INSTANCE_TERMINATED, _detail(released, state, at)))
        metrics.add_metric(name=INSTANCES_RELEASED, unit=MetricUnit.Count, value=1)
        if pool:
            self._wake_queue(pool)
        logger.info(
            "instance released",
            extra={"instanceId": instance_id, "state": state, "nodePool": pool},
        )
        return Outcome("released", instance_id, reservation_id)

    def _wake_queue(self, pool: str) -> None:
        """Its room (the pool's limits, its requester's quota) may admit a waiting request; a
        wake that fails is the sync's minute's to do."""
        if self._wake is None:
            return
        try:
            self._wake(pool)
        except Exception:
            logger.exception("could not wake the pool's queue", extra={"nodePool": pool})

    def _give_back_slot(self, reservation_id: str, ended_at: datetime | None) -> None:
        """Its slot is free again, in the snapshot and for the ICE cache: a mark that said the
        reservation had no room (a worker's insufficient-capacity error, or an interruption
        seen on another instance) is lifted, because EC2 has just freed a slot in it. Left until
        the next sync, the next request would go on-demand and stay there for its instance's
        whole life while the slot sat idle; a mark lifted wrongly costs one CreateFleet that EC2
        refuses, which marks it again. Unless a sync wrote the snapshot from EC2 after the
        instance ended (`slot_counted_free`): EC2's count holds the slot free already, a launch
        may have taken it since, and what the sync wrote stands (the event came late)."""
        stored = self._reservations.get(reservation_id)
        for _ in range(RELEASE_TRIES):
            if stored is None:
                break  # no snapshot holds its slots: only the ICE cache's mark is lifted
            if slot_counted_free(stored, ended_at):
                logger.info(
                    "late release: the sync counted its slot free already",
                    extra={"capacityReservationId": reservation_id, "syncedAt": stored.synced_at},
                )
                return
            if self._reservations.release_slot(reservation_id, stored.synced_at):
                break
            again = self._reservations.get(reservation_id)
            if again is None or again.synced_at == stored.synced_at:
                break  # every slot free and no flag: nothing to give back
            stored = again  # a sync wrote it meanwhile: decide on what it wrote
        self._unavailable.clear(offering_key(RESERVED, None, None, reservation_id))

    def _started(self, instance_id: str, item: InstanceRecord) -> Outcome:
        """Count a started instance again; its launch counted it the first time (a no-op here)."""
        pool = item.node_pool
        reservation_id = item.capacity_reservation_id
        if not pool or item.state in TERMINATED_STATES:
            return Outcome("ignored", instance_id)  # a late `pending` of an instance now gone
        if item.released_at:
            self._items.rearm(instance_id)
        elif self._members.member(pool, instance_id) is not None:
            # Every launch's own events: one read, no transaction on the pool's hot usage item.
            return Outcome("duplicate", instance_id, reservation_id)
        counted = self._members.count(
            pool, instance_id, item.resources, unless_released=True, requester=item.requester
        )
        if not counted:
            return Outcome("duplicate", instance_id, reservation_id)
        metrics.add_metric(name=INSTANCES_RECOUNTED, unit=MetricUnit.Count, value=1)
        exceeded = self._exceeded(pool)
        if exceeded:
            metrics.add_metric(name=POOL_LIMIT_OVERRUNS, unit=MetricUnit.Count, value=1)
            logger.warning(
                "started instance overruns its pool's limits",
                extra={"instanceId": instance_id, "nodePool": pool, "exceeded": exceeded},
            )
            return Outcome("overrun", instance_id, reservation_id)
        logger.info("instance counted again", extra={"instanceId": instance_id, "nodePool": pool})
        return Outcome("counted", instance_id, reservation_id)

    def _exceeded(self, pool: str) -> list[str]:
        """The pool's limits its usage now exceeds (none if the pool or its limits are gone)."""
        if self._pools is None:
            return []
        try:
            limits = self._pools.node_pool(pool).spec.limits
        except CapacityLauncherError:  # deleted or unreadable: nothing to compare with
            return []
        return self._usage.usage(pool).fits_within(limits) if limits is not None else []

    def interruption_warning(
        self, instance_id: str, termination_time: str | None = None
    ) -> Outcome:
        """EC2 is reclaiming the reservation's capacity: no new launches into it until a sync, and
        the instance's pool usage is released now (once: its termination is then a duplicate), so
        its owner may launch a replacement elsewhere before it is gone."""
        item = self._items.get(instance_id) if instance_id else None
        if item is None or not item.capacity_reservation_id:
            return Outcome("ignored", instance_id)
        reservation_id = item.capacity_reservation_id
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
        at = format_timestamp(self._now())
        # Its slot is not given back: the capacity leaves the reservation with it.
        released = self._items.release(instance_id, INTERRUPTED, at)
        pool = (released or item).node_pool
        if pool:
            self._members.uncount_instance(pool, instance_id)
        if released is None:
            return Outcome("duplicate", instance_id, str(reservation_id))
        if released.request_id:
            self._items.note_on_request(released.request_id, instance_id, INTERRUPTED)
        detail = _detail(released, INTERRUPTED, at) | {"terminationTime": termination_time}
        self._publish(Event(INSTANCE_TERMINATED, detail))
        metrics.add_metric(name=INSTANCES_RELEASED, unit=MetricUnit.Count, value=1)
        return Outcome("marked", instance_id, str(reservation_id))


def _detail(item: InstanceRecord, state: str, at: str) -> dict[str, Any]:
    return {
        "instanceId": item.instance_id,
        "requestId": item.request_id,
        "nodePool": item.node_pool,
        "nodeClass": item.node_class,
        "requester": item.requester,
        "instanceType": item.instance_type,
        "zone": item.zone,
        "capacityType": item.capacity_type,
        "capacityReservationId": item.capacity_reservation_id,
        "state": state,
        "releasedAt": at,
    }
