"""Capacity reservations and reservation groups as EC2 and resource-groups describe them.

Only translation: which reservations a NodeClass uses is decided in domain/capacity/reservations.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.capacity.block_extensions import (
    BlockExtension,
    BlockExtensionOffering,
)
from capacity_launcher.domain.capacity.reservations import (
    DEFAULT_TYPE,
    SELECTABLE_STATES,
    ReservationSnapshot,
)
from capacity_launcher.domain.errors import LaunchFailed

_RESERVATION_ARN_MARK = ":capacity-reservation/"
_NOT_FOUND = "InvalidCapacityReservationId.NotFound"


class CapacityReservations:
    """DescribeCapacityReservations and ListGroupResources, as snapshots and reservation ids."""

    def __init__(
        self,
        ec2: Any | None = None,
        resource_groups: Any | None = None,
        *,
        clients: Callable[[str], Any] = client,
    ) -> None:
        """`clients` makes the resource-groups client on first use (most containers never list
        a group), from the same factory as the caller's other clients."""
        self._ec2 = ec2 or clients("ec2")
        self._resource_groups = resource_groups
        self._clients = clients

    def group_members(self, group_arn: str) -> list[str]:
        groups = self._resource_groups or self._clients("resource-groups")
        ids: list[str] = []
        with aws_call("ListGroupResources", fatal=LaunchFailed):
            pages = all_pages(groups.list_group_resources, Group=group_arn)
            for page in pages:
                for item in page.get("Resources", page.get("ResourceIdentifiers", [])):
                    identifier = item.get("Identifier", item)
                    arn = identifier.get("ResourceArn", "")
                    if _RESERVATION_ARN_MARK in arn:
                        ids.append(arn.rsplit("/", 1)[-1])
        return sorted(set(ids))

    def matching(self, term: CapacityReservationSelectorTerm) -> list[ReservationSnapshot]:
        """What EC2 returns for one selector term: its id, or its fields as filters."""
        if term.id:
            return self.describe(ids=[term.id])
        return self.describe(filters=_filters(term))

    def describe(
        self,
        ids: Iterable[str] | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[ReservationSnapshot]:
        """The reservations named (all when `ids` is None) that match `filters`. EC2 refuses a
        whole call for one id it does not know (any more): the ids are then described one by
        one, so a vanished group member costs only itself, not the whole group."""
        wanted = None if ids is None else list(ids)
        try:
            raw = self._described(wanted, filters)
        except LaunchFailed as error:
            if error.code != _NOT_FOUND:
                raise
            if not wanted or len(wanted) == 1:
                return []
            return [r for one in wanted for r in self.describe([one], filters)]
        return [snapshot_from_ec2(r) for r in raw]

    def extension_offerings(
        self, reservation_id: str, duration_hours: int
    ) -> list[BlockExtensionOffering]:
        """DescribeCapacityBlockExtensionOfferings: what EC2 offers to extend a Capacity Block
        by `duration_hours` from its end (none when capacity does not allow it)."""
        with aws_call("DescribeCapacityBlockExtensionOfferings", fatal=LaunchFailed):
            pages = all_pages(
                self._ec2.describe_capacity_block_extension_offerings,
                CapacityReservationId=reservation_id,
                CapacityBlockExtensionDurationHours=duration_hours,
            )
            raw = [o for page in pages for o in page.get("CapacityBlockExtensionOfferings", [])]
        return [_extension_offering(o, reservation_id) for o in raw]

    def purchase_extension(self, offering_id: str, reservation_id: str) -> BlockExtension:
        """PurchaseCapacityBlockExtension: the extension bought, `payment-pending` until paid;
        the block's end date moves only once it is `payment-succeeded`."""
        with aws_call("PurchaseCapacityBlockExtension", fatal=LaunchFailed):
            answer = self._ec2.purchase_capacity_block_extension(
                CapacityBlockExtensionOfferingId=offering_id,
                CapacityReservationId=reservation_id,
            )
        raw = (answer.get("CapacityBlockExtensions") or [{}])[0]
        return BlockExtension(
            offering_id=raw.get("CapacityBlockExtensionOfferingId", offering_id),
            reservation_id=raw.get("CapacityReservationId", reservation_id),
            status=raw.get("CapacityBlockExtensionStatus", "payment-pending"),
            starts_at=_date(raw.get("CapacityBlockExtensionStartDate")),
            ends_at=_date(raw.get("CapacityBlockExtensionEndDate")),
            duration_hours=int(raw.get("CapacityBlockExtensionDurationHours", 0)),
            upfront_fee=_fee(raw.get("UpfrontFee")),
        )

    def _described(
        self, ids: list[str] | None, filters: Sequence[Mapping[str, Any]] | None
    ) -> list[Mapping[str, Any]]:
        kwargs: dict[str, Any] = {}
        if ids is not None:
            kwargs["CapacityReservationIds"] = ids
        if filters:
            kwargs["Filters"] = list(filters)
        with aws_call("DescribeCapacityReservations", fatal=LaunchFailed):
            pages = all_pages(self._ec2.describe_capacity_reservations, **kwargs)
            return [r for page in pages for r in page["CapacityReservations"]]


def _date(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _fee(value: Any) -> Decimal | None:
    """EC2's fee is a decimal string; absent or not a number, it is unknown, never guessed."""
    try:
        return Decimal(str(value)) if value is not None else None
    except InvalidOperation:
        return None


def _extension_offering(raw: Mapping[str, Any], reservation_id: str) -> BlockExtensionOffering:
    starts_at, ends_at = (
        raw.get("CapacityBlockExtensionStartDate"),
        raw.get("CapacityBlockExtensionEndDate"),
    )
    if not isinstance(starts_at, datetime) or not isinstance(ends_at, datetime):
        raise LaunchFailed(
            "InvalidExtensionOffering",
            f"EC2 offered an extension of {reservation_id} without its start and end dates",
        )
    return BlockExtensionOffering(
        offering_id=raw["CapacityBlockExtensionOfferingId"],
        reservation_id=reservation_id,
        instance_type=raw.get("InstanceType", ""),
        instance_count=int(raw.get("InstanceCount", 0)),
        zone=raw.get("AvailabilityZone", ""),
        starts_at=starts_at,
        ends_at=ends_at,
        duration_hours=int(raw.get("CapacityBlockExtensionDurationHours", 0)),
        upfront_fee=_fee(raw.get("UpfrontFee")),
        currency=raw.get("CurrencyCode"),
    )


def _filters(term: CapacityReservationSelectorTerm) -> list[dict[str, Any]]:
    """A term's fields in DescribeCapacityReservations' filter language (EC2 ANDs filters)."""
    filters: list[dict[str, Any]] = [{"Name": "state", "Values": list(SELECTABLE_STATES)}]
    filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted((term.tags or {}).items())]
    if term.owner_id:
        filters.append({"Name": "owner-id", "Values": [term.owner_id]})
    if term.instance_match_criteria:
        filters.append(
            {"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]}
        )
    return filters


def snapshot_from_ec2(raw: Mapping[str, Any]) -> ReservationSnapshot:
    end_date = raw.get("EndDate")
    start_date = raw.get("StartDate")
    return ReservationSnapshot(
        reservation_id=raw["CapacityReservationId"],
        instance_type=raw["InstanceType"],
        zone=raw["AvailabilityZone"],
        state=raw.get("State", "active"),
        total=int(raw.get("TotalInstanceCount", 0)),
        available=int(raw.get("AvailableInstanceCount", 0)),
        platform=raw.get("InstancePlatform", "Linux/UNIX"),
        tenancy=raw.get("Tenancy", "default"),
        instance_match_criteria=raw.get("InstanceMatchCriteria", "open"),
        owner_id=raw.get("OwnerId"),
        end_date=end_date if isinstance(end_date, datetime) else None,
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
        reservation_type=raw.get("ReservationType") or DEFAULT_TYPE,
        interruptible=bool(raw.get("Interruptible", False)),
        start_date=start_date if isinstance(start_date, datetime) else None,
        placement_group=placement_group_name(raw.get("PlacementGroupArn")),
    )


def placement_group_name(arn: str | None) -> str | None:
    """A placement group's name from its ARN (`arn:aws:ec2:<region>:<account>:placement-group/
    <name>`): launches name the group by name (Placement.GroupName)."""
    if not arn:
        return None
    return arn.rsplit("/", 1)[-1] or None
