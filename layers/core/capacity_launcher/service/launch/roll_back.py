"""Instances a launch cannot keep, ended at once: those of a single-zone group in a zone that
cannot hold its minCount (`roll_back_zone`), and those a gang or a reclaimed lease leaves
uncounted (`terminate_landed`, called by the settle), their reservation slots free again at
once (`give_back_slots`)."""

from __future__ import annotations

from collections.abc import Sequence

from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.records.status import ErrorDetail
from capacity_launcher.service.launch.progress import ZONE_ROLLED_BACK, Context, Progress
from capacity_launcher.service.launch.send import complete_left


def terminate_landed(
    ctx: Context, landed: Sequence[InstanceLanding], holding: Sequence[InstanceLanding]
) -> None:
    """Terminate `landed`, and free the reservation slots of those `holding` theirs still."""
    ctx.ports.fleet.terminate([x.instance_id for x in landed], fresh=True)
    give_back_slots(ctx, holding)


def roll_back_zone(
    ctx: Context, active: Sequence[Progress], seen: list[InstanceLanding]
) -> list[InstanceLanding]:
    """Terminate what a single-zone group got in a zone that cannot hold its minCount."""
    ids = [i for item in active for i in item.instance_ids]
    landed = [x for x in seen if x.instance_id in ids]
    zone = landed[0].zone if landed else "its zone"
    complete_left(ctx, active)  # their intents are done before their instances are ended
    ctx.ports.fleet.terminate(ids, fresh=True)
    give_back_slots(ctx, landed)
    for item in active:
        if item.instance_ids:
            item.errors.append(
                ErrorDetail(
                    code=ZONE_ROLLED_BACK,
                    message=f"singleZone: {zone} held {len(ids)} of minCount="
                    f"{item.request.min_count}; terminated {', '.join(item.instance_ids)} "
                    "and tried another zone",
                )
            )
            item.instance_ids = []
    return [x for x in seen if x.instance_id not in ids]


def give_back_slots(ctx: Context, terminated: Sequence[InstanceLanding]) -> None:
    """Reservation slots of instances a failed gang terminated are free again at once."""
    freed: dict[str, int] = {}
    for landing in terminated:
        if landing.capacity_reservation_id:
            reservation = landing.capacity_reservation_id
            freed[reservation] = freed.get(reservation, 0) + 1
    for reservation_id, count in sorted(freed.items()):
        ctx.ports.reservations.give_back(reservation_id, count)
