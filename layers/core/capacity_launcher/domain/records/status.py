"""The request record (what happened to one launch request) and the event names we publish.

The record is the status JSON of docs/contracts.md (Status) exactly: it is both the
``capacity-launcher status`` output and the ``detail`` of the Launch Fulfilled / Partially
Fulfilled / Failed / Rejected events, and of Launch Waiting while a request waits for scheduled
reserved capacity (`waitForCapacityUntil`; the only status that is not final).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

from capacity_launcher.domain.records.detail_limits import MAX_LEFT_OUT_NAMED, fit_detail

EVENT_SOURCE = "capacity-launcher"
LAUNCH_REQUESTED = "Launch Requested"
RESERVATION_EXHAUSTED = "Capacity Reservation Exhausted"
RESERVATION_REPLENISHED = "Capacity Reservation Replenished"
RESERVATION_UTILIZATION_HIGH = "Capacity Reservation Utilization High"
RESERVATION_UNDERUTILIZED = "Capacity Reservation Underutilized"
RESERVATION_EXPIRING = "Capacity Reservation Expiring"
RESERVATION_ACTIVATED = "Capacity Reservation Activated"
BLOCK_EXPIRING = "Capacity Block Expiring"
RESERVATION_EXPIRED = "Capacity Reservation Expired"
INSTANCE_TERMINATED = "Instance Terminated"
RECLAIM_REQUESTED = "Capacity Reclaim Requested"
RECLAIM_CLOSED = "Capacity Reclaim Closed"
# What a static pool did before a Capacity Block holding its instances ends (block_ends.py).
BLOCK_EVACUATING = "Capacity Block Evacuating"
BLOCK_EXTENSION_PURCHASED = "Capacity Block Extension Purchased"
BLOCK_END_DETAIL_TYPES: tuple[str, ...] = (BLOCK_EVACUATING, BLOCK_EXTENSION_PURCHASED)


@dataclass(frozen=True)
class Event:
    """One event for the service's bus: its detail-type, detail and resources."""

    detail_type: str
    detail: Mapping[str, Any]
    resources: Sequence[str] = field(default_factory=tuple)


CapacityTypeName = Literal["reserved", "on-demand", "spot"]


class RequestStatus(StrEnum):
    FULFILLED = "Fulfilled"
    PARTIALLY_FULFILLED = "PartiallyFulfilled"
    FAILED = "Failed"
    REJECTED = "Rejected"
    # Not final: waiting for a scheduled reservation to become active (waitForCapacityUntil).
    WAITING = "Waiting"


# The error code of a request whose awaited reservations were not active by its deadline.
CAPACITY_NOT_ACTIVE_BY_DEADLINE = "CapacityNotActiveByDeadline"

DETAIL_TYPES: dict[RequestStatus, str] = {
    RequestStatus.FULFILLED: "Launch Fulfilled",
    RequestStatus.PARTIALLY_FULFILLED: "Launch Partially Fulfilled",
    RequestStatus.FAILED: "Launch Failed",
    RequestStatus.REJECTED: "Launch Rejected",
    RequestStatus.WAITING: "Launch Waiting",
}
# What the reservation sync says of a reservation (one detail: schemas/reservation-event.json).
RESERVATION_DETAIL_TYPES: tuple[str, ...] = (
    RESERVATION_EXHAUSTED,
    RESERVATION_REPLENISHED,
    RESERVATION_UTILIZATION_HIGH,
    RESERVATION_EXPIRING,
    RESERVATION_ACTIVATED,
    BLOCK_EXPIRING,
    RESERVATION_EXPIRED,
    RESERVATION_UNDERUTILIZED,
)
# Every detail-type we publish, for rules and consumers that subscribe to all of them.
ALL_DETAIL_TYPES: tuple[str, ...] = (
    *DETAIL_TYPES.values(),
    *RESERVATION_DETAIL_TYPES,
    INSTANCE_TERMINATED,
    RECLAIM_REQUESTED,
    RECLAIM_CLOSED,
    *BLOCK_END_DETAIL_TYPES,
)


def status_for(requested: int, launched: int, min_count: int) -> RequestStatus:
    """Fulfilled when all launched; PartiallyFulfilled when at least minCount (and at least one)
    did; Failed otherwise (the gang's instances are then terminated by the caller)."""
    if launched >= requested:
        return RequestStatus.FULFILLED
    if launched >= max(min_count, 1):
        return RequestStatus.PARTIALLY_FULFILLED
    return RequestStatus.FAILED


class _Record(BaseModel):
    """camelCase on the wire; tolerant of extra attributes when read back from storage."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    def to_dict(self) -> dict[str, Any]:
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return dumped


def _utc(moment: datetime) -> datetime:
    """Naive times are taken as UTC; precision is kept to the millisecond the record shows."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.replace(microsecond=aware.microsecond // 1000 * 1000)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with a 'Z' and milliseconds: 2026-01-02T03:04:05.678Z."""
    return _utc(moment).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A time in the record: UTC to the millisecond, written as a 'Z' timestamp.
