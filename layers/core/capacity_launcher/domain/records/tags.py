"""The tags put on everything launched (docs/contracts.md, Tags on everything launched)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.config_base import MAX_TAGS_PER_RESOURCE, SERVICE_INSTANCE_TAGS
from capacity_launcher.domain.errors import RequestRejected

if TYPE_CHECKING:  # only the launcher builds tags from a request: the others' cold starts skip it
    from capacity_launcher.domain.launch_request import LaunchRequest
    from capacity_launcher.domain.records.instance_records import InstanceRecord

PREFIX = "capacity-launcher:"
MANAGED = "capacity-launcher:managed"
REQUEST_ID = "capacity-launcher:request-id"
NODE_POOL = "capacity-launcher:node-pool"
NODE_CLASS = "capacity-launcher:node-class"
REQUESTER = "capacity-launcher:requester"
# The deployment (CloudFormation stack) that made a resource: two stacks in one account and
# Region each adopt, sweep and terminate only their own (docs/contracts.md: Tags on everything
# launched).
STACK = "capacity-launcher:stack"
# On launch templates: what the template holds apart from its reservation part (a hash), and the
# reservation id or group ARN it targets; the sync's template lifecycle reads both.
TEMPLATE_BASIS = "capacity-launcher:template-basis"
RESERVATION_TARGET = "capacity-launcher:reservation-target"
# On launch templates: when a launcher last found the template and launched from it (ISO 8601,
# refreshed at most every few minutes); the sweep keeps a template in use (a reverted NodeClass).
TEMPLATE_USED_AT = "capacity-launcher:used-at"
MAX_TAG_VALUE = 256

MAX_TAGS = MAX_TAGS_PER_RESOURCE


@dataclass(frozen=True)
class Ownership:
    """Which of the service's resources are this deployment's: those tagged with its `stack`.
    One made before resources carried a stack (no STACK tag) is its own only when the operator
    says so (`claim_untagged`, CLAIM_UNTAGGED_RESOURCES), or, without a stack name at all (a
    deployment not made by the template), as before."""

    stack: str | None = None
    claim_untagged: bool = False

    def tags(self) -> dict[str, str]:
        """The tag naming this deployment (none without a stack name)."""
        return {STACK: self.stack} if self.stack else {}

    def owns(self, tags: Mapping[str, str]) -> bool:
        """Whether a resource carrying `tags` is this deployment's."""
        owner = tags.get(STACK)
        if owner is None:
            return self.claim_untagged or self.stack is None
        return owner == self.stack


def managed_tags(node_class: NodeClass, stack: str | None = None) -> dict[str, str]:
    """NodeClass tags plus ours; ours win, so nobody can unmark what we manage."""
    ours = {MANAGED: "true", NODE_CLASS: node_class.metadata.name}
    return {**node_class.spec.tags, **ours, **Ownership(stack).tags()}


def instance_tags(
    node_class: NodeClass, node_pool: str, request: LaunchRequest | None, stack: str | None = None
) -> dict[str, str]:
    """Tags for instances; `request` is None when one fleet serves several requests."""
    ours = {MANAGED: "true", NODE_CLASS: node_class.metadata.name, NODE_POOL: node_pool}
    ours |= Ownership(stack).tags()
    if request is not None:
        ours |= request_tags(request)
    # NodeClass tags win over request tags (and ours over both); resolution rejects a conflict.
    theirs = {**(request.tags if request else {}), **node_class.spec.tags}
    extra = [(k, v) for k, v in theirs.items() if k not in ours]
    return ours | dict(extra[: MAX_TAGS - len(ours)])


def conflicting_tags(node_class: NodeClass, request: LaunchRequest) -> list[str]:
    """Request tag keys the NodeClass sets to another value (a requester cannot override them)."""
    owned = node_class.spec.tags
    return sorted(k for k, v in request.tags.items() if k in owned and owned[k] != v)


def own_tags(node_class: NodeClass, request: LaunchRequest) -> dict[str, str]:
    """The request's own tags an instance carries: never a key the NodeClass sets."""
    return {k: v for k, v in request.tags.items() if k not in node_class.spec.tags}


def own_request_tags(node_class: NodeClass, request: LaunchRequest) -> dict[str, str]:
    """A request's tags for its instances of a shared fleet: never a NodeClass key, plus ours."""
    return own_tags(node_class, request) | request_tags(request)


def recorded_tags(record: InstanceRecord, stack: str | None = None) -> dict[str, str]:
    """The tags an instance's record says it carries (ours, but the managed tag, and its
    request's own); an instance tagged otherwise lost a CreateTags (docs/contracts.md: Tags). With
    `stack`, the deployment whose table records it: an instance made before instances carried
    their stack is claimed by the one deployment that recorded it."""
    ours = {NODE_POOL: record.node_pool, NODE_CLASS: record.node_class, STACK: stack}
    if record.request_id:
        ours |= {REQUEST_ID: record.request_id, REQUESTER: record.requester or ""}
    return {**record.request_tags, **{k: v for k, v in ours.items() if v is not None}}


def tags_to_fix(expected: Mapping[str, str], carried: Mapping[str, str]) -> dict[str, str]:
    """The tags to set so that an instance carries every expected tag with its value."""
    return {k: v for k, v in expected.items() if carried.get(k) != v}


def check_instance_tag_count(node_class: NodeClass, request: LaunchRequest) -> None:
    """Every tag an instance of this request would carry fits EC2's limit: ours, the NodeClass's
    and the request's (a key both set counts once: the class's value wins, or it is refused)."""
    theirs = {**node_class.spec.tags, **request.tags}
    total = SERVICE_INSTANCE_TAGS + len(theirs)
    if total > MAX_TAGS:
        raise RequestRejected(
            f"tags: instances would carry {total} tags ({SERVICE_INSTANCE_TAGS} of "
            f"capacity-launcher's, {len(node_class.spec.tags)} of NodeClass "
            f"{node_class.metadata.name}, {len(request.tags)} of the request); EC2 allows "
            f"{MAX_TAGS} per resource",
            "TooManyTags",
        )


def request_tags(request: LaunchRequest) -> dict[str, str]:
    return {REQUEST_ID: request.request_id, REQUESTER: request.requester or ""}


def as_ec2_tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
