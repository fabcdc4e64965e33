"""The one home of error classification, and the domain's exceptions.

EC2 and other AWS error codes are classified here and nowhere else; adapters turn a botocore
``ClientError`` into one of the exceptions below, and the service decides what to do by kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps pydantic out of the import path
    from pydantic import ValidationError

    from capacity_launcher.domain.config import NodeClass

# Codes that mean "this offering has no capacity right now": cached as unavailable, then the
# remaining offerings are tried. After Karpenter's pkg/errors; docs/operations.md lists them.
INSUFFICIENT_CAPACITY_CODES: frozenset[str] = frozenset(
    {
        "InsufficientInstanceCapacity",
        "ReservationCapacityExceeded",
        "UnfulfillableCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
    }
)

# Transient "slow down" codes, after botocore's standard retry mode. LimitExceededException is
# left out on purpose: EventBridge and others use it for hard quotas that waiting never clears.
THROTTLING_CODES: frozenset[str] = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "EC2ThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "BandwidthLimitExceeded",
        "PriorRequestNotComplete",
        "SlowDown",
    }
)


# The service had a fault or two writers met: the same call succeeds later. EC2 returns these
# inside CreateFleet's Errors[] too, where botocore's retries cannot see them.
TRANSIENT_CODES: frozenset[str] = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalServerErrorException",  # Resource Groups' (and others') HTTP 500
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionConflictException",
    }
)

TRANSACTION_CANCELED = "TransactionCanceledException"
# DynamoDB's per-item cancellation reasons: another transaction touched the item, or throttling.
_TRANSIENT_CANCELLATIONS = frozenset({"TransactionConflict"})
_THROTTLED_CANCELLATIONS = frozenset({"ProvisionedThroughputExceeded", "ThrottlingError"})
_CONDITION_FAILED = "ConditionalCheckFailed"

# Codes that make a whole capacity type unavailable in the account and region, whichever offering
# reported them: without the Spot service-linked role (and leave to create it) no spot launch
# can succeed. Karpenter marks spot unavailable for its cache lifetime on this code; so do we.
SPOT_UNAVAILABLE_CODES: frozenset[str] = frozenset(
    {"AuthFailure.ServiceLinkedRoleCreationNotPermitted"}
)


class ErrorKind(StrEnum):
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    SPOT_UNAVAILABLE = "SpotUnavailable"
    THROTTLING = "Throttling"
    TRANSIENT = "Transient"
    FATAL = "Fatal"

    @property
    def retryable(self) -> bool:
        return self in (ErrorKind.THROTTLING, ErrorKind.TRANSIENT)


def classify(code: str, cancellation_reasons: Iterable[str] = ()) -> ErrorKind:
    """What an AWS error code means for the launcher: cache and move on, back off, or fail.

    `cancellation_reasons` are a `TransactionCanceledException`'s per-item codes: a failed
    condition is an answer (fatal here, callers read it as such); a conflict is worth a retry.
    """
    if code in INSUFFICIENT_CAPACITY_CODES:
        return ErrorKind.INSUFFICIENT_CAPACITY
    if code in SPOT_UNAVAILABLE_CODES:
        return ErrorKind.SPOT_UNAVAILABLE
    if code in THROTTLING_CODES:
        return ErrorKind.THROTTLING
    if code in TRANSIENT_CODES:
        return ErrorKind.TRANSIENT
    if code == TRANSACTION_CANCELED:
        reasons = set(cancellation_reasons)
        if _CONDITION_FAILED in reasons:
            return ErrorKind.FATAL
        if reasons & _TRANSIENT_CANCELLATIONS:
            return ErrorKind.TRANSIENT
        if reasons & _THROTTLED_CANCELLATIONS:
            return ErrorKind.THROTTLING
    return ErrorKind.FATAL


# What a NodeClass names that EC2 or SSM can refuse for good, by the code refusing it: the
# request fails at once with a record naming the field (waiting or redelivery cannot fix it).
NODE_CLASS_FIELDS: Mapping[str, str] = {
    "ParameterNotFound": "spec.imageSsmParameter",
    "ParameterVersionNotFound": "spec.imageSsmParameter",
    "InvalidAMIID.NotFound": "spec.imageId",
    "InvalidAMIID.Malformed": "spec.imageId",
    "InvalidAMIID.Unavailable": "spec.imageId",
    "InvalidSubnetID.NotFound": "spec.subnetIds",
    "InvalidSubnetId.NotFound": "spec.subnetIds",
    "InvalidSubnetID.Malformed": "spec.subnetIds",
    "InvalidGroup.NotFound": "spec.securityGroupIds",
    "InvalidGroupId.Malformed": "spec.securityGroupIds",
    "InvalidGroupId.NotFound": "spec.securityGroupIds",
    "InvalidParameterValue.IamInstanceProfile": "spec.instanceProfile",
    "InvalidUserData.Malformed": "spec.userData",
}


def node_class_field(code: str, default: str | None = None) -> str | None:
    """The NodeClass field an error code blames, if the code is one that names a field."""
    return NODE_CLASS_FIELDS.get(code, default if classify(code) is ErrorKind.FATAL else None)


# What a request's (or NodePool's) requirements name that EC2 does not know, by the code saying
# so: the request is Rejected naming the requirement key (redelivery cannot fix a name).
REQUIREMENT_KEYS: Mapping[str, str] = {"InvalidInstanceType": "node.kubernetes.io/instance-type"}


def requirement_key(code: str) -> str | None:
    """The requirement key an error code blames, if the code is one that says a value is unknown."""
    return REQUIREMENT_KEYS.get(code)


def is_insufficient_capacity(code: str) -> bool:
    return code in INSUFFICIENT_CAPACITY_CODES


def is_throttling(code: str) -> bool:
    return code in THROTTLING_CODES


@dataclass(frozen=True)
class FieldError:
    """One broken rule: ``field`` is a dotted path in the document's own (camelCase) names."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule}


