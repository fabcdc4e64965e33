"""`get reservations` and `get unavailable-offerings`: the capacity the service sees."""

from __future__ import annotations

import argparse
import sys

from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.output_formats import TABLES
from capacity_launcher_cli.service import queries


def reservation_snapshots(deployment: Deployment) -> list[ReservationSnapshot]:
    """Reservations as EC2 reports them now, with what the service has learned of them
    (`Queries.reservation_snapshots`)."""
    return queries(deployment).reservation_snapshots()


def unavailable_offerings(deployment: Deployment) -> list[UnavailableEntry]:
    """The ICE cache's unexpired entries."""
    return queries(deployment).unavailable_offerings()


def get_reservations(args: argparse.Namespace, deployment: Deployment) -> int:
    """EC2's capacity reservations as the service sees them (or the ones named by id)."""
    snapshots = named.chosen(args, reservation_snapshots(deployment), lambda r: r.reservation_id)
    idle = queries(deployment).reservation_idle_hours()
    invalid = named.chosen(
        args,
        queries(deployment).invalid_snapshots(),
        lambda i: i.reservation_id,
    )
    present = [*(r.reservation_id for r in snapshots), *(i.reservation_id for i in invalid)]
    code = named.answer(
        args,
        named.missing_from(args, present),
        lambda: [
            *(views.reservation_json(r, idle.get(r.reservation_id)) for r in snapshots),
            *(
                {"capacityReservationId": i.reservation_id, "invalidSnapshot": i.reason}
                for i in invalid
            ),
        ],
        lambda: views.reservations(snapshots, idle),
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
    entries = named.chosen(args, unavailable_offerings(deployment), _offering)
    return named.answer(
        args,
        named.missing_from(args, (e.offering for e in entries)),
        lambda: [views.unavailable_json(e) for e in entries],
        lambda: views.unavailable_offerings(entries),
    )


def _offering(entry: UnavailableEntry) -> str:
    return entry.offering
