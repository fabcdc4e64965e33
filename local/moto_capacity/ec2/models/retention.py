"""What EC2 keeps, and for how long: the launch-template quota, terminated instances that leave
DescribeInstances, and a tag-scoped TerminateInstances of an instance that is gone.

EC2 User Guide, "Restrictions for Amazon EC2 launch templates"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/launch-template-restrictions.html): an
account may have up to 5,000 launch templates per Region; CreateLaunchTemplate beyond the quota
fails with `ResourceLimitExceeded` (EC2 API Reference, "Error codes for the Amazon EC2 API",
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html: "You have exceeded
an Amazon EC2 resource limit"). Deleting one frees its place.

EC2 API Reference, DescribeInstances
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html): terminated
instances remain visible after termination for approximately one hour. After that the id is
unknown: DescribeInstances, TerminateInstances and CreateTags with it answer
`InvalidInstanceID.NotFound`.

Under a policy that allows `ec2:TerminateInstances` only on instances carrying a tag
(`aws:ResourceTag/...`), IAM finds no tag on an instance that is gone and the whole call answers
`UnauthorizedOperation` (the case behind Karpenter's aws/karpenter-provider-aws#2253). moto
evaluates no IAM; `set_termination_scope` makes the emulator answer as such a policy would.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from moto.ec2.exceptions import EC2ClientError

from moto_capacity.core.clock import CLOCK

DEFAULT_LAUNCH_TEMPLATE_QUOTA = 5000
TERMINATED_VISIBLE_FOR = timedelta(hours=1)


class ResourceLimitExceeded(EC2ClientError):
    code = "ResourceLimitExceeded"


class UnauthorizedOperation(EC2ClientError):
    code = "UnauthorizedOperation"


for _error in (ResourceLimitExceeded, UnauthorizedOperation):
    # moto finds an error's service from its module name (see ec2.exceptions).
    _error.__module__ = "capacity_errors"


class Retention:
    """The launch-template quota, when each instance was terminated, and the termination scope."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.launch_template_quota = DEFAULT_LAUNCH_TEMPLATE_QUOTA
        self.termination_scope: tuple[str, str] | None = None
        # instance id -> (when it was terminated, the moto EC2 backend holding it)
        self._terminated_at: dict[str, tuple[datetime, Any]] = {}

    def set_launch_template_quota(self, quota: object) -> None:
        if isinstance(quota, bool) or not isinstance(quota, int) or quota < 0:
            raise ValueError("launchTemplateQuota must be an integer >= 0")
        with self._lock:
            self.launch_template_quota = quota

    def set_termination_scope(self, tag_key: str | None, tag_value: str | None) -> None:
        if tag_key is None:
            with self._lock:
                self.termination_scope = None
            return
        if not isinstance(tag_key, str) or not tag_key or not isinstance(tag_value, str):
            raise ValueError("tagKey must be a non-empty string and tagValue a string")
        with self._lock:
            self.termination_scope = (tag_key, tag_value)

    def terminated(self, instance: Any) -> None:
        with self._lock:
            self._terminated_at.setdefault(instance.id, (CLOCK.now(), instance.ec2_backend))

    def due_to_leave(self) -> list[tuple[Any, str]]:
        """(backend, instance id) of terminated instances EC2 no longer lists (an hour on)."""
        now = CLOCK.now()
        with self._lock:
            gone = [
                (backend, instance_id)
                for instance_id, (at, backend) in self._terminated_at.items()
                if at + TERMINATED_VISIBLE_FOR <= now
            ]
            for _, instance_id in gone:
                del self._terminated_at[instance_id]
            return gone

    def reset(self) -> None:
        with self._lock:
            self.launch_template_quota = DEFAULT_LAUNCH_TEMPLATE_QUOTA
            self.termination_scope = None
            self._terminated_at.clear()

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            scope = self.termination_scope
            return {
                "launchTemplateQuota": self.launch_template_quota,
                "terminationScope": {"tagKey": scope[0], "tagValue": scope[1]} if scope else None,
                "terminatedStillListed": len(self._terminated_at),
            }


RETENTION = Retention()


def forget_departed() -> None:
    """Drop the instances terminated more than an hour ago from moto's backends."""
    for ec2_backend, instance_id in RETENTION.due_to_leave():
        for reservation_id, reservation in list(ec2_backend.reservations.items()):
            kept = [i for i in reservation.instances if i.id != instance_id]
            if len(kept) == len(reservation.instances):
                continue
            if kept:
                reservation.instances = kept
            else:
                del ec2_backend.reservations[reservation_id]


def check_termination_scope(ec2_backend: Any, instance_ids: list[str]) -> None:
    """What a tag-scoped TerminateInstances policy decides: every id must name an instance that
    carries the tag, or the whole call is refused."""
    scope = RETENTION.termination_scope
    if scope is None:
        return
    key, value = scope
    for instance_id in instance_ids:
        instance = ec2_backend.get_instance_by_id(instance_id)
        tags = {t["key"]: t["value"] for t in instance.get_tags()} if instance else {}
        if tags.get(key) != value:
            region, account = ec2_backend.region_name, ec2_backend.account_id
            arn = f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"
            raise UnauthorizedOperation(
                "You are not authorized to perform this operation. User is not authorized to "
                f"perform: ec2:TerminateInstances on resource: {arn} because no identity-based "
                "policy allows the ec2:TerminateInstances action."
            )


def within_launch_template_quota(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's EC2Backend.create_launch_template: refused once the Region holds the quota;
    CreateTime read from the emulator's clock."""

    @functools.wraps(original)
    def create_launch_template(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        already = name in self.launch_template_name_to_ids  # moto's own AlreadyExists comes first
        if not already and len(self.launch_templates) >= RETENTION.launch_template_quota:
            raise ResourceLimitExceeded(
                "You have reached the maximum number of launch templates "
                f"({RETENTION.launch_template_quota}) in this Region."
            )
        template = original(self, name, *args, **kwargs)
        # Stamped by the emulator's clock, like everything time-based here (moto: wall time).
        template.create_time = CLOCK.now().replace(tzinfo=None)
        for version in template.versions:
            version.create_time = template.create_time
        return template

    return create_launch_template


def template_tags_kept(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's EC2Backend.create_tags and delete_tags: a launch template's tags changed
    afterwards show in DescribeLaunchTemplates, as on EC2 (its `Tags` are "the tags for the
    launch template": https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplate.html);
    moto answers the tags it was created with."""

    @functools.wraps(original)
    def changing_tags(self: Any, resource_ids: list[str], *args: Any, **kwargs: Any) -> Any:
        answer = original(self, resource_ids, *args, **kwargs)
        for resource_id in resource_ids:
            template = self.launch_templates.get(resource_id)
            if template is not None:
                template.tags = [
                    {"Key": t["key"], "Value": t["value"]} for t in template.get_tags()
                ]
        return answer

    return changing_tags


def noting_termination(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's Instance.terminate: remembers when, so the instance leaves an hour later."""

    @functools.wraps(original)
    def terminate(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        RETENTION.terminated(self)
        return result

    return terminate
