"""The capacity backend: reservations per account and region, the slots instances hold, shared
pools. It lives inside moto's EC2 backend, so moto's reset discards both together."""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from moto_capacity.core.clock import CLOCK, aware
from moto_capacity.ec2.exceptions import (
    CapacityReservationIdMalformed,
    CapacityReservationNotFound,
    IncorrectState,
    InvalidParameterValue,
    UnsupportedOperation,
)
from moto_capacity.resourcegroups import models as groups

from .future_dated import delivered
from .launches import InstanceAttributes, ReservationPreference
from .lifecycle import Interruption, settle
from .offerings import Offering, OfferingPools
from .reservations import (
    ACTIVE,
    ASSESSING,
    CANCELLED,
    CAPACITY_BLOCK,
    DELAYED,
    CapacityReservation,
)
from .settling import ReservationTable

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
    reservations: dict[str, CapacityReservation] = field(default_factory=ReservationTable)
    instances: dict[str, InstanceCapacity] = field(default_factory=dict)
    fleet_records: dict[str, FleetRecord] = field(default_factory=dict)
    capacity_blocks: dict[str, Any] = field(default_factory=dict)
    block_offerings: dict[str, Any] = field(default_factory=dict)
    block_extension_offerings: dict[str, Any] = field(default_factory=dict)
    interruptions: list[Interruption] = field(default_factory=list)
    _token_locks: dict[str, threading.Lock] = field(default_factory=dict)

    @property
    def account_id(self) -> str:
        return str(self.ec2_backend.account_id)

    @property
    def region(self) -> str:
        return str(self.ec2_backend.region_name)

    def create_reservation(
        self,
        schedule: Callable[[CapacityReservation], None] | None = None,
        **attributes: Any,
    ) -> CapacityReservation:
        """A new reservation; `schedule` makes it future-dated before anything sees it."""
        with CAPACITY_LOCK:
            reservation = CapacityReservation(self.ec2_backend, **attributes)
            if schedule is not None:
                schedule(reservation)
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
            _refuse_unmodifiable(reservation)
            if instance_count is not None and instance_count < 1:
                raise InvalidParameterValue("InstanceCount must be at least 1.")
            self._refuse_breaking_commitment(reservation, instance_count, end_date)
            _refuse_modification(reservation, end_date_type, end_date, instance_match_criteria)
            _modify(reservation, instance_count, end_date_type, end_date, instance_match_criteria)
            self.expire_due_reservations()

    def _refuse_breaking_commitment(
        self,
        reservation: CapacityReservation,
        instance_count: int | None,
        end_date: datetime | None,
    ) -> None:
        """A commitment in force holds the count at or above its committed count, and the end
        date at or after its end."""
        commitment = self.commitment_in_force(reservation)
        committed = commitment["CommittedInstanceCount"] if commitment else 0
        if instance_count is not None and instance_count < committed:
            raise InvalidParameterValue(
                f"InstanceCount cannot go below the committed instance count ({committed}) "
                "before the commitment duration ends."
            )
        if (
            commitment
            and end_date is not None
            and (aware(end_date) < aware(commitment["CommitmentEndDate"]))
        ):
            raise InvalidParameterValue(
                "EndDate cannot be before the end of the commitment duration."
            )

    def cancel_reservation(self, reservation_id: str) -> None:
        """ "Cancel a Capacity Reservation": `active`, or `assessing` for a future-dated one, and
        never during a commitment; a Capacity Block cannot be cancelled."""
        with CAPACITY_LOCK:
            reservation = self.get_reservation(reservation_id)
            if reservation.reservation_type == CAPACITY_BLOCK:
                raise UnsupportedOperation("A Capacity Block cannot be cancelled.")
            cancellable = (ACTIVE, ASSESSING) if reservation.is_future_dated else (ACTIVE,)
            if reservation.state not in cancellable:
                raise IncorrectState(
                    f"Capacity Reservation {reservation_id} is {reservation.state}; it can be "
                    f"cancelled only when {' or '.join(cancellable)}."
                )
            commitment = self.commitment_in_force(reservation)
            if commitment is not None:
                raise IncorrectState(
                    f"Capacity Reservation {reservation_id} is committed until "
                    f"{commitment['CommitmentEndDate'].isoformat()} and cannot be cancelled "
                    "before then."
                )
            if reservation.interruptible_capacity_allocation and (
                reservation.interruptible_capacity_allocation["Status"] != "canceled"
            ):
                raise IncorrectState(
                    f"Capacity Reservation {reservation_id} has an interruptible allocation; "
                    "reclaim it first."
                )
            self.end_reservation(reservation, CANCELLED)

    def commitment_in_force(self, reservation: CapacityReservation) -> dict[str, Any] | None:
        """The commitment of a delivered future-dated reservation, until it lapses."""
        commitment = reservation.commitment_info
        if commitment is None or reservation.commitment_waived or reservation.state != ACTIVE:
            return None
        if aware(commitment["CommitmentEndDate"]) <= CLOCK.now():
            return None
        return commitment

    def expire_due_reservations(self) -> None:
        """Apply every lifecycle transition due by now (see `lifecycle.settle`): expiry at the
        end date, activation at the start date, block endings, interruptions; newly active
        reservations take in running instances."""
        with CAPACITY_LOCK:
            settle(self)

    def force_state(self, reservation_id: str, state: str) -> None:
        """A test control: EC2's own outcomes for a future-dated request that the clock cannot
        produce (`delayed`, `unsupported`), or the delivery of a delayed one (`active`)."""
        allowed = {
            DELAYED: (ASSESSING, "scheduled"),
            "unsupported": (ASSESSING,),
            ACTIVE: (DELAYED,),
            "payment-failed": ("payment-pending",),
        }
        with CAPACITY_LOCK:
            reservation = self.get_reservation(reservation_id)
            if state not in allowed:
                raise ValueError(f"state must be one of {sorted(allowed)}, got {state!r}")
            if reservation.state not in allowed[state]:
                raise ValueError(
                    f"{reservation_id} is {reservation.state}; {state} can follow only "
                    f"{' or '.join(allowed[state])}"
                )
            if state == DELAYED:
                # "Cancel a Capacity Reservation": a delayed request's commitment is waived.
                reservation.commitment_waived = True
            reservation.move_to(state)
            if state == ACTIVE:
                delivered(reservation, CLOCK.now())
            self.expire_due_reservations()

    def terminate(self, instance_ids: list[str]) -> None:
        """EC2 terminating instances itself (block end, interruption); frees their slots."""
        running = [i for i in instance_ids if self.ec2_backend.get_instance_by_id(i) is not None]
        if running:
            self.ec2_backend.terminate_instances(running)

    def take_in_running_instances(self, reservation: CapacityReservation) -> None:
        """Running On-Demand instances that match an active reservation run in it from now on,
        if they may use it: open preference for an `open` one, or a group target naming a group
        it belongs to ("Launch instances into an existing Capacity Reservation")."""
        with CAPACITY_LOCK:
            for instance_id, capacity in self.instances.items():
                if reservation.available_instance_count <= 0:
                    return
                if capacity.capacity_type != reservation.market or (
                    capacity.slot is not None and capacity.slot.reservation_id
                ):
                    continue
                if reservation.mismatch(capacity.attributes) is not None:
                    continue
                if not self._may_run_in(reservation, capacity.preference):
                    continue
                instance = self.ec2_backend.get_instance_by_id(instance_id)
                if instance is None or not instance.is_running():
                    continue
                if capacity.slot is not None:
                    self.release_slots([capacity.slot])
                capacity.slot = Slot(reservation_id=reservation.id)
                reservation.used += 1
                reservation.instance_ids.add(instance_id)
                instance.capacity_reservation_id = reservation.id

    def _may_run_in(
        self, reservation: CapacityReservation, preference: ReservationPreference
    ) -> bool:
        """An open preference may run in an `open` reservation; a group target, in a
        reservation of the group it names."""
        if (
            reservation.instance_match_criteria == "open"
            and preference.preference in (None, "open")
            and not (preference.reservation_id or preference.group_arn)
        ):
            return True
        if not preference.group_arn:
            return False
        group = groups.find_group(self.account_id, self.region, preference.group_arn)
        return group is not None and reservation.id in groups.reservation_ids_in(group)

    def end_reservation(self, reservation: CapacityReservation, state: str) -> None:
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
            group = capacity.attributes.placement_group
            if slot.reservation_id:
                reservation = self.reservations[slot.reservation_id]
                reservation.instance_ids.add(instance.id)
                # An instance in a placement group's reservation runs in that placement group.
                group = reservation.placement_group or group
            instance.placement.group_name = group or ""

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


