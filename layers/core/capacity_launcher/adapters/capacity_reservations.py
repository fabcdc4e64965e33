"""Capacity reservations and reservation groups as EC2 and resource-groups describe them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client, error_code, error_message
from capacity_launcher.domain.config import CapacityReservationSelectorTerm, NodeClass
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.domain.offerings import ReservationSnapshot
from capacity_launcher.domain.planning import ReservationSource, ReservedTarget

_RESERVATION_ARN_MARK = ":capacity-reservation/"


class CapacityReservations:
    def __init__(self, ec2: Any | None = None, resource_groups: Any | None = None) -> None:
        self._ec2 = ec2 or client("ec2")
        self._resource_groups = resource_groups

    def sources(self, node_class: NodeClass) -> list[ReservationSource]:
        """The reservation targets a NodeClass names, each with the reservations it reaches."""
        spec = node_class.spec
        target = spec.reservation_target
        if target is not None and target.capacity_reservation_id:
            found = self.describe(ids=[target.capacity_reservation_id])
            return [
                ReservationSource(
                    ReservedTarget(reservation_id=target.capacity_reservation_id), tuple(found)
                )
            ]
        if target is not None and target.capacity_reservation_resource_group_arn:
            arn = target.capacity_reservation_resource_group_arn
            members = self.group_members(arn)
            found = self.describe(ids=members) if members else []
            found = [_in_group(r, arn) for r in found]
            return [ReservationSource(ReservedTarget(group_arn=arn), tuple(found))]
        if spec.capacity_reservation_selector_terms:
            selected = self.select(spec.capacity_reservation_selector_terms)
            return [
                ReservationSource(ReservedTarget(reservation_id=r.reservation_id), (r,))
                for r in selected
            ]
        return []

    def claim(self, reservation_id: str, count: int) -> int | None:
        """No shared view to claim against here: EC2 decides (None)."""
        return None

    def give_back(self, reservation_id: str, count: int) -> None:
        """Nothing was claimed, so nothing to give back."""

    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None:
        """Nothing to keep here: reservations are read live from EC2 for every launch."""

    def note_launched(self, launched: Mapping[str, int]) -> None:
        """Nothing to keep here: EC2's AvailableInstanceCount already counts the launch."""

    def group_members(self, group_arn: str) -> list[str]:
        groups = self._resource_groups or client("resource-groups")
        ids: list[str] = []
        try:
            pages = groups.get_paginator("list_group_resources").paginate(Group=group_arn)
            for page in pages:
                for item in page.get("Resources", page.get("ResourceIdentifiers", [])):
                    identifier = item.get("Identifier", item)
                    arn = identifier.get("ResourceArn", "")
                    if _RESERVATION_ARN_MARK in arn:
                        ids.append(arn.rsplit("/", 1)[-1])
        except ClientError as error:
            raise LaunchFailed(error_code(error), error_message(error)) from error
        return sorted(set(ids))

    def select(self, terms: Sequence[CapacityReservationSelectorTerm]) -> list[ReservationSnapshot]:
        """Reservations matching any term (terms are ORed, a term's fields ANDed), active only."""
        found: dict[str, ReservationSnapshot] = {}
        for term in terms:
            if term.id:
                matches = self.describe(ids=[term.id])
            else:
                filters = [{"Name": "state", "Values": ["active"]}]
                filters += [
                    {"Name": f"tag:{k}", "Values": [v]}
                    for k, v in sorted((term.tags or {}).items())
                ]
                if term.owner_id:
                    filters.append({"Name": "owner-id", "Values": [term.owner_id]})
                if term.instance_match_criteria:
                    filters.append(
                        {
                            "Name": "instance-match-criteria",
                            "Values": [term.instance_match_criteria],
                        }
                    )
                matches = self.describe(filters=filters)
            for reservation in matches:
                found.setdefault(reservation.reservation_id, reservation)
        return [found[k] for k in sorted(found)]

    def describe(
        self,
        ids: Iterable[str] | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[ReservationSnapshot]:
        kwargs: dict[str, Any] = {}
        if ids is not None:
            kwargs["CapacityReservationIds"] = list(ids)
        if filters:
            kwargs["Filters"] = list(filters)
        try:
            pages = self._ec2.get_paginator("describe_capacity_reservations").paginate(**kwargs)
            raw = [r for page in pages for r in page["CapacityReservations"]]
        except ClientError as error:
            code = error_code(error)
            if code == "InvalidCapacityReservationId.NotFound":
                return []
            raise LaunchFailed(code, error_message(error)) from error
        return [snapshot_from_ec2(r) for r in raw]


def snapshot_from_ec2(raw: Mapping[str, Any]) -> ReservationSnapshot:
    end_date = raw.get("EndDate")
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
    )


def _in_group(reservation: ReservationSnapshot, group_arn: str) -> ReservationSnapshot:
    from dataclasses import replace

    return replace(reservation, groups=tuple(sorted({*reservation.groups, group_arn})))