Timestamp = Annotated[
    datetime, AfterValidator(_utc), PlainSerializer(format_timestamp, return_type=str)
]


class LaunchedInstance(_Record):
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: CapacityTypeName
    capacity_reservation_id: str | None = None
    # Of the reservation it landed in (null outside one): `default` or `capacity-block`, and
    # its dates (a Capacity Block's instances are terminated 30 minutes before its end).
    capacity_reservation_type: str | None = None
    capacity_reservation_start_date: Timestamp | None = None
    capacity_reservation_end_date: Timestamp | None = None


# What a Waiting request waits for (a waitingFor entry's `kind`): a scheduled reservation (the
# first kind; entries without `kind` are these), room in its team's quota, room in its pool's
# limits, or capacity where every offering it may use is dry (docs/queueing.md).
AwaitedKind = Literal["Reservation", "Quota", "Limit", "Capacity"]
AWAITS_RESERVATION: AwaitedKind = "Reservation"
AWAITS_QUOTA: AwaitedKind = "Quota"
AWAITS_LIMIT: AwaitedKind = "Limit"
AWAITS_CAPACITY: AwaitedKind = "Capacity"


def _unset(value: object) -> bool:
    return value is None or value == []


class AwaitedReservation(_Record):
    """What a Waiting request waits for, as last seen: a scheduled reservation (`kind`
    Reservation, the reservation fields set), or (additive kinds) room in a quota, in a pool's
    limits, or capacity (their own fields set). An entry shows only its kind's fields: a
    reservation's entry is as it always was (no `kind`)."""

    capacity_reservation_id: str | None = Field(default=None, exclude_if=_unset)
    state: str | None = Field(default=None, exclude_if=_unset)
    capacity_reservation_type: str | None = Field(default=None, exclude_if=_unset)
    start_date: Timestamp | None = None
    kind: AwaitedKind = Field(
        default="Reservation",
        exclude_if=lambda kind: kind == "Reservation",
        description="absent or Reservation (a scheduled reservation), Quota (room in a "
        "CapacityQuota), Limit (room in a NodePool's limits) or Capacity (every offering it may "
        "use is dry)",
    )
    node_pool: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Quota, Limit, Capacity: the NodePool it waits in",
    )
    quota: str | None = Field(
        default=None, exclude_if=_unset, description="Quota: the CapacityQuota it waits for"
    )
    resource: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Quota: the resource (cpu, memory, nvidia.com/gpu, instances)",
    )
    needed: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Quota: how much more of the resource must be free, in its unit",
    )
    reason: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Quota, Limit, Capacity: the refusal it waits out",
    )
    offerings: list[str] = Field(
        default=[],
        exclude_if=_unset,
        description="Capacity: the dry offerings (instanceType/zone/capacityType)",
    )

    @property
    def named(self) -> str:
        """What it waits for, in a few words: the reservation's id, or the quota, limit or
        capacity it waits for room in."""
        if self.kind == AWAITS_QUOTA:
            more = f" ({self.needed} more)" if self.needed else ""
            return f"quota {self.quota} {self.resource}{more} in {self.node_pool}"
        if self.kind == AWAITS_LIMIT:
            return f"limits of {self.node_pool}"
        if self.kind == AWAITS_CAPACITY:
            return f"capacity in {self.node_pool}"
        return self.capacity_reservation_id or "a reservation"


class UnavailableOffering(_Record):
    """An offering that failed with insufficient capacity during this request."""

    instance_type: str | None = None
    zone: str | None = None
    capacity_type: CapacityTypeName
    capacity_reservation_id: str | None = None
    reason: str


class ErrorDetail(_Record):
    code: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> Self:
        """A domain exception as the record shows it: its ``code`` and its message."""
        code = getattr(error, "code", None) or type(error).__name__
        message = getattr(error, "message", None) or str(error)
        return cls(code=str(code), message=str(message))


class TruncatedList(_Record):
    """How much of one list a record left out to stay within its limits (detail_limits.py)."""

    total: int = Field(ge=0)
    kept: int = Field(ge=0)


# Why candidates were left out: a CreateFleet's override limit (the least preferred were cut),
# or the room the NodePool's limits (or the requester's quota) left (the types that did not fit).
LeftOutReason = Literal["OverrideLimit", "RoomLeft"]
OVERRIDE_LIMIT: LeftOutReason = "OverrideLimit"
ROOM_LEFT: LeftOutReason = "RoomLeft"


