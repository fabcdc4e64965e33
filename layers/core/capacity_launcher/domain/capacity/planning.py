"""From a pool, a request and what EC2 offers to an ordered series of launch attempts.

Reserved capacity comes first (it is already paid for), then spot (the cheaper market of a type),
then on-demand when spot is dry (`Candidates.pooled_by_type`). Each attempt is
one CreateFleet: a reserved attempt addresses one reservation target (an id or a group, split by
the market its reservations need: ordinary, Capacity Block, interruptible), an
on-demand or spot attempt offers every remaining pool and lets EC2's allocation strategy pick by
price. What an attempt learns (launched instances, insufficient-capacity errors) narrows the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from capacity_launcher.domain.capacity.candidates import Candidates, flexibility_shortfall
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.offerings import (
    RESERVED,
    CapacityType,
    Offering,
)
from capacity_launcher.domain.capacity.reservations import (
    ReservedTarget,
)


@dataclass(frozen=True)
class LaunchAttempt:
    capacity_type: CapacityType
    offerings: tuple[Offering, ...]
    count: int
    target: ReservedTarget | None = None

    @property
    def zones(self) -> frozenset[str]:
        return frozenset(o.zone for o in self.offerings)


@dataclass(frozen=True)
class Landed:
    """Where one launched instance landed, as EC2 reports it."""

    instance_type: str
    zone: str


class LaunchPlan:
    """Hands out attempts one at a time and learns from each; bounded by `max_attempts`."""

    def __init__(
        self,
        candidates: Candidates,
        count: int,
        *,
        single_zone: bool = False,
        max_attempts: int = 4,
        requirements: Requirements | None = None,
        min_count: int | None = None,
        max_zones: int = 3,
    ) -> None:
        self._candidates = candidates
        self._requirements = requirements or Requirements()
        self._min_count = count if min_count is None else min(min_count, count)
        self._max_zones = max_zones
        self._landed_in_zone = 0
        # Why capacity types were passed over without asking EC2 (minValues not met).
        self.refusals: list[str] = []
        self._remaining = count
        self._single_zone = single_zone
        self._max_attempts = max_attempts
        self._attempts = 0
        self._done_sources: set[ReservedTarget] = set()
        self._dry: set[Offering] = set()
        self._exhausted_types: set[CapacityType] = set()
        self._zone: str | None = None
        self._zone_fixed = False
        self._failed_zones: set[str] = set()
        self._again: LaunchAttempt | None = None

    @property
    def remaining(self) -> int:
        return self._remaining

    def next_attempt(self) -> LaunchAttempt | None:
        if self._again is not None:
            again, self._again = self._again, None
            if self._remaining > 0:
                return replace(again, count=min(again.count, self._remaining))
        while self._remaining > 0 and self._attempts < self._max_attempts:
            zone = self._choose_zone()
            if self._single_zone and zone is None:
                return None
            attempt = self._reserved_attempt(zone) or self._pooled_attempt(zone)
            if attempt is not None:
                self._attempts += 1
                return attempt
            if not self._single_zone or self._zone_fixed:
                return None
            # Nothing left in this zone before anything launched: try the next zone.
            assert zone is not None
            self._failed_zones.add(zone)
            self._zone = None
        return None

    def record(
        self,
        attempt: LaunchAttempt,
        landed: Sequence[Landed],
        unavailable: Iterable[Offering],
    ) -> None:
        self._remaining -= len(landed)
        self._dry.update(unavailable)
        if attempt.target is not None:
            self._done_sources.add(attempt.target)
        elif not landed and not any(o in self._dry for o in attempt.offerings):
            # EC2 launched nothing and blamed no offering: asking again would learn nothing.
            self._exhausted_types.add(attempt.capacity_type)
        if self._single_zone and landed:
            self._zone = landed[0].zone
            self._zone_fixed = True
            self._landed_in_zone += len(landed)
        elif (
            self._single_zone
            and not self._zone_fixed
            and self._zone is not None
            and not self._usable_in_zone(self._zone)
        ):
            self._failed_zones.add(self._zone)
            self._zone = None

    @property
    def zone_short(self) -> bool:
        """A single-zone landing that its zone cannot complete to minCount, another zone may."""
        return (
            self._single_zone
            and self._zone_fixed
            and 0 < self._landed_in_zone < self._min_count
            and self._zone is not None
            and not self._usable_in_zone(self._zone)
            and len(self._failed_zones) + 1 < self._max_zones
            and self._attempts < self._max_attempts
        )

    def abandon_zone(self) -> None:
        """The caller rolled back what landed in the zone: plan the whole count elsewhere."""
        assert self._zone is not None
        self._failed_zones.add(self._zone)
        self._remaining += self._landed_in_zone
        self._landed_in_zone = 0
        self._zone = None
        self._zone_fixed = False

    def again(
        self, attempt: LaunchAttempt, landed: Sequence[Landed], unavailable: Iterable[Offering]
    ) -> None:
        """A transient error hit part of `attempt`: the next attempt asks for the rest of it again
        (outside `max_attempts`: the caller bounds these retries)."""
        self._remaining -= len(landed)
        self._dry.update(unavailable)
        if self._single_zone and landed:
            self._zone = landed[0].zone
            self._zone_fixed = True
            self._landed_in_zone += len(landed)
        offerings = tuple(
            o
            for o in attempt.offerings
            if o not in self._dry and (not self._zone_fixed or o.zone == self._zone)
        )
        if offerings:
            self._again = replace(
                attempt, offerings=offerings, count=max(attempt.count - len(landed), 1)
            )

    def _choose_zone(self) -> str | None:
        if not self._single_zone:
            return None
        if self._zone is not None:
            return self._zone
        ranked = self._ranked_zones()
        self._zone = ranked[0] if ranked else None
        return self._zone

    def _ranked_zones(self) -> list[str]:
        """Zones by what they can hold: the whole minCount first, then the most of the count,
        then the most reserved (already paid for) capacity."""
        reserved: dict[str, int] = {}
        pooled: set[str] = set()
        for source, offerings in self._candidates.reserved:
            if source.target in self._done_sources:
                continue
            available = {r.reservation_id: r.available for r in source.reservations}
            for o in offerings:
                if o not in self._dry:
                    reserved[o.zone] = reserved.get(o.zone, 0) + available.get(
                        o.reservation_id or "", 0
                    )
        for o in self._candidates.pooled():
            if o.capacity_type not in self._exhausted_types and o not in self._dry:
                pooled.add(o.zone)
        zones = (set(reserved) | pooled) - self._failed_zones

        def holds(zone: str) -> int:
            return self._remaining if zone in pooled else min(self._remaining, reserved[zone])

        return sorted(
            zones,
            key=lambda z: (holds(z) < self._min_count, -holds(z), -reserved.get(z, 0), z),
        )

    def _usable_in_zone(self, zone: str) -> bool:
        return any(o.zone == zone for o in self._open_offerings())

    def _open_offerings(self) -> list[Offering]:
        reserved = [
            o
            for source, offerings in self._candidates.reserved
            if source.target not in self._done_sources
            for o in offerings
        ]
        pooled = [
            o for o in self._candidates.pooled() if o.capacity_type not in self._exhausted_types
        ]
        return [o for o in [*reserved, *pooled] if o not in self._dry]

    def _reserved_attempt(self, zone: str | None) -> LaunchAttempt | None:
        for source, offerings in self._candidates.reserved:
            if source.target in self._done_sources:
                continue
            usable = [o for o in offerings if o not in self._dry and zone in (None, o.zone)]
            if not usable:
                continue
            available = {r.reservation_id: r.available for r in source.reservations}
            capacity = sum(available.get(o.reservation_id or "", 0) for o in usable)
            return LaunchAttempt(
                capacity_type=RESERVED,
                offerings=tuple(usable),
                count=min(self._remaining, capacity) if capacity > 0 else self._remaining,
                target=source.target,
            )
        return None

    def _pooled_attempt(self, zone: str | None) -> LaunchAttempt | None:
        for capacity_type, offerings in self._candidates.pooled_by_type():
            if capacity_type in self._exhausted_types:
                continue
            usable = [o for o in offerings if o not in self._dry and zone in (None, o.zone)]
            if not usable:
                continue
            short = flexibility_shortfall(
                self._requirements, usable, self._candidates.instance_types
            )
            if short:
                # Launching anyway would break the flexibility the pool asks for.
                self.refusals += [f"{capacity_type}: {s}" for s in short if s not in self.refusals]
                self._exhausted_types.add(capacity_type)
                continue
            return LaunchAttempt(capacity_type, tuple(usable), self._remaining)
        return None
