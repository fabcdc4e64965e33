"""The one home of AWS error classification: what an AWS error code means for capacity-launcher.

EC2 and other AWS error codes are classified here and nowhere else; adapters hand a botocore
``ClientError``'s code to `aws_error`, which returns the domain exception (`domain/errors.py`) to
raise, and the service decides what to do by kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.errors import (
    CONDITION_FAILED,
    CapacityLauncherError,
    ConditionFailed,
    LaunchFailed,
    NodeClassRefused,
    Throttled,
    Transient,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.domain.apis.config import NodeClass

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

# Codes that make a whole capacity type unavailable in the account and region, whichever offering
# reported them: without the Spot service-linked role (and leave to create it) no spot launch
# can succeed. Karpenter marks spot unavailable for its cache lifetime on this code; so do we.
SPOT_UNAVAILABLE_CODES: frozenset[str] = frozenset(
    {"AuthFailure.ServiceLinkedRoleCreationNotPermitted"}
)


# TerminateInstances refusals that may mean "one of these instances is gone": EC2 forgets a
# terminated instance about an hour after termination (InvalidInstanceID.NotFound), and under a
# policy scoped by aws:ResourceTag IAM finds no tag on it and refuses the whole call
# (UnauthorizedOperation; Karpenter's aws/karpenter-provider-aws#2253). Either fails every id of
# the call, so the caller looks the ids up and terminates only those still there.
INSTANCE_GONE_CODES: frozenset[str] = frozenset(
    {"InvalidInstanceID.NotFound", "UnauthorizedOperation"}
)
# DescribeInstances states of an instance that a termination has nothing left to do for.
INSTANCE_GONE_STATES: frozenset[str] = frozenset({"shutting-down", "terminated"})

# A launch template the launcher remembered was deleted since (the sync's template lifecycle):
# the next try creates it again under the same name, so the call is worth retrying.
LAUNCH_TEMPLATE_GONE_CODES: frozenset[str] = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)


# An instance id EC2 does not know (yet: a fresh id is unknown to Describe calls for a while,
# "Eventual consistency in the Amazon EC2 API"; or any more: gone an hour after termination).
INSTANCE_NOT_FOUND = "InvalidInstanceID.NotFound"
_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")

# A listing's NextToken refused (expired, from another listing, garbled): the listing can only
# start over. EC2 answers InvalidNextToken or InvalidPaginationToken, or InvalidParameterValue
# naming the token.
REFUSED_TOKEN_CODES: frozenset[str] = frozenset({"InvalidNextToken", "InvalidPaginationToken"})


def is_refused_token(code: str, message: str) -> bool:
    """A listing's page token refused: drop it and list from the first page."""
    return code in REFUSED_TOKEN_CODES or (
        code == "InvalidParameterValue" and "token" in message.lower()
    )


def unknown_instance_ids(code: str, message: str) -> list[str] | None:
    """The instance ids EC2 said it does not know (its message lists them), [] when it said so
    without naming them; None for any other refusal."""
    if code != INSTANCE_NOT_FOUND:
        return None
    return _INSTANCE_ID.findall(message)


def error_code_of(error: BaseException) -> str:
    """The AWS error code behind any error a part of the service met: a domain error's `code`,
    a botocore error's `Error.Code` (read as the mapping it carries), else the exception's name."""
    code = getattr(error, "code", None)
    if isinstance(code, str):
        return code
    response: Any = getattr(error, "response", None)
    if isinstance(response, Mapping):
        found = response.get("Error", {}).get("Code")
        if found:
            return str(found)
    return type(error).__name__


# IAM's answers about instance profiles and roles (adapters/instance_profiles.py).
IAM_NOT_FOUND = "NoSuchEntity"
IAM_ALREADY_EXISTS = "EntityAlreadyExists"
# AddRoleToInstanceProfile on a profile that holds a role already (one role a profile).
IAM_PROFILE_FULL = "LimitExceeded"


def role_refusal(code: str) -> str | None:
    """Why a NodeClass's role cannot be given to its instances, when the code says so for good:
    the role does not exist, or this deployment may not read or pass it (its role grants)."""
    if code == IAM_NOT_FOUND:
        return "RoleNotFound"
    if code in ACCESS_DENIED_CODES:
        return "RoleNotAllowed"
    return None


