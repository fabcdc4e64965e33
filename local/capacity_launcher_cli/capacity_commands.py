"""`get reservations` and `get unavailable-offerings`: the capacity the service sees."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.unavailable_offerings import UnavailableEntry, UnavailableOfferings
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.offerings import RESERVED, offering_key
from capacity_launcher.domain.reservations import ReservationSnapshot, selection_of
from capacity_launcher.service import wiring
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.output_formats import TABLES


def reservation_snapshots(deployment: Deployment) -> list[ReservationSnapshot]:
    """Reservations as EC2 reports them now (complete and live), with what the service has
    learned of them: exhausted (snapshot or ICE cache), and groups (snapshots and the groups
    our NodeClasses target)."""
    reservations = CapacityReservations(
        deployment.client("ec2"), deployment.client("resource-groups")
    )
    found = reservations.describe()
    stored = {
        s.snapshot.reservation_id: s.snapshot
        for s in ReservationSnapshots(deployment.state_table, deployment.client("dynamodb")).list()
    }
    groups: dict[str, list[str]] = {rid: list(snapshot.groups) for rid, snapshot in stored.items()}
    store = wiring.Adapters(deployment.settings(), deployment.client).config_store()
    for node_class in store.node_classes():
        target = selection_of(node_class).target
        arn = target.group_arn if target else None
        if arn:
            for member in _members(reservations, arn):
                groups.setdefault(member, []).append(arn)
    cached = ice_cache(deployment).current()

    def exhausted(reservation_id: str) -> bool:
        snapshot = stored.get(reservation_id)
        in_cache = offering_key(RESERVED, None, None, reservation_id) in cached
        return in_cache or (snapshot is not None and snapshot.exhausted)

    return [
        dataclasses.replace(
            r,
            groups=tuple(sorted(set(groups.get(r.reservation_id, [])))),
            exhausted=exhausted(r.reservation_id),
        )
        for r in found
    ]


def ice_cache(deployment: Deployment) -> UnavailableOfferings:
    return wiring.Adapters(deployment.settings(), deployment.client).unavailable_offerings()


def _members(reservations: CapacityReservations, group_arn: str) -> list[str]:
    try:
        return reservations.group_members(group_arn)
    except CapacityLauncherError:  # a NodeClass may name a group that does not exist (yet)
        return []


def get_reservations(args: argparse.Namespace, deployment: Deployment) -> int:
    """EC2's capacity reservations as the service sees them (or the ones named by id)."""
    snapshots = named.chosen(args, reservation_snapshots(deployment), lambda r: r.reservation_id)
    invalid = named.chosen(
        args,
        ReservationSnapshots(deployment.state_table, deployment.client("dynamodb")).invalid(),
        lambda i: i.reservation_id,
    )
    present = [*(r.reservation_id for r in snapshots), *(i.reservation_id for i in invalid)]
    code = named.answer(
        args,
        named.missing_from(args, present),
        lambda: [
            *(views.reservation_json(r) for r in snapshots),
            *(
                {"capacityReservationId": i.reservation_id, "invalidSnapshot": i.reason}
                for i in invalid
            ),
        ],
        lambda: views.reservations(snapshots),
    )
    if args.output in TABLES:
        for snapshot in invalid:
            print(
                f"warning: the stored snapshot of {snapshot.reservation_id} is invalid "
                f"(the next sync replaces it): {snapshot.reason}",
                file=sys.stderr,
            )
    return code


def get_unavailable_offerings(args: argparse.Namespace, deployment: Deployment) -> int:
    """The ICE cache's unexpired entries (or the ones named by offering key)."""
    entries = named.chosen(args, list(ice_cache(deployment).current().values()), _offering)
    return named.answer(
        args,
        named.missing_from(args, (e.offering for e in entries)),
        lambda: [views.unavailable_json(e) for e in entries],
        lambda: views.unavailable_offerings(entries),
    )


def _offering(entry: UnavailableEntry) -> str:
    return entry.offering
