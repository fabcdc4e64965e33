"""Capacity Reservation groups: resource groups with the CapacityReservationPool configuration."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moto.resourcegroups.exceptions import BadRequestException

POOL_CONFIGURATION = "AWS::EC2::CapacityReservationPool"
GENERIC_CONFIGURATION = "AWS::ResourceGroups::Generic"
ALLOWED_RESOURCE_TYPES = "allowed-resource-types"
DELETION_PROTECTION = "deletion-protection"
CAPACITY_RESERVATION_TYPE = "AWS::EC2::CapacityReservation"
MAX_RESOURCES_PER_CALL = 10


@dataclass(frozen=True)
class MemberKind:
    """What groups need of the service owning a resource type they may hold (EC2 registers
    Capacity Reservations at install): whether an ARN exists in an account and Region, and what
    happens once GroupResources has added some (running instances join a reservation)."""

    exists: Callable[[str, str, str], bool]
    joined: Callable[[str, str, list[str]], None]


# Resource type -> its owner's answers; resource-groups itself knows no other service.
MEMBER_KINDS: dict[str, MemberKind] = {}


def register_member_kind(resource_type: str, kind: MemberKind) -> None:
    MEMBER_KINDS[resource_type] = kind


def _exists(account_id: str, region: str, arn: str) -> bool:
    resource_type = resource_type_of(arn)
    kind = MEMBER_KINDS.get(resource_type) if resource_type else None
    return kind is not None and kind.exists(account_id, region, arn)


def resources_joined(account_id: str, region: str, arns: list[str]) -> None:
    """Tell each owner which of its resources GroupResources has just added."""
    for resource_type, kind in MEMBER_KINDS.items():
        owned = [arn for arn in arns if resource_type_of(arn) == resource_type]
        if owned:
            kind.joined(account_id, region, owned)


def capacity_reservation_arn(region: str, account_id: str, reservation_id: str) -> str:
    return f"arn:aws:ec2:{region}:{account_id}:capacity-reservation/{reservation_id}"


def resource_type_of(arn: str) -> str | None:
    """The CloudFormation-style type of an ARN this extension can group."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "ec2" and parts[5].startswith("capacity-reservation/cr-"):
        return CAPACITY_RESERVATION_TYPE
    return None


def _parameters(configuration: Iterable[dict[str, Any]], kind: str) -> dict[str, list[str]]:
    for item in configuration:
        if item.get("Type") == kind:
            return {p["Name"]: list(p.get("Values") or []) for p in item.get("Parameters") or []}
    return {}


def _has(configuration: Iterable[dict[str, Any]], kind: str) -> bool:
    return any(item.get("Type") == kind for item in configuration)


def normalised_configuration(
    configuration: list[dict[str, Any]] | None,
) -> list[dict[str, Any]] | None:
    """Validate a group configuration; a pool gets the Generic restriction AWS adds for it."""
    if not configuration:
        return configuration
    configuration = [dict(item) for item in configuration]
    if not _has(configuration, POOL_CONFIGURATION):
        return configuration
    generic = _parameters(configuration, GENERIC_CONFIGURATION)
    allowed = generic.get(ALLOWED_RESOURCE_TYPES)
    if allowed is not None and allowed != [CAPACITY_RESERVATION_TYPE]:
        raise BadRequestException(
            f"{POOL_CONFIGURATION} requires {ALLOWED_RESOURCE_TYPES} to be "
            f"[{CAPACITY_RESERVATION_TYPE}]"
        )
    protection = generic.get(DELETION_PROTECTION)
    if protection is not None and protection != ["UNLESS_EMPTY"]:
        raise BadRequestException(f"{DELETION_PROTECTION} accepts only [UNLESS_EMPTY]")
    if not _has(configuration, GENERIC_CONFIGURATION):
        configuration.append(
            {
                "Type": GENERIC_CONFIGURATION,
                "Parameters": [
                    {"Name": ALLOWED_RESOURCE_TYPES, "Values": [CAPACITY_RESERVATION_TYPE]}
                ],
            }
        )
    elif allowed is None:
        for item in configuration:
            if item.get("Type") == GENERIC_CONFIGURATION:
                item["Parameters"] = [
                    *(item.get("Parameters") or []),
                    {"Name": ALLOWED_RESOURCE_TYPES, "Values": [CAPACITY_RESERVATION_TYPE]},
                ]
    return configuration