def may_be_gone_instances(code: str) -> bool:
    """A TerminateInstances refusal that one vanished id among live ones would cause."""
    return code in INSTANCE_GONE_CODES


def is_launch_template_gone(code: str) -> bool:
    return code in LAUNCH_TEMPLATE_GONE_CODES


# DescribeCapacityBlockExtensionOfferings on a block that cannot be extended now: its state, or
# an extension of it payment-pending (EC2 User Guide, "Extend Capacity Blocks": a block with an
# extension payment-pending cannot be extended again until that payment is processed).
BLOCK_NOT_EXTENSIBLE_CODES = frozenset({"IncorrectState"})


def is_block_not_extensible(code: str) -> bool:
    return code in BLOCK_NOT_EXTENSIBLE_CODES


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
    if code in TRANSIENT_CODES or code in LAUNCH_TEMPLATE_GONE_CODES:
        return ErrorKind.TRANSIENT
    if code == TRANSACTION_CANCELED:
        reasons = set(cancellation_reasons)
        if CONDITION_FAILED in reasons:
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
    fatal = classify(code) is ErrorKind.FATAL or is_launch_template_gone(code)
    return NODE_CLASS_FIELDS.get(code, default if fatal else None)


# What a request's (or NodePool's) requirements name that EC2 does not know, by the code saying
# so: the request is Rejected naming the requirement key (redelivery cannot fix a name).
REQUIREMENT_KEYS: Mapping[str, str] = {"InvalidInstanceType": "node.kubernetes.io/instance-type"}


def requirement_key(code: str) -> str | None:
    """The requirement key an error code blames, if the code is one that says a value is unknown."""
    return REQUIREMENT_KEYS.get(code)


def is_insufficient_capacity(code: str) -> bool:
    return code in INSUFFICIENT_CAPACITY_CODES


# The caller's credentials may not make the call (IAM said no): not a fault to retry.
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})


def is_access_denied(code: str) -> bool:
    return code in ACCESS_DENIED_CODES


def is_throttling(code: str) -> bool:
    return code in THROTTLING_CODES


def refused_by_aws(
    operation: str, code: str, message: str, node_class: NodeClass, field: str | None = None
) -> CapacityLauncherError:
    """What a call made for a NodeClass raises: Throttled/Transient when retrying can help, else
    NodeClassRefused naming the field (`field` when the code names none), else LaunchFailed."""
    kind = _retryable(code, (), field)
    if kind is not None:
        return retryable_error(operation, code, kind)
    blamed = node_class_field(code, field)
    if blamed is None:
        return LaunchFailed(code, message)
    return NodeClassRefused(code, message, node_class.metadata.name, blamed)


def is_condition_failure(code: str, cancellation_reasons: Iterable[str] = ()) -> bool:
    """A write's condition did not hold (alone, or on any item of a cancelled transaction)."""
    if code == "ConditionalCheckFailedException":
        return True
    return code == TRANSACTION_CANCELED and CONDITION_FAILED in set(cancellation_reasons)


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
    kind = _retryable(code, cancellation_reasons, field)
    if kind is not None:
        return retryable_error(operation, code, kind)
    if is_condition_failure(code, cancellation_reasons):
        return ConditionFailed(operation, cancellation_reasons)
    if node_class is not None:
        return refused_by_aws(operation, code, message, node_class, field)
    return None if fatal is None else fatal(code, message)


def _retryable(code: str, reasons: Sequence[str], field: str | None) -> ErrorKind | None:
    """The retryable kind of an error, or None. A missing launch template is retried when it is
    one of ours the sync deleted (created again next try), never when a NodeClass field names it
    (`spec.launchTemplateName`): that one is the document's to fix."""
    if field is not None and is_launch_template_gone(code):
        return None
    kind = classify(code, reasons)
    return kind if kind.retryable else None


def retryable_error(operation: str, code: str, kind: ErrorKind) -> Transient:
    """The exception that hands a message back for a retryable kind of error."""
    return (
        Throttled(operation, code) if kind is ErrorKind.THROTTLING else Transient(operation, code)
    )
