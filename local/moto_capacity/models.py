"""Backend state: reservations per account and region, the slots instances hold, shared pools."""

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .exceptions import (
    CapacityReservationIdMalformed,
    CapacityReservationNotFound,
    IncorrectState,
    InvalidParameterValue,
)
from .launches import InstanceAttributes, ReservationPreference
from .offerings import Offering, OfferingPools
from .reservations import CANCELLED, EXPIRED, CapacityReservation

# One lock for every capacity count, so concurrent launches can never oversubscribe.
CAPACITY_LOCK = threading.RLock()
OFFERING_POOLS = OfferingPools()
_BACKEND_ATTRIBUTE = "capacity_reservation_backend"


@dataclass(frozen=True)
class Slot:
    """Where one instance runs: in a reservation, or on capacity taken from a finite pool."""

    reservation_id: str | None = None
    pool: Offering | None = None


@dataclass
class InstanceCapacity:
    """What an instance launched through this extension holds and asked for."""

    slot: Slot | None
    attributes: InstanceAttributes
    preference: ReservationPreference
    capacity_type: str


@dataclass
class FleetRecord:
    """A CreateFleet answer remembered under its ClientToken."""

    fingerprint: str
    result: dict[str, Any]


@dataclass
class CapacityReservationBackend:
    """Capacity Reservations of one account and region, living inside moto's EC2 backend."""

    ec2_backend: Any
    reservations: dict[str, CapacityReservation] = field(default_factory=dict)
    instances: dict[str, InstanceCapacity] = field(default_factory=dict)
    fleet_records: dict[str, FleetRecord] = field(default_factory=dict)
    _token_locks: dict[str, threading.Lock] = field(default_factory=dict)

    @property
    def account_id(self) -> str:
        return str(self.ec2_backend.account_id)

    @property
    def region(self) -> str:
        return str(self.ec2_backend.region_name)

    def create_reservation(self, **attributes: Any) -> CapacityReservation:
        with CAPACITY_LOCK:
            reservation = CapacityReservation(self.ec2_backend, **attributes)
            self.reservations[reservation.id] = reservation
            self.expire_due_reservations()
            return reservation

    def get_reservation(self, reservation_id: str) -> CapacityReservation:
        if not reservation_id.startswith("cr-"):
            raise CapacityReservationIdMalformed(reservation_id)
        with CAPACITY_LOCK:
            self.expire_due_reservations()
            if reservation_id not in self.reservations:
                raise CapacityReservationNotFound(reservation_id)
            return self.reservations[reservation_id]

    def describe_reservations(
        self, reservation_ids: list[str], filters: dict[str, list[str]]
    ) -> list[CapacityReservation]:
        with CAPACITY_LOCK:
            found = [self.get_reservation(rid) for rid in reservation_ids]
            if not reservation_ids:
                found = list(self.reservations.values())
            return [reservation for reservation in found if reservation.matches_filters(filters)]

    def modify_reservation(
        self,
        reservation_id: str,
        instance_count: int | None,
        end_date_type: str | None,
        end_date: datetime | None,
        instance_match_criteria: str | None,
    ) -> None:
        with CAPACITY_LOCK:
            reservation = self.get_reservation(reservation_id)
            if not reservation.is_active:
                raise IncorrectState(
                    f"Capacity Reservation {reservation_id} is {reservation.state}; only active "
                    "Capacity Reservations can be modified."
                )
            if instance_count is not None and instance_count < 1:
                raise InvalidParameterValue("InstanceCount must be at least 1.")
            if instance_match_criteria and reservation.used:
                raise IncorrectState(
                    "Instance eligibility can be changed only while the reservation is idle."
                )
            if end_date_type == "unlimited" and end_date is not None:
                raise InvalidParameterValue("EndDate cannot be set when EndDateType is unlimited.")
            if end_date_type == "limited" and end_date is None:
                raise InvalidParameterValue("EndDate is required when EndDateType is limited.")
            if instance_count is not None:
                reservation.total_instance_count = instance_count
            if end_date_type:
                reservation.end_date_type = end_date_type
                reservation.end_date = end_date
            elif end_date is not None:
                reservation.end_date_type, reservation.end_date = "limited", end_date
            if instance_match_criteria:
                reservation.instance_match_criteria = instance_match_criteria
            self.expire_due_reservations()

    def cancel_reservation(self, reservation_id: str) -> None:
        with CAPACITY_LOCK:
            reservation = self.get_reservation(reservation_id)
            if not reservation.is_active:
                raise IncorrectState(f"Capacity Reservation {reservation_id} is not active.")
            self._end(reservation, CANCELLED)

    def expire_due_reservations(self) -> None:
        """Reservations whose EndDate has passed turn `expired`, and newly active ones take in
        running instances, when next looked at."""
        with CAPACITY_LOCK:
            for reservation in list(self.reservations.values()):
                if reservation.is_due_to_expire():
                    self._end(reservation, EXPIRED)
                elif reservation.is_active and not reservation.took_in_running:
                    reservation.took_in_running = True
                    self.take_in_running_instances(reservation)

    def take_in_running_instances(self, reservation: CapacityReservation) -> None:
        """Running On-Demand instances that match an active reservation run in it from now on,
        if they may use it: open preference for an `open` one, or a group target naming a group
        it belongs to ("Launch instances into an existing Capacity Reservation")."""
        from . import groups

        with CAPACITY_LOCK:
            for instance_id, capacity in self.instances.items():
                if reservation.available_instance_count <= 0:
                    return
                if capacity.capacity_type != "on-demand" or (
                    capacity.slot is not None and capacity.slot.reservation_id
                ):
                    continue
                if reservation.mismatch(capacity.attributes) is not None:
                    continue
                preference = capacity.preference
                open_ok = (
                    reservation.instance_match_criteria == "open"
                    and preference.preference in (None, "open")
                    and not (preference.reservation_id or preference.group_arn)
                )
                group = (
                    groups.find_group(self.account_id, self.region, preference.group_arn)
                    if preference.group_arn
                    else None
                )
                group_ok = group is not None and reservation.id in groups.reservation_ids_in(group)
                instance = self.ec2_backend.get_instance_by_id(instance_id)
                if not (open_ok or group_ok) or instance is None or not instance.is_running():
                    continue
                if capacity.slot is not None:
                    self.release_slots([capacity.slot])
                capacity.slot = Slot(reservation_id=reservation.id)
                reservation.used += 1
                reservation.instance_ids.add(instance_id)
                instance.capacity_reservation_id = reservation.id

    def _end(self, reservation: CapacityReservation, state: str) -> None:
        # Instances keep running after their reservation ends, as On-Demand instances.
        reservation.end(state)
        for instance_id in list(reservation.instance_ids):
            self.instances[instance_id].slot = None
            instance = self.ec2_backend.get_instance_by_id(instance_id)
            if instance is not None:
                instance.capacity_reservation_id = None
        reservation.instance_ids.clear()
        reservation.used = 0

    def attach(self, instance: Any, slot: Slot, capacity: InstanceCapacity) -> None:
        """Record that a freshly launched instance holds `slot`."""
        with CAPACITY_LOCK:
            self.instances[instance.id] = capacity
            instance.capacity_reservation_id = slot.reservation_id
            instance.capacity_reservation_specification = (
                capacity.preference.as_instance_specification()
            )
            if slot.reservation_id:
                self.reservations[slot.reservation_id].instance_ids.add(instance.id)

    def release_instance(self, instance: Any) -> None:
        """A stopped or terminated instance gives its slot back."""
        with CAPACITY_LOCK:
            capacity = self.instances.get(instance.id)
            if capacity is None or capacity.slot is None:
                return
            self.release_slots([capacity.slot])
            if capacity.slot.reservation_id:
                self.reservations[capacity.slot.reservation_id].instance_ids.discard(instance.id)
            capacity.slot = None
            instance.capacity_reservation_id = None

    def release_slots(self, slots: list[Slot]) -> None:
        with CAPACITY_LOCK:
            for slot in slots:
                if slot.reservation_id:
                    reservation = self.reservations[slot.reservation_id]
                    reservation.used = max(0, reservation.used - 1)
                if slot.pool:
                    OFFERING_POOLS.give_back(slot.pool)

    def client_token_lock(self, client_token: str) -> threading.Lock:
        """Serialises CreateFleet calls sharing a ClientToken, so only one of them launches."""
        with CAPACITY_LOCK:
            return self._token_locks.setdefault(client_token, threading.Lock())


def capacity_backend(ec2_backend: Any) -> CapacityReservationBackend:
    """The capacity backend of an EC2 backend; moto's reset discards both together."""
    with CAPACITY_LOCK:
        backend = ec2_backend.__dict__.get(_BACKEND_ATTRIBUTE)
        if backend is None:
            backend = CapacityReservationBackend(ec2_backend)
            ec2_backend.__dict__[_BACKEND_ATTRIBUTE] = backend
        return backend


def existing_capacity_backend(ec2_backend: Any) -> CapacityReservationBackend | None:
    return ec2_backend.__dict__.get(_BACKEND_ATTRIBUTE)


def all_capacity_backends() -> list[CapacityReservationBackend]:
    from moto.ec2.models import ec2_backends

    found = []
    for account_backends in list(dict.values(ec2_backends)):
        for ec2_backend in list(dict.values(account_backends)):
            backend = existing_capacity_backend(ec2_backend)
            if backend is not None:
                found.append(backend)
    return found
