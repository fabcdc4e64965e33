"""Interruptible Capacity Reservations: an owner lends unused reserved capacity and reclaims it.

EC2 User Guide, "Interruptible Capacity Reservations" (for capacity owners and consumers): the
source reservation must be `active`, without an end date, and have the unused capacity
allocated; one allocation per source, at most 1000 instances. The interruptible reservation is
`targeted` and serves only launches with market type `interruptible-capacity-reservation`.
Reclaiming (a lower TargetInstanceCount) warns the instances beyond the new size 2 minutes
before terminating them; then the capacity returns to the source and its owner is told.
"""

from typing import Any

from moto_capacity.ec2.exceptions import IncorrectState, InvalidParameterValue

from .backend import CAPACITY_LOCK, CapacityReservationBackend
from .lifecycle import start_interruption
from .reservations import ACTIVE, CANCELLED, DEFAULT_TYPE, CapacityReservation

MAX_ALLOCATION = 1000
ZERO_SIZE_PREFERENCES = ("retain", "default")


def _allocation_of(source: CapacityReservation) -> dict[str, Any] | None:
    allocation = source.interruptible_capacity_allocation
    if allocation is None or allocation["Status"] == "canceled":
        return None
    return allocation


def _check_zero_size(preference: str | None) -> None:
    if preference is not None and preference not in ZERO_SIZE_PREFERENCES:
        raise InvalidParameterValue(
            f"Value ({preference}) for parameter ZeroSizePreference is invalid."
        )


def create_allocation(
    backend: CapacityReservationBackend,
    source_id: str,
    instance_count: int,
    zero_size_preference: str | None,
    tags: dict[str, str],
) -> CapacityReservation:
    """Move `instance_count` unused slots of the source into a new interruptible reservation."""
    _check_zero_size(zero_size_preference)
    with CAPACITY_LOCK:
        source = backend.get_reservation(source_id)
        if source.state != ACTIVE or source.end_date_type != "unlimited":
            raise IncorrectState(
                f"Capacity Reservation {source_id} is {source.state} with end date type "
                f"{source.end_date_type}; only an active reservation without an end date can "
                "lend capacity."
            )
        if source.reservation_type != DEFAULT_TYPE or source.interruptible:
            raise InvalidParameterValue(
                f"Capacity Reservation {source_id} is not an On-Demand Capacity Reservation."
            )
        if _allocation_of(source) is not None:
            raise IncorrectState(
                f"Capacity Reservation {source_id} already has an interruptible allocation; "
                "modify it instead."
            )
        if not 1 <= instance_count <= min(MAX_ALLOCATION, source.available_instance_count):
            raise InvalidParameterValue(
                f"InstanceCount {instance_count} is invalid: {source_id} has "
                f"{source.available_instance_count} unused instances to allocate (at most "
                f"{MAX_ALLOCATION})."
            )
        lent = backend.create_reservation(
            instance_type=source.instance_type,
            instance_platform=source.instance_platform,
            availability_zone=source.availability_zone,
            availability_zone_id=source.availability_zone_id,
            instance_count=instance_count,
            tenancy=source.tenancy,
            instance_match_criteria="targeted",
        )
        lent.interruptible = True
        lent.interruption_info = {
            "SourceCapacityReservationId": source.id,
            "InterruptionType": "adhoc",
        }
        lent.zero_size_preference = zero_size_preference or "default"
        lent.add_tags(tags)
        source.total_instance_count -= instance_count
        source.interruptible_capacity_allocation = {
            "InstanceCount": instance_count,
            "TargetInstanceCount": instance_count,
            "Status": "active",
            "InterruptibleCapacityReservationId": lent.id,
            "InterruptionType": "adhoc",
            "ZeroSizePreference": lent.zero_size_preference,
        }
        return lent


def update_allocation(
    backend: CapacityReservationBackend,
    source_id: str,
    target: int,
    zero_size_preference: str | None,
) -> dict[str, Any]:
    """Lend more, or reclaim: instances beyond the new size get the 2-minute notice."""
    _check_zero_size(zero_size_preference)
    with CAPACITY_LOCK:
        source = backend.get_reservation(source_id)
        allocation = _allocation_of(source)
        if allocation is None:
            raise InvalidParameterValue(
                f"Capacity Reservation {source_id} has no interruptible allocation."
            )
        if allocation["Status"] != "active":
            raise IncorrectState(
                f"The interruptible allocation of {source_id} is {allocation['Status']}; wait "
                "until it is active."
            )
        lent = backend.reservations[allocation["InterruptibleCapacityReservationId"]]
        if zero_size_preference is not None:
            lent.zero_size_preference = zero_size_preference
            allocation["ZeroSizePreference"] = zero_size_preference
        current = lent.total_instance_count
        if not 0 <= target <= MAX_ALLOCATION:
            raise InvalidParameterValue(
                f"TargetInstanceCount {target} is invalid: 0 to {MAX_ALLOCATION}."
            )
        if target > current:
            more = target - current
            if more > source.available_instance_count:
                raise InvalidParameterValue(
                    f"{source_id} has {source.available_instance_count} unused instances; "
                    f"{more} more cannot be allocated."
                )
            source.total_instance_count -= more
            lent.total_instance_count = target
            allocation["InstanceCount"] = allocation["TargetInstanceCount"] = target
        elif target < current:
            lent.total_instance_count = target
            allocation["TargetInstanceCount"] = target
            allocation["Status"] = "updating"
            start_interruption(backend, lent, current - target)
        return {
            "InterruptibleCapacityReservationId": lent.id,
            "SourceCapacityReservationId": source.id,
            "InstanceCount": allocation["InstanceCount"],
            "TargetInstanceCount": allocation["TargetInstanceCount"],
            "Status": allocation["Status"],
            "InterruptionType": "adhoc",
        }


def reclaim(backend: CapacityReservationBackend, reservation_id: str, instance_count: int) -> None:
    """The owner takes `instance_count` back from an interruptible reservation (test control)."""
    with CAPACITY_LOCK:
        lent = backend.get_reservation(reservation_id)
        if not lent.interruptible or lent.interruption_info is None or lent.state == CANCELLED:
            raise ValueError(f"{reservation_id} is not a live interruptible Capacity Reservation")
        if isinstance(instance_count, bool) or not isinstance(instance_count, int):
            raise ValueError("instanceCount must be an integer")
        if not 1 <= instance_count <= lent.total_instance_count:
            raise ValueError(
                f"instanceCount must be 1 to {lent.total_instance_count} (the reservation's size)"
            )
        source_id = lent.interruption_info["SourceCapacityReservationId"]
        update_allocation(backend, source_id, lent.total_instance_count - instance_count, None)