class CandidatesLeftOut(_Record):
    """Offerings a CreateFleet could not offer (its override limit), after ordering them by
    preference; or (reason RoomLeft) the candidate types the request's lease left out because
    the room its NodePool's limits or its quota left could not hold them (docs/placement.md,
    How an instance type is chosen). Bounded: at most MAX_LEFT_OUT_NAMED instance types are
    named (detail_limits.py)."""

    offered: int = Field(ge=0, description="offerings the CreateFleet offered")
    left_out: int = Field(ge=1, description="offerings left out, the least preferred")
    override_limit: int = Field(ge=1, description="the overrides one CreateFleet is sent at most")
    instance_types: list[str] = Field(
        default=[],
        description="the instance types none of whose offerings was offered, by name "
        f"(at most {MAX_LEFT_OUT_NAMED})",
    )
    reason: LeftOutReason = Field(
        default=OVERRIDE_LIMIT,
        description="OverrideLimit: the CreateFleet had more offerings than it may send, the "
        "least preferred were left out; RoomLeft: the room the NodePool's limits (or the "
        "requester's quota) left could not hold the request's instances of these types, so "
        "its lease covered, and it launched, only the types that fit (offered: the offerings "
        "of those)",
    )


class Requested(Protocol):
    """What a record repeats of its launch request (domain/launch_request.LaunchRequest)."""

    @property
    def request_id(self) -> str: ...
    @property
    def requester(self) -> str | None: ...
    @property
    def count(self) -> int: ...
    @property
    def wait_for_capacity_until(self) -> datetime | None: ...


class RequestRecord(_Record):
    request_id: str
    node_pool: str | None = None
    requester: str | None = None
    status: RequestStatus
    requested: int = Field(ge=0)
    launched: int = Field(ge=0)
    instances: list[LaunchedInstance] = Field(default=[])
    unavailable_offerings: list[UnavailableOffering] = Field(default=[])
    errors: list[ErrorDetail] = Field(default=[])
    received_at: Timestamp
    # When the record was written: its end, or (Waiting) the last look at the reservations.
    finished_at: Timestamp
    # The request's deadline (waitForCapacityUntil), on every record of a request that set it:
    # Waiting, and the final one it ends with, whether it waited or not.
    wait_for_capacity_until: Timestamp | None = None
    # Waiting only: what it waits for (empty again once it ends): scheduled reservations, and
    # (additive kinds) room in a quota, a pool's limits, or capacity.
    waiting_for: list[AwaitedReservation] = Field(default=[])
    # Null unless the record was shortened to stay within DynamoDB's and EventBridge's limits:
    # then, per list shortened, how many entries it had and how many it kept (detail_limits.py).
    detail_truncated: dict[str, TruncatedList] | None = Field(
        default=None,
        description="null, or the record was shortened to stay within DynamoDB's 400 KB item and "
        "EventBridge's 256 KB event: per list shortened (unavailableOfferings, errors, "
        "waitingFor; never instances), its entries in all and those kept; an errors entry "
        "with code DetailTruncated says so",
    )
    # Null unless a CreateFleet of the request had more offerings than it may send (additive).
    candidates_left_out: CandidatesLeftOut | None = Field(
        default=None,
        description="null, or a CreateFleet of this request had more candidate offerings than "
        "it may send: the least preferred were left out; or (reason RoomLeft) the room its "
        "NodePool's limits or its quota left held only some types (docs/placement.md)",
    )

    @property
    def detail_type(self) -> str:
        return DETAIL_TYPES[self.status]

    @property
    def is_final(self) -> bool:
        """Every status but Waiting: what happened to the request will not change."""
        return self.status is not RequestStatus.WAITING

    @property
    def is_terminal_failure(self) -> bool:
        return self.status in (RequestStatus.FAILED, RequestStatus.REJECTED)

    def to_detail(self) -> dict[str, Any]:
        """The event detail and status JSON: docs/contracts.md's keys, nulls kept, 'Z'
        timestamps; within the size every carrier allows (stored, kept by idempotency,
        published): detail_limits."""
        return fit_detail(self.to_dict())

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> Self:
        return cls.model_validate(dict(detail))

    @classmethod
    def of(
        cls,
        request: Requested,
        status: RequestStatus,
        *,
        node_pool: str | None,
        received_at: datetime,
        finished_at: datetime,
        instances: Sequence[LaunchedInstance] = (),
        **rest: Any,
    ) -> Self:
        """The record of `request` (its id, requester, count and deadline) at `status`;
        `rest`: the record's other fields."""
        return cls(
            request_id=request.request_id,
            node_pool=node_pool,
            requester=request.requester,
            status=status,
            requested=request.count,
            launched=len(instances),
            instances=list(instances),
            received_at=received_at,
            finished_at=finished_at,
            wait_for_capacity_until=request.wait_for_capacity_until,
            **rest,
        )

    @classmethod
    def rejected(
        cls,
        request_id: str,
        errors: Iterable[ErrorDetail],
        *,
        received_at: datetime,
        finished_at: datetime | None = None,
        node_pool: str | None = None,
        requester: str | None = None,
        requested: int = 0,
        wait_for_capacity_until: datetime | None = None,
    ) -> Self:
        """The record of a request that will never be served."""
        return cls(
            request_id=request_id,
            node_pool=node_pool,
            requester=requester,
            status=RequestStatus.REJECTED,
            requested=requested,
            launched=0,
            errors=list(errors),
            received_at=received_at,
            finished_at=finished_at or received_at,
            wait_for_capacity_until=wait_for_capacity_until,
        )
