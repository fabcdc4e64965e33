"""The launch request contract, and reading one from whatever carried it (EventBridge or SQS).

A requester chooses how many instances and may narrow the pool's requirements; everything about
*how* to launch (image, network, user data, instance profile, reservations) belongs to the
NodeClass, so those fields are refused here by name.
"""

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from capacity_launcher.domain.apis.config_base import Name, validate_tags
from capacity_launcher.domain.apis.ome.associations import association_of, association_requester
from capacity_launcher.domain.capacity.block_end_policy import RequestBlockEnd
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.requirements import Requirement
from capacity_launcher.domain.errors import InvalidLaunchRequest
from capacity_launcher.domain.field_errors import FieldError, bounded, field_errors, field_path
from capacity_launcher.domain.json_depth import deep_fields, may_nest_deeper, shallow
from capacity_launcher.domain.records.status import LAUNCH_REQUESTED
from capacity_launcher.domain.requester_origins import MAX_REQUESTER_LENGTH, Origin, origin_of

REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_COUNT = 500
MAX_REQUEST_REQUIREMENTS = 30
MAX_REQUEST_TAGS = 20
MAX_BODY_BYTES = 256 * 1024  # SQS's and EventBridge's largest message
# Arrays and objects inside one another, the body counted (a request needs 4, 5 in an event).
MAX_NESTING = 32
TOO_DEEP = f"must nest at most {MAX_NESTING} levels of arrays and objects"
# A waiting request is held in the launch queue, and SQS keeps a message 14 days at most.
MAX_CAPACITY_WAIT = timedelta(days=14)

# What a requester might try to set to escalate; named so the refusal can say whose it is.
NODE_CLASS_FIELDS: frozenset[str] = frozenset(
    {
        "imageId",
        "imageSsmParameter",
        "subnetIds",
        "subnetSelectorTerms",
        "securityGroupIds",
        "userData",
        "instanceProfile",
        "iamInstanceProfile",
        "launchTemplate",
        "capacityReservationSpec",
        "capacityReservationSelectorTerms",
        "nodeClass",
        "nodeClassRef",
    }
)
NOT_FOR_REQUESTERS = (
    "is not allowed for requesters: image, subnets, security groups, user data, instance "
    "profile and reservations belong to the NodeClass"
)
NOT_AN_OBJECT = "must be a JSON object"


def _request_id(value: str) -> str:
    if not REQUEST_ID_PATTERN.match(value):
        raise ValueError("must be 1 to 128 letters, digits or ._:- starting with a letter or digit")
    return value


RequestId = Annotated[str, AfterValidator(_request_id)]


def _timestamp_text(value: Any) -> Any:
    # Only ISO-8601 text: pydantic alone would also read a number as epoch seconds.
    if not isinstance(value, str):
        raise ValueError(
            "must be an ISO-8601 timestamp with a time zone, e.g. 2026-11-24T12:00:00Z"
        )
    return value


Deadline = Annotated[AwareDatetime, BeforeValidator(_timestamp_text)]


