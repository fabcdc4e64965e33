"""The resource-groups paths boto3 posts the group-resources actions to; moto 5.2 routes none."""

from moto.resourcegroups.responses import ResourceGroupsResponse

GROUP_RESOURCE_PATHS = {
    "{0}/group-resources$": ResourceGroupsResponse.dispatch,
    "{0}/ungroup-resources$": ResourceGroupsResponse.dispatch,
    "{0}/list-group-resources$": ResourceGroupsResponse.dispatch,
}