def _join(errors: Iterable[FieldError]) -> str:
    return "; ".join(str(error) for error in errors)


class CapacityLauncherError(Exception):
    """Base of every domain error; ``code`` is what a status record's ``errors[].code`` shows."""

    code: str = "CapacityLauncherError"

    @property
    def message(self) -> str:
        return str(self)


class ConfigValidationError(CapacityLauncherError):
    """A NodeClass or NodePool document breaks one or more rules."""

    code = "InvalidConfiguration"

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors: list[FieldError] = list(errors)
        super().__init__(_join(self.errors) or "invalid configuration document")


class InvalidLaunchRequest(CapacityLauncherError):
    """The launch request does not satisfy its contract; it is Rejected and never retried."""

    code = "InvalidLaunchRequest"

    def __init__(
        self,
        request_id: str | None,
        errors: Sequence[FieldError],
        *,
        node_pool: str | None = None,
        count: int | None = None,
    ) -> None:
        self.request_id = request_id
        self.errors: list[FieldError] = list(errors)
        # The body's nodePool and count when each was valid, so its record still shows them.
        self.node_pool = node_pool
        self.count = count
        super().__init__(_join(self.errors) or "invalid launch request")


class RequestRejected(CapacityLauncherError):
    """A well-formed request that can never be served: unknown pool, conflict, can never fit."""

    def __init__(self, reason: str, code: str = "Rejected") -> None:
        self.reason = reason
        self.code = code
        super().__init__(reason)


class RequirementsConflict(RequestRejected):
    """The request's requirements leave no value for one or more keys of the pool's."""

    def __init__(
        self, reason: str, code: str = "RequirementsConflict", keys: Sequence[str] = ()
    ) -> None:
        super().__init__(reason, code)
        self.keys: tuple[str, ...] = tuple(keys)


class UnknownRequirementValues(CapacityLauncherError):
    """Values of a requirement that AWS says do not exist (an instance type with a typo): the
    request naming them, or served by a NodePool naming them, is Rejected."""

    def __init__(self, code: str, key: str, values: Sequence[str], message: str) -> None:
        self.code = code
        self.key = key
        self.values: tuple[str, ...] = tuple(values)
        super().__init__(message)