class LaunchRequest(BaseModel):
    """One demand for ``count`` instances from a NodePool (or the best compatible pool)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    request_id: RequestId
    node_pool: Name | None = None
    count: StrictInt = Field(ge=1, le=MAX_COUNT)
    min_count: StrictInt = Field(default=1, ge=1)
    single_zone: StrictBool = False
    requirements: list[Requirement] = Field(default=[], max_length=MAX_REQUEST_REQUIREMENTS)
    requester: str | None = Field(default=None, max_length=MAX_REQUESTER_LENGTH)
    tags: dict[str, str] = Field(default={})
    # Wait until then for scheduled reserved capacity (a future-dated ODCR or a Capacity Block),
    # or for room (quota, limits, capacity) in its pool's queue, instead of failing (issue 37).
    wait_for_capacity_until: Deadline | None = None
    # Associates the request with an OME CapacityReservation by name; its `requester` names the
    # association (docs/ome.md). Optional; without it nothing changes.
    capacity_reservation: Name | None = None
    # Names a served PriorityClass (scheduling.k8s.io/v1): its value orders the request in its
    # pool's admission queue should it wait (issue 37). Optional; absent: the quota's priority,
    # else 0. A name no applied class has is Rejected (UnknownPriorityClass).
    priority_class_name: Name | None = None
    # Opts in to replacement (Evacuate) or extension (Extend) of its instances in a Capacity
    # Block before the block ends, as far as its NodePool's spec.capacityBlockEnd allows
    # (docs/static-capacity.md). Optional; absent: only the `Capacity Block Expiring` event.
    capacity_block_end: RequestBlockEnd | None = None

    @field_validator("min_count")
    @classmethod
    def _at_most_count(cls, min_count: int, info: ValidationInfo) -> int:
        count = info.data.get("count")
        if count is not None and min_count > count:
            raise ValueError("must be at most count")
        return min_count

    @field_validator("requester")
    @classmethod
    def _printable(cls, requester: str | None) -> str | None:
        if requester is not None and (not requester or not requester.isprintable()):
            raise ValueError("must be 1 to 128 printable characters")
        return requester

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        return validate_tags(tags, MAX_REQUEST_TAGS)

    @field_validator("capacity_reservation")
    @classmethod
    def _association_fits(cls, reservation: str | None, info: ValidationInfo) -> str | None:
        if reservation is not None:
            counted = association_requester(reservation, info.data.get("requester"))
            if len(counted) > MAX_REQUESTER_LENGTH:
                raise ValueError(
                    f"with requester it is counted as {counted[:48]!r}..., which must be at most "
                    f"{MAX_REQUESTER_LENGTH} characters"
                )
        return reservation

    def associated(self) -> Self:
        """The request counted as its reservation's association (docs/ome.md); unchanged when it
        names no reservation, or already counts as one of its associations."""
        reservation = self.capacity_reservation
        if reservation is None or (
            self.requester is not None and association_of(reservation, self.requester) is not None
        ):
            return self
        return self.model_copy(
            update={"requester": association_requester(reservation, self.requester)}
        )

    def requirements_set(self) -> Requirements:
        return Requirements.of(self.requirements)

    def capacity_wait_problem(self, received_at: datetime) -> str | None:
        """Why `waitForCapacityUntil` cannot be honoured for a request received at
        `received_at` (the rule broken), or None; the caller rejects the request with it."""
        deadline = self.wait_for_capacity_until
        if deadline is None:
            return None
        if deadline <= received_at:
            return "must be later than when the request is received"
        if deadline - received_at > MAX_CAPACITY_WAIT:
            return f"must be at most {MAX_CAPACITY_WAIT.days} days after the request is received"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The contract's JSON form (camelCase; unset optional fields left out)."""
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    def body_hash(self) -> str:
        """What binds the requestId to this request: a hash of its normalized form (defaults
        filled in, keys, requirements and each requirement's values in one order), equal for
        every resend of the same request whatever carried it."""
        body = self.to_dict()
        body["requirements"] = sorted(
            json.dumps({**r, "values": sorted(r.get("values", []))}, sort_keys=True)
            for r in body.get("requirements", [])
        )
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def invalid_body_hash(body: str | Mapping[str, Any]) -> str:
    """What binds a requestId to an invalid body that names it: a hash of the body as it came
    (never parsed again: it may be hostile), never equal to a valid request's `body_hash`."""
    try:
        text = body if isinstance(body, str) else json.dumps(body, sort_keys=True, default=str)
    except (ValueError, RecursionError):  # nested too deep to dump: one such body per id
        text = "unhashable"
    return "invalid:" + hashlib.sha256(text.encode()).hexdigest()


