"""The EC2 hooks: the capacity actions and answers on moto's `EC2Response`, billing fields on its
`Ami`, instances that give their slot back when stopped or terminated and take one again when
started, `cr-` ids for tags, Capacity Reservations as resource-group members, the launch-template
quota, terminated instances that leave DescribeInstances after an hour, status checks
`initializing` for a while after a launch or a start, listings with EC2's limits and paging, and
a resource's tags looked up by its id."""

import functools
from collections.abc import Callable
from typing import Any

from moto.ec2.models import EC2Backend
from moto.ec2.models.amis import Ami
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.instances import Instance
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, EC2_RESOURCE_TO_PREFIX

from moto_capacity.core.patching import copy_members, hook, hook_property
from moto_capacity.resourcegroups.models import CAPACITY_RESERVATION_TYPE, register_member_kind

from .models.allocation import place_restarted_instance
from .models.backend import capacity_backend, existing_capacity_backend
from .models.consistency import noting_launches
from .models.group_members import CAPACITY_RESERVATION_MEMBERS
from .models.platforms import ImageBillingFields
from .models.retention import (
    noting_termination,
    template_tags_kept,
    within_launch_template_quota,
)
from .models.status_checks import checking_after_launch, checking_after_start, initializing_status
from .models.tag_lookup import looked_up_by_id
from .responses.capacity_reservations import CapacityReservationResponse
from .responses.gpu_reservations import GpuReservationResponse
from .responses.instances import EventuallyConsistentInstanceResponse
from .responses.listings import StrictListingResponse


def _releasing_slot(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def release_after(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        backend = existing_capacity_backend(self.ec2_backend)
        if backend is not None:
            backend.release_instance(self)
        return result

    return release_after


def _terminating(original: Callable[..., Any]) -> Callable[..., Any]:
    """A terminated instance gives its slot back, and leaves DescribeInstances an hour later."""
    return noting_termination(_releasing_slot(original))


def _placing_again(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def place_before(self: Any, *args: Any, **kwargs: Any) -> Any:
        backend = existing_capacity_backend(self.ec2_backend)
        if backend is not None and not self.is_running():
            place_restarted_instance(backend, self)
        return original(self, *args, **kwargs)

    return place_before


def _checking_reservations_exist(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def do_resources_exist(self: Any, resource_ids: list[str]) -> Any:
        for reservation_id in [rid for rid in resource_ids if rid.startswith("cr-")]:
            capacity_backend(self).get_reservation(reservation_id)
        return original(self, [rid for rid in resource_ids if not rid.startswith("cr-")])

    return do_resources_exist


def install() -> None:
    EC2_RESOURCE_TO_PREFIX["capacity-reservation"] = "cr"
    EC2_PREFIX_TO_RESOURCE["cr"] = "capacity-reservation"
    copy_members(CapacityReservationResponse, EC2Response)
    copy_members(GpuReservationResponse, EC2Response)
    copy_members(EventuallyConsistentInstanceResponse, EC2Response)
    copy_members(StrictListingResponse, EC2Response)
    copy_members(ImageBillingFields, Ami)
    hook(EC2Backend, "run_instances", lambda o: checking_after_launch(noting_launches(o)))
    hook(Instance, "stop", _releasing_slot)
    hook(Instance, "terminate", _terminating)
    hook(Instance, "start", lambda o: checking_after_start(_placing_again(o)))
    hook_property(Instance, "instance_status", initializing_status)
    hook_property(Instance, "system_status", initializing_status)
    hook(EC2Backend, "do_resources_exist", _checking_reservations_exist)
    hook(EC2Backend, "create_launch_template", within_launch_template_quota)
    hook(EC2Backend, "create_tags", template_tags_kept)
    hook(EC2Backend, "delete_tags", template_tags_kept)
    hook(TaggedEC2Resource, "get_tags", looked_up_by_id)
    register_member_kind(CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_MEMBERS)