def is_capacity_reservation_pool(group: Any) -> bool:
    return _has(group.configuration or [], POOL_CONFIGURATION)


def members(group: Any) -> list[str]:
    """The resource ARNs grouped into `group`, in the order they were added."""
    if not hasattr(group, "resource_arns"):
        group.resource_arns = []
    return group.resource_arns


def allowed_types(group: Any) -> list[str] | None:
    return _parameters(group.configuration or [], GENERIC_CONFIGURATION).get(ALLOWED_RESOURCE_TYPES)


def is_deletion_protected(group: Any) -> bool:
    protection = _parameters(group.configuration or [], GENERIC_CONFIGURATION).get(
        DELETION_PROTECTION
    )
    return protection == ["UNLESS_EMPTY"]


def resource_groups_backend(account_id: str, region: str) -> Any:
    from moto.resourcegroups.models import resourcegroups_backends

    return resourcegroups_backends[account_id][region]


def find_group(account_id: str, region: str, group_arn: str) -> Any | None:
    """The group an ARN names, looked up in the region the ARN says."""
    parts = group_arn.split(":")
    if len(parts) < 6 or parts[2] != "resource-groups" or parts[3] != region:
        return None
    return resource_groups_backend(account_id, region).groups.by_arn.get(group_arn)


def reservation_ids_in(group: Any) -> list[str]:
    return [arn.rsplit("/", 1)[-1] for arn in members(group) if resource_type_of(arn)]


def groups_containing(account_id: str, region: str, reservation_arn: str) -> list[Any]:
    groups = resource_groups_backend(account_id, region).groups.by_arn.values()
    return [group for group in list(groups) if reservation_arn in members(group)]


def add_resources(
    group: Any, account_id: str, region: str, arns: list[str]
) -> tuple[list[str], list[dict[str, str]]]:
    """GroupResources: add what the group's configuration allows; report the rest as failed."""
    if not 1 <= len(arns) <= MAX_RESOURCES_PER_CALL:
        raise BadRequestException(f"ResourceArns takes 1 to {MAX_RESOURCES_PER_CALL} ARNs")
    allowed = allowed_types(group)
    if allowed is None:
        raise BadRequestException(
            "GroupResources needs a group whose configuration sets allowed-resource-types"
        )
    succeeded: list[str] = []
    failed: list[dict[str, str]] = []
    for arn in arns:
        if resource_type_of(arn) not in allowed:
            failed.append(
                {
                    "ResourceArn": arn,
                    "ErrorCode": "BadRequestException",
                    "ErrorMessage": f"Resource type is not one of {allowed}",
                }
            )
        elif not _exists(account_id, region, arn):
            failed.append(
                {
                    "ResourceArn": arn,
                    "ErrorCode": "NotFoundException",
                    "ErrorMessage": "The resource does not exist in this account and Region",
                }
            )
        else:
            if arn not in members(group):
                members(group).append(arn)
            succeeded.append(arn)
    return succeeded, failed


def remove_resources(group: Any, arns: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """UngroupResources: removing an ARN that is not a member fails for that ARN only."""
    if not 1 <= len(arns) <= MAX_RESOURCES_PER_CALL:
        raise BadRequestException(f"ResourceArns takes 1 to {MAX_RESOURCES_PER_CALL} ARNs")
    succeeded: list[str] = []
    failed: list[dict[str, str]] = []
    for arn in arns:
        if arn in members(group):
            members(group).remove(arn)
            succeeded.append(arn)
        else:
            failed.append(
                {
                    "ResourceArn": arn,
                    "ErrorCode": "NotFoundException",
                    "ErrorMessage": "The resource is not a member of the group",
                }
            )
    return succeeded, failed
