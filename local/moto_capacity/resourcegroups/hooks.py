"""The resource-groups hooks: the group-resources routes and actions, pool configurations
normalised as AWS stores them, and deletion protection."""

import functools
from collections.abc import Callable
from typing import Any

from moto.resourcegroups import urls as resource_groups_urls
from moto.resourcegroups.exceptions import BadRequestException
from moto.resourcegroups.models import ResourceGroupsBackend
from moto.resourcegroups.responses import ResourceGroupsResponse

from moto_capacity.core.patching import copy_members, hook

from . import models as groups
from .responses import CapacityReservationGroupResponse
from .urls import GROUP_RESOURCE_PATHS


def _normalising_configuration(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def with_configuration(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["configuration"] = groups.normalised_configuration(kwargs.get("configuration"))
        return original(self, *args, **kwargs)

    return with_configuration


def _protecting_deletion(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def delete_group(self: Any, group_name: str) -> Any:
        group = self.get_group(group_name)
        if groups.is_deletion_protected(group) and groups.members(group):
            raise BadRequestException("The group has deletion-protection and is not empty")
        return original(self, group_name)

    return delete_group


def install() -> None:
    resource_groups_urls.url_paths.update(GROUP_RESOURCE_PATHS)
    copy_members(CapacityReservationGroupResponse, ResourceGroupsResponse)
    hook(ResourceGroupsBackend, "create_group", _normalising_configuration)
    hook(ResourceGroupsBackend, "put_group_configuration", _normalising_configuration)
    hook(ResourceGroupsBackend, "delete_group", _protecting_deletion)
