"""resource-groups wire format: GroupResources, UngroupResources, ListGroupResources, and
the group lookups that accept `Group` (a name or an ARN) as the current API does."""

import json
from typing import Any

from moto.resourcegroups.responses import ResourceGroupsResponse

from . import models as groups


class CapacityReservationGroupResponse(ResourceGroupsResponse):
    """Methods `resourcegroups.hooks` adds to moto's ResourceGroupsResponse."""

    def _group(self) -> Any:
        name_or_arn = self._get_param("Group") or self._get_param("GroupName")
        return self.resourcegroups_backend.get_group(name_or_arn)

    def get_group(self) -> str:
        group = self._group()
        return json.dumps(
            {"Group": {"GroupArn": group.arn, "Name": group.name, "Description": group.description}}
        )

    def get_group_configuration(self) -> str:
        group = self._group()
        return json.dumps(
            {
                "GroupConfiguration": {
                    "Configuration": group.configuration or [],
                    "Status": "UPDATE_COMPLETE",
                }
            }
        )

    def group_resources(self) -> str:
        succeeded, failed = groups.add_resources(
            self._group(), self.current_account, self.region, self._get_param("ResourceArns") or []
        )
        groups.resources_joined(self.current_account, self.region, succeeded)
        return json.dumps({"Succeeded": succeeded, "Failed": failed, "Pending": []})

    def ungroup_resources(self) -> str:
        succeeded, failed = groups.remove_resources(
            self._group(), self._get_param("ResourceArns") or []
        )
        return json.dumps({"Succeeded": succeeded, "Failed": failed, "Pending": []})

    def list_group_resources(self) -> str:  # type: ignore[override]
        wanted_types: set[str] | None = None
        for item in self._get_param("Filters") or []:
            if item.get("Name") == "resource-type":
                wanted_types = set(item.get("Values") or [])
        identifiers = [
            {"ResourceArn": arn, "ResourceType": groups.resource_type_of(arn)}
            for arn in groups.members(self._group())
            if wanted_types is None or groups.resource_type_of(arn) in wanted_types
        ]
        start = int(self._get_param("NextToken") or 0)
        max_results = self._get_param("MaxResults")
        end = len(identifiers) if not max_results else start + int(max_results)
        page = identifiers[start:end]
        answer: dict[str, Any] = {
            "Resources": [{"Identifier": identifier} for identifier in page],
            "ResourceIdentifiers": page,
            "QueryErrors": [],
        }
        if end < len(identifiers):
            answer["NextToken"] = str(end)
        return json.dumps(answer)