# Both spellings are accepted (populate_by_name); anything else is refused by name.
_ACCEPTED_KEYS: frozenset[str] = frozenset(
    name
    for python_name, info in LaunchRequest.model_fields.items()
    for name in (python_name, info.alias)
    if name
)
# The fields a launch request sets, as its contract spells them (schemas/launch-request.json),
# read from the model so the refusal of an unknown one never leaves a field out.
REQUEST_FIELDS: tuple[str, ...] = tuple(
    info.alias or python_name for python_name, info in LaunchRequest.model_fields.items()
)
UNKNOWN_FIELD = "is not allowed for requesters: a launch request sets only " + ", ".join(
    REQUEST_FIELDS
)


def _unknown_field(key: str) -> str:
    """The refusal of a field no launch request has, with the one meant when it is a slip
    (`nodepool`, `min_Count`, `requestID`)."""
    folded = {field.lower().replace("_", ""): field for field in REQUEST_FIELDS}
    meant = folded.get(key.lower().replace("_", "").replace("-", ""))
    if meant is None:
        close = difflib.get_close_matches(key, REQUEST_FIELDS, n=1, cutoff=0.8)
        meant = close[0] if close else None
    return UNKNOWN_FIELD if meant is None else f"{UNKNOWN_FIELD}; did you mean {meant}?"


def _invalid(rule: str, field: str = "body", request_id: str | None = None) -> InvalidLaunchRequest:
    return InvalidLaunchRequest(request_id, [FieldError(field, rule)])


def _too_big() -> InvalidLaunchRequest:
    return _invalid(f"must be at most {MAX_BODY_BYTES} bytes")


def _load(raw: str | bytes) -> Any:
    if len(raw) > MAX_BODY_BYTES:  # cheap first look; the exact size is checked in bytes
        raise _too_big()
    if isinstance(raw, str):
        try:
            raw = raw.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: not text JSON can carry
            raise _invalid(NOT_AN_OBJECT) from None
    if len(raw) > MAX_BODY_BYTES:
        raise _too_big()
    if may_nest_deeper(raw, MAX_NESTING):
        # What nests too deep is left out (and named by _refuse_deep), so the rest still loads.
        raw, _ = shallow(raw, MAX_NESTING)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _invalid(NOT_AN_OBJECT) from None


def _best_effort_request_id(body: Mapping[Any, Any]) -> str | None:
    value = body.get("requestId")
    return value if isinstance(value, str) and REQUEST_ID_PATTERN.match(value) else None


_POOL_NAME: TypeAdapter[str] = TypeAdapter(Name)
_COUNT: TypeAdapter[int] = TypeAdapter(Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)])


def _best_effort(adapter: TypeAdapter[Any], value: Any) -> Any:
    """`value` when it is valid on its own, else None (the rest of the body may be broken)."""
    try:
        return adapter.validate_python(value)
    except ValidationError:
        return None


