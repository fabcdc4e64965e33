"""Which reservations the NodeClasses select, and what each selection covers: pure, from what
the reservation sync read of EC2 (service/reservation_sync.py writes it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.capacity.reservation_state import Coverage, StoredReservation
from capacity_launcher.domain.capacity.reservations import (
    ACTIVE,
    EXPIRED_STATE,
    ReservationSnapshot,
    selection_of,
    selector_key,
    term_matches,
)


def selected_by(
    node_classes: Sequence[NodeClass],
) -> tuple[set[str], set[str], dict[str, CapacityReservationSelectorTerm]]:
    """The reservation ids and group ARNs the NodeClasses target, and their selector terms."""
    ids: set[str] = set()
    group_arns: set[str] = set()
    terms: dict[str, CapacityReservationSelectorTerm] = {}
    for node_class in node_classes:
        selection = selection_of(node_class)
        target = selection.target
        if target is not None and target.reservation_id is not None:
            ids.add(target.reservation_id)
        elif target is not None and target.group_arn is not None:
            group_arns.add(target.group_arn)
        for term in selection.terms:
            terms[selector_key(term)] = term
    return ids, group_arns, terms


def term_coverage(
    terms: Mapping[str, CapacityReservationSelectorTerm],
    everything: Mapping[str, ReservationSnapshot],
    at: float,
) -> list[Coverage]:
    """Coverage of each selector term: the reservations it matches."""
    coverage = []
    for term_key, term in sorted(terms.items()):
        matched = tuple(sorted(k for k, r in everything.items() if term_matches(term, r)))
        coverage.append(Coverage(term_key, at, matched))
    return coverage


def with_placements(
    coverage: Sequence[Coverage], everything: Mapping[str, ReservationSnapshot]
) -> list[Coverage]:
    """Each coverage with the (instance type, zone) of its members and the room EC2 shows in
    each (0 in one not active): launchers read the snapshots with the most room first."""
    placements = {k: (r.instance_type, r.zone) for k, r in everything.items()}
    room = {k: r.available if r.state == ACTIVE else 0 for k, r in everything.items()}
    return [
        replace(
            c,
            placements={m: placements[m] for m in c.members},
            room={m: max(room[m], 0) for m in c.members},
        )
        for c in coverage
    ]


def keep_newly_expired(
    seen: dict[str, ReservationSnapshot],
    stored: Mapping[str, StoredReservation],
    everything: Mapping[str, ReservationSnapshot],
) -> None:
    """A selector term reaches only live reservations: one it reached that expired is kept once
    more, so its end is announced, and forgotten at the next sync."""
    for reservation_id, prev in stored.items():
        ended = everything.get(reservation_id)
        if (
            reservation_id not in seen
            and ended is not None
            and ended.state == EXPIRED_STATE
            and prev.snapshot.state != EXPIRED_STATE
        ):
            seen[reservation_id] = ended
