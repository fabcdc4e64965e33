"""What EC2 said dry in a fleet's answer, told to the shared ICE cache and the reservation
snapshots (`send.absorb`): a reservation this attempt's own instances filled waits in its
`OwnFills` for the end of the serve (`settle._remember_own_fills`), unless rolled back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from capacity_launcher.domain.capacity.fleet import Blamed, FleetResult, InstanceLanding
from capacity_launcher.service.launch.progress import Context, OwnFills


def remember_dry(
    ctx: Context,
    blamed: Blamed,
    result: FleetResult,
    landings: Sequence[InstanceLanding],
    own_fills: OwnFills | None,
) -> None:
    """Dry offerings go to the shared ICE cache; dry reservations are marked exhausted. A
    reservation this attempt's own instances landed in waits in `own_fills` for the end."""
    if own_fills is not None:
        blamed = _hold_own_fills(blamed, result, landings, own_fills)
    if blamed.dry or blamed.spot_unavailable:
        ctx.ports.unavailable.mark(blamed.unavailable_marks(result.errors))
        ctx.ports.reservations.mark_exhausted(
            [o.reservation_id for o in blamed.dry if o.reservation_id]
        )


def _hold_own_fills(
    blamed: Blamed, result: FleetResult, landings: Sequence[InstanceLanding], own_fills: OwnFills
) -> Blamed:
    """What is left to mark now, once the reservations these instances filled are held back."""
    filled = {x.capacity_reservation_id for x in landings if x.capacity_reservation_id}
    held = [o for o in blamed.dry if o.reservation_id in filled]
    if not held:
        return blamed
    marks = replace(blamed, dry=held, spot_unavailable=None).unavailable_marks(result.errors)
    own_fills.marks.update(
        (o.reservation_id, mark) for o, mark in zip(held, marks, strict=True) if o.reservation_id
    )
    return replace(blamed, dry=[o for o in blamed.dry if o not in held])
