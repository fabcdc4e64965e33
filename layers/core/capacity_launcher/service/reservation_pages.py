"""The pages of snapshots a launcher reads of a selection (service/reservations.py): the first
page the coverage kept names, read with the coverage on that guess (`EarlyRead`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from capacity_launcher.domain.capacity.reservation_state import (
    Coverage,
    ReservationScope,
    StoredReservation,
    most_room_first,
)

# A request's launch reads this many snapshots first, the most room the sync saw first, then
# twice as many more each time those read have too little room for it (`most_room_first`).
FIRST_PAGE = 4
# At most this many keys a call (BatchGetItem's limit): a guess that would need more is not read.
ONE_CALL = 100


@dataclass(frozen=True)
class EarlyRead:
    """Snapshots read with the coverage, on the guess of the coverage kept
    (`COVERAGE_KEPT_SECONDS`): used only for a read of exactly these ids."""

    ids: frozenset[str] = frozenset()
    stored: Mapping[str, StoredReservation] = field(default_factory=dict)
    invalid: frozenset[str] = frozenset()

    def read(self, ids: Collection[str]) -> tuple[dict[str, StoredReservation], set[str]] | None:
        if not self.ids or set(ids) != self.ids:
            return None
        return dict(self.stored), set(self.invalid)


def first_page(
    coverage: Mapping[str, Coverage],
    scope: ReservationScope,
    named: frozenset[str],
    paged: bool,
    landed: frozenset[str],
) -> list[str]:
    """The snapshots a request reads first by `coverage`: its first page (`_read_paged`), or
    every member in scope."""
    members = {m for c in coverage.values() for m in c.members_in(scope, named)}
    if paged:
        return most_room_first(members, coverage.values(), named, landed)[:FIRST_PAGE]
    return sorted(members)
