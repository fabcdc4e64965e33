"""Fresh instances unknown to EC2 for a while (see `consistency`): the wire side.

EC2 API Reference, "Eventual consistency in the Amazon EC2 API"
(https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html): DescribeInstances,
DescribeInstanceStatus, CreateTags and TerminateInstances on ids that RunInstances or CreateFleet
just returned can answer `InvalidInstanceID.NotFound`; a listing without ids simply does not list
them yet.
EC2 API Reference, "Error codes for the Amazon EC2 API": CreateTags on an instance id that does
not exist answers `InvalidInstanceID.NotFound` too (moto would tag it).
Terminated instances leave all three about an hour after termination, and a tag-scoped
TerminateInstances is refused as IAM refuses it (`models.retention`).
`ec2.hooks` copies these methods onto moto's `EC2Response`; `models.consistency` notes the
fresh ids.
"""

import copy
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import InvalidInstanceIdError
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.tags import TagResponse

from moto_capacity.ec2.models.backend import capacity_backend
from moto_capacity.ec2.models.consistency import CONSISTENCY
from moto_capacity.ec2.models.retention import check_termination_scope, forget_departed


def _refuse_hidden(instance_ids: list[str]) -> None:
    hidden = CONSISTENCY.hidden(instance_ids)
    if hidden:
        raise InvalidInstanceIdError(hidden)


def _without_hidden(reservations: list[Any]) -> list[Any]:
    ids = [instance.id for reservation in reservations for instance in reservation.instances]
    hidden = set(CONSISTENCY.hidden(ids))
    if not hidden:
        return reservations
    visible = []
    for reservation in reservations:
        shown = copy.copy(reservation)
        shown.instances = [i for i in reservation.instances if i.id not in hidden]
        if shown.instances:
            visible.append(shown)
    return visible


class EventuallyConsistentInstanceResponse(InstanceResponse, TagResponse):
    """DescribeInstances, CreateTags and TerminateInstances that do not know fresh ids yet."""

    def describe_instances(self) -> ActionResult:
        forget_departed()
        _refuse_hidden(self._get_param("InstanceIds", []))
        # Reservations that became active since the last look take in running instances first.
        capacity_backend(self.ec2_backend).expire_due_reservations()
        answer = InstanceResponse.describe_instances(self)
        result: dict[str, Any] = answer.result  # type: ignore[assignment]
        result["Reservations"] = _without_hidden(result["Reservations"])
        return answer

    def describe_instance_status(self) -> ActionResult:
        """Fresh ids are as unknown here as in DescribeInstances (the eventual-consistency page
        names every Describe call): named ones refused, unnamed ones not listed yet."""
        forget_departed()
        _refuse_hidden(self._get_param("InstanceIds", []))
        answer = InstanceResponse.describe_instance_status(self)
        result: dict[str, Any] = answer.result  # type: ignore[assignment]
        statuses = result["InstanceStatuses"]
        hidden = set(CONSISTENCY.hidden([s.id for s in statuses]))
        result["InstanceStatuses"] = [s for s in statuses if s.id not in hidden]
        return answer

    def terminate_instances(self) -> ActionResult:
        forget_departed()
        instance_ids = self._get_param("InstanceIds", [])
        _refuse_hidden(instance_ids)
        check_termination_scope(self.ec2_backend, instance_ids)
        return InstanceResponse.terminate_instances(self)

    def create_tags(self) -> ActionResult:
        forget_departed()
        instance_ids = [r for r in self._get_param("Resources", []) if r.startswith("i-")]
        _refuse_hidden(instance_ids)
        if instance_ids:
            # moto tags any id; EC2 refuses the whole call when one instance does not exist.
            self.ec2_backend.get_multi_instances_by_id(instance_ids)
        return TagResponse.create_tags(self)