class RequesterNotAllowed(RequestRejected):
    """The request claims a ``requester`` that its origin (queue sender, or bus source and
    account) may not use: a CapacityQuota's ``requesterOrigins`` binds that requester elsewhere."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, "RequesterNotAllowed")


class RequestIdReused(RequestRejected):
    """A ``requestId`` is bound to the first request body it named; another body with it is
    refused (never retried), so it can never finish, count or record for the first one."""

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"requestId {request_id}: already names another request (its first body differs "
            "from this one); a requestId is bound to the first body it arrives with: send that "
            "request unchanged, or this one under a new requestId",
            "RequestIdReused",
        )


class QuotaExceeded(CapacityLauncherError):
    """A request beyond its CapacityQuota (or in a NodePool quotas cover, by a requester none
    covers): names the quota, the flavor (NodePool) and the resource. ``reclaim``, when set, is
    what the quota's own nominal quota lacks because it is lent out (per resource)."""

    code = "QuotaExceeded"

    def __init__(
        self,
        quota: str | None,
        flavor: str,
        resource: str | None,
        reason: str,
        reclaim: Mapping[str, Decimal] | None = None,
    ) -> None:
        self.quota = quota
        self.flavor = flavor
        self.resource = resource
        self.reason = reason
        self.reclaim: dict[str, Decimal] = dict(reclaim or {})
        where = f"CapacityQuota {quota}" if quota else "no CapacityQuota"
        what = f", {resource}" if resource else ""
        super().__init__(f"{where}: NodePool {flavor}{what}: {reason}")


class NodePoolDeleted(CapacityLauncherError):
    """A lease asked of a pool no longer stored: a container's copy of the pool outlived its
    deletion. A deleted pool is not one without limits: nothing more is leased in it."""

    code = "NodePoolDeleted"

    def __init__(self, pool: str) -> None:
        self.pool = pool
        super().__init__(
            f"NodePool {pool} was deleted after this worker read it: nothing more is launched in it"
        )


class LaunchFailed(CapacityLauncherError):
    """EC2 refused the launch for a reason waiting will not fix (auth, bad parameter, no image)."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.reason = message
        super().__init__(f"{code}: {message}")

    @property
    def message(self) -> str:
        return self.reason


class NodeClassRefused(LaunchFailed):
    """AWS refused something the NodeClass names (image, subnet, security group...), for good."""

    def __init__(self, code: str, message: str, node_class: str, field: str) -> None:
        self.field = field
        self.node_class = node_class
        super().__init__(code, f"{field}: NodeClass {node_class}: {message}")


class Transient(CapacityLauncherError):
    """A fault that retrying later clears, still there after in-process retries: hand back."""

    def __init__(self, operation: str, code: str = "InternalError") -> None:
        self.operation = operation
        self.code = code
        super().__init__(f"{operation} failed transiently ({code})")


class Throttled(Transient):
    """AWS asked us to slow down and backing off in-process did not help: hand back to SQS."""

    def __init__(self, operation: str, code: str = "RequestLimitExceeded") -> None:
        super().__init__(operation, code)
        self.args = (f"{operation} throttled ({code})",)


def refused_by_aws(
    operation: str, code: str, message: str, node_class: NodeClass, field: str | None = None
) -> CapacityLauncherError:
    """What a call made for a NodeClass raises: Throttled/Transient when retrying can help, else
    NodeClassRefused naming the field (`field` when the code names none), else LaunchFailed."""
    kind = classify(code)
    if kind.retryable:
        return retryable_error(operation, code, kind)
    blamed = node_class_field(code, field)
    if blamed is None:
        return LaunchFailed(code, message)
    return NodeClassRefused(code, message, node_class.metadata.name, blamed)


class ConditionFailed(CapacityLauncherError):
    """A conditional write found its item not as required: an answer the caller reads, not a fault.

    `reasons` are a cancelled transaction's per-item codes, in the order of its items."""

    code = "ConditionalCheckFailed"

    def __init__(self, operation: str, reasons: Sequence[str] = ()) -> None:
        self.operation = operation
        self.reasons: tuple[str, ...] = tuple(reasons)
        super().__init__(f"{operation}: a condition did not hold")

    def failed_at(self, index: int) -> bool:
        """Whether the transaction's item at `index` is one whose condition failed."""
        return len(self.reasons) > index and self.reasons[index] == _CONDITION_FAILED