def _refuse_unmodifiable(reservation: CapacityReservation) -> None:
    """Only an active reservation, and never a Capacity Block, can be modified."""
    if reservation.reservation_type == CAPACITY_BLOCK:
        raise UnsupportedOperation("A Capacity Block cannot be modified.")
    if not reservation.is_active:
        raise IncorrectState(
            f"Capacity Reservation {reservation.id} is {reservation.state}; only active "
            "Capacity Reservations can be modified."
        )


def _refuse_modification(
    reservation: CapacityReservation,
    end_date_type: str | None,
    end_date: datetime | None,
    instance_match_criteria: str | None,
) -> None:
    """The eligibility changes only while idle; EndDate goes exactly with a limited end."""
    if instance_match_criteria and reservation.used:
        raise IncorrectState(
            "Instance eligibility can be changed only while the reservation is idle."
        )
    if end_date_type == "unlimited" and end_date is not None:
        raise InvalidParameterValue("EndDate cannot be set when EndDateType is unlimited.")
    if end_date_type == "limited" and end_date is None:
        raise InvalidParameterValue("EndDate is required when EndDateType is limited.")


def _modify(
    reservation: CapacityReservation,
    instance_count: int | None,
    end_date_type: str | None,
    end_date: datetime | None,
    instance_match_criteria: str | None,
) -> None:
    """What was given replaces what was there; an EndDate alone makes the end limited."""
    if instance_count is not None:
        reservation.total_instance_count = instance_count
    if end_date_type:
        reservation.end_date_type = end_date_type
        reservation.end_date = end_date
    elif end_date is not None:
        reservation.end_date_type, reservation.end_date = "limited", end_date
    if instance_match_criteria:
        reservation.instance_match_criteria = instance_match_criteria