def _unwrap_event(body: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """A whole EventBridge event carries the request in ``detail``; anything else is the request."""
    if "detail-type" not in body or "detail" not in body:
        return body
    detail = body["detail"]
    request_id = _best_effort_request_id(detail) if isinstance(detail, Mapping) else None
    if body["detail-type"] != LAUNCH_REQUESTED:
        raise _invalid(f"must be {LAUNCH_REQUESTED!r}", "detail-type", request_id)
    if not isinstance(detail, Mapping):
        raise _invalid(NOT_AN_OBJECT, "detail")
    return detail


def _not_for_requesters(body: Mapping[Any, Any]) -> list[FieldError]:
    """Top-level fields a requester may not set, each named with whose they are."""
    errors = []
    for key in body:
        if key in _ACCEPTED_KEYS:
            continue
        field = field_path((key if isinstance(key, str) else repr(key),))
        errors.append(
            FieldError(
                field,
                NOT_FOR_REQUESTERS
                if key in NODE_CLASS_FIELDS
                else _unknown_field(key if isinstance(key, str) else repr(key)),
            )
        )
    return errors


def parse_launch_request(raw: str | bytes | Mapping[str, Any]) -> LaunchRequest:
    """Read a launch request from its JSON, a JSON string of it, or an EventBridge event.

    Anything that is not a valid request raises InvalidLaunchRequest, carrying the requestId
    when one can be read, so the rejection can still be published to its requester.
    """
    try:
        body: Any = _load(raw) if isinstance(raw, str | bytes | bytearray) else raw
        if not isinstance(body, Mapping):
            raise _invalid(NOT_AN_OBJECT)
        body = _unwrap_event(body)
        _refuse_deep(body)
        if not isinstance(raw, str | bytes | bytearray) and _oversized(body):
            raise _too_big()
        request_id = _best_effort_request_id(body)
        refused = bounded(_not_for_requesters(body))
        try:
            request = LaunchRequest.model_validate(
                {key: value for key, value in body.items() if key in _ACCEPTED_KEYS}
            )
        except ValidationError as error:
            raise InvalidLaunchRequest(
                request_id, field_errors(error) + refused, **_valid_fields(body)
            ) from None
        if refused:
            raise InvalidLaunchRequest(request_id, refused, **_valid_fields(body))
        return request
    except InvalidLaunchRequest:
        raise
    except (ValueError, TypeError, RecursionError):  # the last line against hostile input
        raise _invalid(NOT_AN_OBJECT) from None


def _refuse_deep(body: Mapping[Any, Any]) -> None:
    """A body nesting deeper than MAX_NESTING is refused naming each field that does (keyed by
    its requestId when it has a valid one, like any invalid body)."""
    deep = deep_fields(body, MAX_NESTING)
    if deep:
        errors = [
            FieldError(field_path((k if isinstance(k, str) else repr(k),)), TOO_DEEP) for k in deep
        ]
        raise InvalidLaunchRequest(
            _best_effort_request_id(body), bounded(errors), **_valid_fields(body)
        )


def _valid_fields(body: Mapping[Any, Any]) -> dict[str, Any]:
    """nodePool and count of an invalid body, each when valid on its own."""
    return {
        "node_pool": _best_effort(_POOL_NAME, body.get("nodePool")),
        "count": _best_effort(_COUNT, body.get("count")),
    }


def _oversized(body: Mapping[Any, Any]) -> bool:
    """A request handed over already parsed is held to the same size as one on the wire."""
    try:
        size = len(json.dumps(body, default=str, ensure_ascii=False).encode("utf-8", "replace"))
    except (ValueError, TypeError, RecursionError):
        return False  # not JSON-shaped: validation will say what is wrong with it
    return size > MAX_BODY_BYTES


@dataclass(frozen=True)
class Message:
    """One queue message: its id (for partial batch failures) and its body; the receipt, receive
    count and queue when it came from SQS (to choose when a handed-back message returns)."""

    message_id: str
    body: str | Mapping[str, Any]
    received_at: datetime
    receipt_handle: str | None = None
    receive_count: int = 1
    queue_arn: str | None = None
    # SQS's SenderId: who sent it to the queue (EventBridge, for a bus delivery).
    sender_id: str | None = None

    @classmethod
    def from_sqs_record(cls, record: Mapping[str, Any], now: datetime) -> Self:
        """One record of the event Lambda's SQS event source mapping builds; received when SQS
        says it was sent, else `now` (the composition root's clock)."""
        attributes = record.get("attributes") or {}
        sent = attributes.get("SentTimestamp")
        received_at = datetime.fromtimestamp(int(sent) / 1000, UTC) if sent else now
        return cls(
            record["messageId"],
            record.get("body", ""),
            received_at,
            receipt_handle=record.get("receiptHandle"),
            receive_count=int(attributes.get("ApproximateReceiveCount", 1)),
            queue_arn=record.get("eventSourceARN"),
            sender_id=attributes.get("SenderId"),
        )

    @property
    def origin(self) -> Origin:
        """Where it came from, as AWS says (the requester binding checks a claim against it)."""
        return origin_of(self.sender_id, self.body)
