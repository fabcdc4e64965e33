"""The details of the status events whose detail is not a record model of its own: the
reservation sync's reservation events and instance events' `Instance Terminated`.

They state the contract `schemas/` publishes (and the EventBridge schema registry holds); the
events are built where they happen (domain/capacity/reservations.py, service/instance_events.py) and
a test holds what those build to these schemas. Consumers should ignore fields they do not know:
fields are only ever added.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Detail(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", defer_build=True
    )


class HeldInstanceDetail(_Detail):
    instance_id: str
    request_id: str | None


class ReservationEventDetail(_Detail):
    """The detail of every `Capacity Reservation …` event and of `Capacity Block Expiring`:
    the reservation as the sync saw it; the fields of one event type are set only on it."""

    capacity_reservation_id: str
    instance_type: str
    zone: str
    state: str
    total: int = Field(ge=0)
    available: int = Field(ge=0)
    utilization: float = Field(ge=0)
    reservation_type: str = Field(description="default or capacity-block")
    interruptible: bool
    start_date: str | None = Field(description="ISO-8601, null when EC2 names none")
    end_date: str | None = Field(description="ISO-8601, null for an open-ended reservation")
    groups: list[str] = Field(description="the reservation groups (ARNs) it belongs to")
    usage_by_requester: dict[str, int] = Field(
        description="our instances in it, by the requester they were launched for"
    )
    threshold: float | None = Field(
        default=None,
        description="Capacity Reservation Utilization High and Capacity Reservation "
        "Underutilized only",
    )
    horizon_hours: float | None = Field(
        default=None, description="Capacity Reservation Expiring only"
    )
    instances_terminated_at: str | None = Field(
        default=None,
        description="Capacity Block Expiring only: when EC2 terminates the block's instances "
        "(30 minutes before its end)",
    )
    seconds_until_termination: int | None = Field(
        default=None, description="Capacity Block Expiring only"
    )
    instances: list[HeldInstanceDetail] | None = Field(
        default=None, description="Capacity Block Expiring only: our instances it terminates"
    )
    request_ids: list[str] | None = Field(
        default=None, description="Capacity Block Expiring only: the requests they serve"
    )
    period_hours: float | None = Field(
        default=None,
        description="Capacity Reservation Underutilized only: the period's length; its "
        "utilization stayed below `threshold` at every look of the sync in it",
    )
    period_start: str | None = Field(
        default=None, description="Capacity Reservation Underutilized only: ISO-8601"
    )
    period_end: str | None = Field(
        default=None, description="Capacity Reservation Underutilized only: ISO-8601"
    )
    paid_instance_hours: float | None = Field(
        default=None,
        description="Capacity Reservation Underutilized only: instance-hours paid in the period",
    )
    used_instance_hours: float | None = Field(
        default=None,
        description="Capacity Reservation Underutilized only: instance-hours used in the period",
    )
    idle_instance_hours: float | None = Field(
        default=None,
        description="Capacity Reservation Underutilized only: instance-hours paid and unused",
    )
    period_utilization: float | None = Field(
        default=None, description="Capacity Reservation Underutilized only: used / paid"
    )
    peak_utilization: float | None = Field(
        default=None,
        description="Capacity Reservation Underutilized only: the highest utilization seen",
    )


class InstanceTerminatedDetail(_Detail):
    """The detail of `Instance Terminated`: one of our instances stopped, terminated or was
    interrupted, and its pool's limits and its reservation's slot were released."""

    instance_id: str
    request_id: str | None
    node_pool: str | None
    node_class: str | None
    requester: str | None
    instance_type: str | None
    zone: str | None
    capacity_type: str | None
    capacity_reservation_id: str | None
    state: str = Field(description="the EC2 state that released it, or interrupted")
    released_at: str = Field(description="ISO-8601 UTC with milliseconds and a Z")
    termination_time: str | None = Field(
        default=None, description="an interrupted reservation's: when EC2 terminates it"
    )


class BlockEndDetail(_Detail):
    """The detail of `Capacity Block Evacuating` and `Capacity Block Extension Purchased`: what a
    static pool's `capacityBlockEnd`, or a launch request's that opted in, made the sync do for
    one Capacity Block nearing its end, and why (docs/static-capacity.md)."""

    node_pool: str
    capacity_reservation_id: str
    instance_type: str
    zone: str
    end_date: str = Field(description="ISO-8601: the block's end date the choice was for")
    instances_terminated_at: str = Field(
        description="when EC2 terminates the block's instances (30 minutes before its end)"
    )
    action: str = Field(description="Evacuate or Extend")
    reason: str = Field(
        description="PolicyEvacuate, NoExtensionOffered, NoOfferingWithinPrice, TooLateToExtend, "
        "ExtensionUnpaid, ExtensionPurchaseFailed (Evacuate); OfferingWithinPrice (Extend)"
    )
    instances: list[str] = Field(
        description="the pool's instances in the block (for a request: the request's)"
    )
    offering_id: str | None = Field(default=None, description="Extend only: the offering bought")
    extension_end_date: str | None = Field(
        default=None,
        description="Extend only: ISO-8601, the block's end once the extension is paid",
    )
    extension_hours: int | None = Field(default=None, description="Extend only")
    upfront_fee: str | None = Field(default=None, description="Extend only: as EC2 states it")
    currency_code: str | None = Field(default=None, description="Extend only")
    max_extension_price: str | None = Field(
        default=None, description="the pool's maxExtensionPrice, when it sets one"
    )
    request_id: str | None = Field(
        default=None,
        description="Evacuate, for a launch request that opted in (capacityBlockEnd): the request "
        "whose instances in the block are replaced (absent for a static pool)",
    )
    replacement_request_id: str | None = Field(
        default=None,
        description="with requestId: the replacement launch's request id (its own record and "
        "events)",
    )
    request_ids: list[str] | None = Field(
        default=None,
        description="Extend, for launch requests that opted in: the requests whose instances the "
        "extension keeps (absent for a static pool)",
    )
