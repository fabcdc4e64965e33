"""`get reservations` and `get unavailable-offerings`: the capacity the service sees."""

from __future__ import annotations

import argparse
import dataclasses

from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.offerings import ReservationSnapshot
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment


def reservation_snapshots(deployment: Deployment) -> list[ReservationSnapshot]:
    """Reservations as EC2 reports them now, with the groups our NodeClasses target."""
    reservations = CapacityReservations(
        deployment.client("ec2"), deployment.client("resource-groups")
    )
    found = reservations.describe()
    groups: dict[str, list[str]] = {}
    store = ConfigStore(deployment.state_table, deployment.client("dynamodb"))
    for node_class in store.node_classes():
        target = node_class.spec.reservation_target
        arn = target.capacity_reservation_resource_group_arn if target else None
        if arn:
            for member in _members(reservations, arn):
                groups.setdefault(member, []).append(arn)
    return [
        dataclasses.replace(r, groups=tuple(sorted(set(groups.get(r.reservation_id, [])))))
        for r in found
    ]


def _members(reservations: CapacityReservations, group_arn: str) -> list[str]:
    try:
        return reservations.group_members(group_arn)
    except CapacityLauncherError:  # a NodeClass may name a group that does not exist (yet)
        return []


def get_reservations(args: argparse.Namespace, deployment: Deployment) -> int:
    snapshots = reservation_snapshots(deployment)
    if args.output == "json":
        views.print_json([views.reservation_json(r) for r in snapshots])
    else:
        views.console().print(views.reservations(snapshots))
    return 0


def get_unavailable_offerings(args: argparse.Namespace, deployment: Deployment) -> int:
    cache = UnavailableOfferings(
        deployment.unavailable_offerings_table,
        deployment.ice_ttl_seconds,
        dynamodb=deployment.client("dynamodb"),
    )
    entries = list(cache.current().values())
    if args.output == "json":
        views.print_json([views.unavailable_json(e) for e in entries])
    else:
        views.console().print(views.unavailable_offerings(entries))
    return 0