def is_condition_failure(code: str, cancellation_reasons: Iterable[str] = ()) -> bool:
    """A write's condition did not hold (alone, or on any item of a cancelled transaction)."""
    if code == "ConditionalCheckFailedException":
        return True
    return code == TRANSACTION_CANCELED and _CONDITION_FAILED in set(cancellation_reasons)


def aws_error(
    operation: str,
    code: str,
    message: str,
    cancellation_reasons: Sequence[str] = (),
    *,
    node_class: NodeClass | None = None,
    field: str | None = None,
    fatal: Callable[[str, str], CapacityLauncherError] | None = None,
) -> CapacityLauncherError | None:
    """The domain exception an AWS error becomes, in order: Throttled/Transient when retrying
    can help; ConditionFailed for a write whose condition did not hold; for a call made for a
    NodeClass, NodeClassRefused naming the field (or LaunchFailed); else `fatal(code, message)`.
    None when none applies: the caller lets the original error propagate."""
    kind = classify(code, cancellation_reasons)
    if kind.retryable:
        return retryable_error(operation, code, kind)
    if is_condition_failure(code, cancellation_reasons):
        return ConditionFailed(operation, cancellation_reasons)
    if node_class is not None:
        return refused_by_aws(operation, code, message, node_class, field)
    return None if fatal is None else fatal(code, message)


def retryable_error(operation: str, code: str, kind: ErrorKind) -> Transient:
    """The exception that hands a message back for a retryable kind of error."""
    return (
        Throttled(operation, code) if kind is ErrorKind.THROTTLING else Transient(operation, code)
    )


class NotFound(CapacityLauncherError):
    code = "NotFound"

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} not found")


class StoredDocumentInvalid(CapacityLauncherError):
    """A NodeClass or NodePool in the table that no longer parses: it affects only itself."""

    code = "InvalidStoredDocument"

    def __init__(self, kind: str, name: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.reason = reason
        super().__init__(f"{kind} {name} is stored but no longer valid: {reason}")


class ConfigConflict(CapacityLauncherError):
    """A configuration change that would break a reference (missing NodeClass, class in use)."""

    code = "ConfigConflict"

    def __init__(self, message: str) -> None:
        super().__init__(message)


MAX_FIELD_ERRORS = 50
_MAX_PATH_PART = 64


def field_errors(
    error: ValidationError,
    root: str = "",
    rules: Mapping[str, str] | None = None,
    limit: int = MAX_FIELD_ERRORS,
) -> list[FieldError]:
    """Translate pydantic's errors into FieldErrors named by the document's own field names.

    ``rules`` replaces pydantic's wording by error type (e.g. ``extra_forbidden``); at most
    ``limit`` errors are kept, so hostile input cannot make an unbounded message.
    """
    details = error.errors(include_url=False, include_input=False, include_context=False)
    found = [
        FieldError(
            field_path(detail["loc"], root),
            (rules or {}).get(detail["type"]) or _rule(detail["type"], detail["msg"]),
        )
        for detail in details[:limit]
    ]
    return bounded(found, limit, total=len(details), field=root or "body")


def bounded(
    errors: Sequence[FieldError],
    limit: int = MAX_FIELD_ERRORS,
    *,
    total: int | None = None,
    field: str = "body",
) -> list[FieldError]:
    """At most ``limit`` errors, then one saying how many more there were."""
    total = len(errors) if total is None else total
    kept = list(errors[:limit])
    if total > limit:
        kept.append(FieldError(field, f"and {total - limit} more errors"))
    return kept


def field_path(loc: Sequence[int | str], root: str = "") -> str:
    """("spec", "requirements", 0, "key") -> "spec.requirements[0].key"; odd keys go in brackets."""
    path = root
    for part in loc:
        if isinstance(part, str) and len(part) > _MAX_PATH_PART:
            part = part[:_MAX_PATH_PART] + "..."
        if part == "[key]":  # pydantic's marker for "the key of the dict entry above"
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        elif not path:
            path = part
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{part}]"
    return path or "body"


_RULES_BY_TYPE = {
    "missing": "is required",
    "extra_forbidden": "is not an allowed field",
    "frozen_instance": "cannot be changed",
}


def _rule(error_type: str, message: str) -> str:
    if error_type in _RULES_BY_TYPE:
        return _RULES_BY_TYPE[error_type]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message[:1].lower() + message[1:]
