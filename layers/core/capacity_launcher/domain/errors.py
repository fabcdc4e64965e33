"""The domain's exceptions: what a request, a document or a call to AWS can end in.

Each carries the ``code`` a status record's ``errors[].code`` shows. AWS error codes become these in
`domain/aws_errors.py` (the one home of that classification); broken fields are `FieldError`s
(`domain/field_errors.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from capacity_launcher.domain.field_errors import FieldError, joined

if TYPE_CHECKING:
    from capacity_launcher.domain.quantities import Resources

# A cancelled transaction's per-item code for an item whose condition did not hold.
CONDITION_FAILED = "ConditionalCheckFailed"


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
        super().__init__(joined(self.errors) or "invalid configuration document")


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
        super().__init__(joined(self.errors) or "invalid launch request")


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
    what the quota's own nominal quota lacks because it is lent out (per resource). ``needed``,
    when known, is how much more of ``resource`` must be free for the demand to be admitted;
    ``ever``: whether the demand could ever be admitted under the quota as applied now (False:
    it asks more than the quota's bound on its own, so waiting cannot help). ``demand``, set by
    the lease's decision: the least it asked (what a waiting request's preemption must make fit).
    """

    code = "QuotaExceeded"
    demand: Resources | None = None

    def __init__(
        self,
        quota: str | None,
        flavor: str,
        resource: str | None,
        reason: str,
        reclaim: Mapping[str, Decimal] | None = None,
        *,
        needed: Decimal | None = None,
        ever: bool = True,
    ) -> None:
        self.quota = quota
        self.flavor = flavor
        self.resource = resource
        self.reason = reason
        self.reclaim: dict[str, Decimal] = dict(reclaim or {})
        self.needed = needed
        self.ever = ever
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


class LeaseReclaimed(CapacityLauncherError):
    """A settle found its lease neither open nor settled: it expired under the launch and the
    sync reclaimed it, giving back the room and the quota it held (which another request may
    have been admitted into since). Its instances are counted only under a lease taken for them
    again, as a new request's is (`settle.settle_lease`)."""

    code = "LeaseReclaimed"

    def __init__(self, pool: str, lease_id: str) -> None:
        self.pool = pool
        self.lease_id = lease_id
        super().__init__(f"lease {lease_id} of node pool {pool} was reclaimed before it settled")


class NodePoolChanged(CapacityLauncherError):
    """A lease asked with a copy of the pool, or of its NodeClass, older than the one stored:
    the request is resolved again on the stored documents before anything is leased."""

    code = "NodePoolChanged"

    def __init__(self, pool: str, changed: str | None = None) -> None:
        self.pool = pool
        changed = changed or f"NodePool {pool} was applied"
        super().__init__(f"{changed} after this worker read it: the request is resolved again")


class UnreadyLimitReached(CapacityLauncherError):
    """A pool with `limits.unready` has more unready instances than it allows: it launches
    nothing more until enough of them are running and pass their status checks."""

    code = "LimitExceeded"

    def __init__(self, pool: str, unready: int, allowed: int, limit: int | str) -> None:
        self.pool = pool
        super().__init__(
            f"node pool {pool}: limits.unready {limit}: {unready} of its instances are not yet "
            f"running and passing status checks, more than the {allowed} it allows; it launches "
            "nothing more until they are"
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


# A NodeClass's selector conditions (its status, as Karpenter shows it: docs/karpenter.md), and
# what each is False for when its selector finds nothing in the Region.
SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
AMIS_READY = "AMIsReady"
SELECTS_NOTHING: Mapping[str, str] = {
    SUBNETS_READY: "no subnets match spec.subnetSelectorTerms",
    SECURITY_GROUPS_READY: "no security groups match spec.securityGroupSelectorTerms",
    AMIS_READY: "no images match spec.imageSelectorTerms",
}
# What the adapters say when a NodeClass's security group or image selector finds nothing.
NO_SECURITY_GROUP_SELECTED = "NoSecurityGroupSelected"
NO_IMAGE_SELECTED = "NoImageSelected"


class NodeClassNotReady(CapacityLauncherError):
    """A NodeClass one of whose selectors finds nothing (a condition of its status False): its
    requests are Rejected naming it and why, before anything is leased, until it is fixed."""

    code = "NodeClassNotReady"

    def __init__(self, node_class: str, condition: str) -> None:
        self.node_class = node_class
        self.condition = condition
        super().__init__(
            f"NodeClass {node_class} not ready: {SELECTS_NOTHING[condition]} ({condition} False)"
        )


class InstanceProfileNotReady(CapacityLauncherError):
    """A NodeClass's `spec.role` cannot be given to its instances: the role does not exist, or
    the deployment may not pass it (`reason`). Its requests are Rejected: nothing launches
    without the identity the class names."""

    code = "InstanceProfileNotReady"

    def __init__(self, node_class: str, role: str, reason: str, detail: str) -> None:
        self.node_class = node_class
        self.role = role
        self.reason = reason
        super().__init__(f"spec.role: NodeClass {node_class}: role {role!r}: {reason}: {detail}")


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
        return len(self.reasons) > index and self.reasons[index] == CONDITION_FAILED


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
