"""Future-dated Capacity Reservations: what CreateCapacityReservation accepts with a StartDate.

EC2 API Reference, "CreateCapacityReservation", and EC2 User Guide, "Concepts for Amazon EC2
Capacity Reservations" / "Create a Capacity Reservation": StartDate, CommitmentDuration and
DeliveryPreference come together; the start is 5 to 120 days ahead; the commitment lasts at
least 14 days; DeliveryPreference is `incremental`; InstanceMatchCriteria must be `targeted`;
only the C, M, R, I, T and G families, for at least 32 vCPUs in all; an end date cannot fall
inside the commitment. The request is `assessing`, then `scheduled`, then `active` at its start
(see `lifecycle`); EC2 may instead answer `delayed` or `unsupported` (a test control).
"""

import re
from datetime import datetime, timedelta
from typing import Any

from moto.ec2.models.instance_types import INSTANCE_TYPES

from moto_capacity.core.clock import CLOCK, aware
from moto_capacity.ec2.exceptions import (
    InvalidParameterCombination,
    InvalidParameterValue,
    MissingParameter,
)

from .reservations import ASSESSING, CapacityReservation

EARLIEST_START = timedelta(days=5)
LATEST_START = timedelta(days=120)
MINIMUM_COMMITMENT_SECONDS = 14 * 24 * 3600
MINIMUM_VCPUS = 32
FAMILIES = ("c", "m", "r", "i", "t", "g")
DELIVERY_PREFERENCES = ("incremental",)


class FutureDatedSettings:
    """How long the emulator keeps a future-dated request `assessing` (EC2 names no figure)."""

    DEFAULT_ASSESSMENT_SECONDS = 3600.0

    def __init__(self) -> None:
        self.assessment_seconds = self.DEFAULT_ASSESSMENT_SECONDS

    def reset(self) -> None:
        self.assessment_seconds = self.DEFAULT_ASSESSMENT_SECONDS


FUTURE_DATED_SETTINGS = FutureDatedSettings()


def is_future_dated(params: dict[str, Any]) -> bool:
    named = [
        name
        for name in ("StartDate", "CommitmentDuration", "DeliveryPreference")
        if params.get(name) is not None
    ]
    if named and "StartDate" not in named:
        raise InvalidParameterCombination(
            f"{' and '.join(named)} can be given only with StartDate (future-dated reservations)."
        )
    return bool(named)


def check_request(
    instance_type: str,
    instance_count: int,
    instance_match_criteria: str | None,
    start_date: datetime,
    commitment_seconds: int | None,
    delivery_preference: str | None,
    end_date: datetime | None,
) -> None:
    """Refuse what EC2 refuses for a future-dated request, naming the rule."""
    if commitment_seconds is None:
        raise MissingParameter("A future-dated Capacity Reservation needs CommitmentDuration.")
    if delivery_preference is None:
        raise MissingParameter("A future-dated Capacity Reservation needs DeliveryPreference.")
    if delivery_preference not in DELIVERY_PREFERENCES:
        raise InvalidParameterValue(
            f"DeliveryPreference {delivery_preference} is not supported; use incremental."
        )
    now = CLOCK.now()
    if not now + EARLIEST_START <= aware(start_date) <= now + LATEST_START:
        raise InvalidParameterValue("StartDate must be between 5 and 120 days from now.")
    if commitment_seconds < MINIMUM_COMMITMENT_SECONDS:
        raise InvalidParameterValue(
            f"CommitmentDuration must be at least {MINIMUM_COMMITMENT_SECONDS} seconds (14 days)."
        )
    if instance_match_criteria != "targeted":
        raise InvalidParameterValue(
            "A future-dated Capacity Reservation must have InstanceMatchCriteria targeted."
        )
    family = re.match(r"[a-z]+", instance_type)
    if family is None or family.group() not in FAMILIES:
        raise InvalidParameterValue(
            f"Future-dated Capacity Reservations support the C, M, R, I, T and G instance "
            f"families only, not {instance_type}."
        )
    vcpus = (INSTANCE_TYPES.get(instance_type) or {}).get("VCpuInfo", {}).get("DefaultVCpus")
    if vcpus is not None and vcpus * instance_count < MINIMUM_VCPUS:
        raise InvalidParameterValue(
            f"A future-dated Capacity Reservation needs at least {MINIMUM_VCPUS} vCPUs: "
            f"{instance_count} x {instance_type} is {vcpus * instance_count}."
        )
    commitment_end = aware(start_date) + timedelta(seconds=commitment_seconds)
    if end_date is not None and aware(end_date) < commitment_end:
        raise InvalidParameterValue("EndDate cannot fall within the commitment duration.")


def schedule(
    reservation: CapacityReservation,
    start_date: datetime,
    commitment_seconds: int,
    delivery_preference: str,
) -> None:
    """Make a freshly created reservation a future-dated request under assessment."""
    reservation.start_date = aware(start_date)
    reservation.delivery_preference = delivery_preference
    reservation.commitment_info = {
        "CommittedInstanceCount": reservation.total_instance_count,
        "CommitmentDuration": commitment_seconds,
        "CommitmentEndDate": aware(start_date) + timedelta(seconds=commitment_seconds),
    }
    reservation.move_to(ASSESSING)
    reservation.assessed_at = reservation.create_date + timedelta(
        seconds=FUTURE_DATED_SETTINGS.assessment_seconds
    )


def delivered(reservation: CapacityReservation, at: datetime) -> None:
    """ "The commit duration starts as soon as the Capacity Reservation is provisioned"."""
    if reservation.commitment_info is not None:
        duration = timedelta(seconds=reservation.commitment_info["CommitmentDuration"])
        reservation.commitment_info["CommitmentEndDate"] = aware(at) + duration
