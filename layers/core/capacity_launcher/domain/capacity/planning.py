"""From a pool, a request and what EC2 offers to an ordered series of launch attempts.

Reserved capacity comes first (it is already paid for), then spot, then on-demand (by price, as
DESIGN step 3 orders them; spot is the cheaper market of a type). Each attempt is
one CreateFleet: a reserved attempt addresses one reservation target (an id or a group, split by
the market its reservations need: ordinary, Capacity Block, interruptible), an
on-demand or spot attempt offers every remaining pool and lets EC2's allocation strategy pick by
price. What an attempt learns (launched instances, insufficient-capacity errors) narrows the next.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from capacity_launcher.domain.accounting.pool_usage import largest
from capacity_launcher.domain.capacity.image_architectures import (
    ImageArchitecture,
    ImageArchitectures,
)
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import (
    ON_DEMAND,
    RESERVED,
    SPOT,
    CapacityType,
    Offering,
)
from capacity_launcher.domain.capacity.platforms import (
    LINUX,
    PLATFORM_MISMATCH,
    PlatformMismatch,
    platform_mismatches,
)
from capacity_launcher.domain.capacity.requirements import (
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    Requirements,
)
from capacity_launcher.domain.capacity.reservations import (
    BLOCK_ENDING_REASON,
    ReservationSnapshot,
    ReservationSource,
    ReservedTarget,
    by_market,
)
from capacity_launcher.domain.quantities import Resources

# EC2 matches platform (the image's, see find_candidates) and tenancy: we launch shared.
LAUNCHABLE_TENANCY = "default"


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
class Skipped:
    """An offering left out before launching, and why (a cached error, an exhausted reservation)."""

    offering: Offering
    reason: str


@dataclass
class Candidates:
    """Every offering the request may use, in launch order, before anything is known to be dry."""

    reserved: list[tuple[ReservationSource, list[Offering]]]
    on_demand: list[Offering]
    spot: list[Offering]
    instance_types: Mapping[str, InstanceTypeInfo]
    skipped: list[Skipped] = field(default_factory=list)
    platform_mismatches: list[PlatformMismatch] = field(default_factory=list)
    # Reservations the request could use once active (scheduled, future-dated, being paid for).
    scheduled: list[ReservationSnapshot] = field(default_factory=list)
    # Types the requirements admit but the image cannot run (another architecture).
    cannot_run_image: list[InstanceTypeInfo] = field(default_factory=list)

    def all(self) -> list[Offering]:
        reserved = [o for _, offerings in self.reserved for o in offerings]
        return [*reserved, *self.pooled()]

    def pooled(self) -> list[Offering]:
        """Spot and on-demand offerings in launch order: by price, so spot first (EC2 prices a
        type's spot capacity below its on-demand price; Karpenter also prefers spot when a
        pool allows both), on-demand when spot is dry."""
        return [*self.spot, *self.on_demand]

    def pooled_by_type(self) -> list[tuple[CapacityType, list[Offering]]]:
        return [(SPOT, self.spot), (ON_DEMAND, self.on_demand)]

    def __bool__(self) -> bool:
        return bool(self.all())

    def reserved_available(self) -> int:
        """Instances the reserved offerings have room for now, by their snapshots."""
        return sum(_available(source, offerings) for source, offerings in self.reserved)

    def largest(self) -> Resources:
        """The most any one candidate instance can use, per dimension (limits are sized by it)."""
        return largest(self.sizes().values())

    def sizes(self) -> dict[str, Resources]:
        """What one instance of each candidate type uses (a lease fits them into the room left)."""
        return {
            o.instance_type: self.instance_types[o.instance_type].resources() for o in self.all()
        }

    def only(self, types: Collection[str]) -> Candidates:
        """Without the offerings of any type but `types` (those a lease covers)."""

        def kept(offerings: Iterable[Offering]) -> list[Offering]:
            return [o for o in offerings if o.instance_type in types]

        reserved = [(source, kept(offerings)) for source, offerings in self.reserved]
        return replace(
            self,
            reserved=[(source, offerings) for source, offerings in reserved if offerings],
            on_demand=kept(self.on_demand),
            spot=kept(self.spot),
        )

    def drop(self, unavailable: Mapping[str, str]) -> Candidates:
        """Without the offerings whose key is in `unavailable` (key → reason), remembering why.
        A key that is a capacity type alone (`spot`) stands for every offering of that type."""
        skipped = list(self.skipped)

        def keep(offerings: Iterable[Offering]) -> list[Offering]:
            kept = []
            for offering in offerings:
                reason = unavailable.get(offering.key) or unavailable.get(offering.capacity_type)
                if reason is None:
                    kept.append(offering)
                else:
                    skipped.append(Skipped(offering, reason))
            return kept

        reserved = [(source, keep(offerings)) for source, offerings in self.reserved]
        return Candidates(
            reserved=[(s, o) for s, o in reserved if o],
            on_demand=keep(self.on_demand),
            spot=keep(self.spot),
            instance_types=self.instance_types,
            skipped=skipped,
            platform_mismatches=self.platform_mismatches,
            scheduled=self.scheduled,
            cannot_run_image=self.cannot_run_image,
        )


def find_candidates(
    requirements: Requirements,
    instance_types: Sequence[InstanceTypeInfo],
    zones: Collection[str],
    capacity_types: Sequence[CapacityType],
    reservation_sources: Sequence[ReservationSource],
    *,
    image_platform: str = LINUX,
    named_reservations: Collection[str] = (),
    image_architecture: ImageArchitecture | ImageArchitectures | None = None,
    now: datetime | None = None,
) -> Candidates:
    """Every (capacity type, instance type, zone) the requirements admit in the given zones.

    Reservations of another platform than the image's are left out; those the NodeClass names
    by id are also skipped with PLATFORM_MISMATCH and reported in `platform_mismatches`. Types
    that can run none of the NodeClass's images are left out as a `kubernetes.io/arch` requirement
    would leave them; those the requirements admit are listed in `cannot_run_image`. A Capacity
    Block too close to its end at `now` is skipped (BLOCK_ENDING_REASON), and never waited for."""
    cannot_run: list[InstanceTypeInfo] = []
    if image_architecture is not None:
        cannot_run = [i for i in instance_types if not image_architecture.runs_on(i)]
        instance_types = [i for i in instance_types if image_architecture.runs_on(i)]
    by_name = {info.name: info for info in instance_types}
    skipped: list[Skipped] = []
    scheduled: dict[str, ReservationSnapshot] = {}
    reserved: list[tuple[ReservationSource, list[Offering]]] = []
    if RESERVED in capacity_types:
        reserved = _reserved_by_availability(
            reservation_sources,
            by_name,
            requirements,
            zones,
            image_platform,
            named_reservations,
            skipped,
            scheduled,
            now,
        )

    def pools(capacity_type: CapacityType) -> list[Offering]:
        if capacity_type not in capacity_types:
            return []
        return _pool(capacity_type, instance_types, zones, requirements)

    return Candidates(
        reserved=reserved,
        on_demand=pools(ON_DEMAND),
        spot=pools(SPOT),
        instance_types=by_name,
        skipped=skipped,
        platform_mismatches=platform_mismatches(
            (r for source in reservation_sources for r in source.reservations),
            image_platform,
            named_reservations,
        ),
        scheduled=[scheduled[k] for k in sorted(scheduled)],
        cannot_run_image=[i for i in cannot_run if i.matches(requirements)],
    )


def _pool(
    capacity_type: CapacityType,
    instance_types: Sequence[InstanceTypeInfo],
    zones: Collection[str],
    requirements: Requirements,
) -> list[Offering]:
    """Every (instance type, zone) offering of `capacity_type` the requirements admit."""
    return [
        Offering(capacity_type, info.name, zone)
        for info in instance_types
        for zone in sorted(info.zones & frozenset(zones))
        if info.matches(requirements, zone, capacity_type)
    ]


def _reserved_by_availability(
    reservation_sources: Sequence[ReservationSource],
    by_name: Mapping[str, InstanceTypeInfo],
    requirements: Requirements,
    zones: Collection[str],
    image_platform: str,
    named_reservations: Collection[str],
    skipped: list[Skipped],
    scheduled: dict[str, ReservationSnapshot],
    now: datetime | None = None,
) -> list[tuple[ReservationSource, list[Offering]]]:
    """Each source (split by market) with its usable offerings, the most available first.

    Records the named reservations of another platform and the unusable ones in `skipped`, and
    the upcoming ones that fit in `scheduled`."""
    reserved: list[tuple[ReservationSource, list[Offering]]] = []
    for source in (split for s in reservation_sources for split in by_market(s)):
        offerings = []
        ranked = sorted(source.reservations, key=lambda r: (-r.available, r.reservation_id))
        for reservation in ranked:
            info = by_name.get(reservation.instance_type)
            if reservation.platform != image_platform:
                if reservation.reservation_id in named_reservations:
                    skipped.append(Skipped(reservation.offering(), PLATFORM_MISMATCH))
                continue
            if not _reservation_fits(reservation, info, requirements, zones):
                continue
            if now is not None and reservation.ending(now):
                # EC2 would terminate what we launch before it is of use (and so for a wait).
                skipped.append(Skipped(reservation.offering(), BLOCK_ENDING_REASON))
                continue
            if reservation.upcoming:
                scheduled.setdefault(reservation.reservation_id, reservation)
            if not reservation.usable:
                reason = "Exhausted" if reservation.exhausted else _unusable_reason(reservation)
                skipped.append(Skipped(reservation.offering(), reason))
                continue
            offerings.append(reservation.offering())
        if offerings:
            reserved.append((source, offerings))
    # Karpenter's rule: the most available first. It spreads load and keeps whole
    # reservations for gangs; equal ones keep the NodeClass's order.
    reserved.sort(key=lambda entry: -_available(entry[0], entry[1]))
    return reserved


def flexibility_shortfall(
    requirements: Requirements,
    offerings: Iterable[Offering],
    instance_types: Mapping[str, InstanceTypeInfo],
) -> list[str]:
    """Why `offerings` cannot meet the requirements' minValues, one sentence per key short."""
    offerings = list(offerings)
    short = []
    for key, wanted in requirements.min_values().items():
        values = {
            info.labels(o.zone, o.capacity_type, o.reservation_id).get(key)
            for o in offerings
            if (info := instance_types.get(o.instance_type)) is not None
        } - {None}
        if len(values) < wanted:
            short.append(
                f"requirements[{key}]: minValues={wanted} but the offerings left have "
                f"{len(values)} distinct value{'' if len(values) == 1 else 's'}"
                + (f" ({', '.join(sorted(v for v in values if v))})" if values else "")
            )
    return short


def _reservation_fits(
    reservation: ReservationSnapshot,
    info: InstanceTypeInfo | None,
    requirements: Requirements,
    zones: Collection[str],
) -> bool:
    return (
        info is not None
        and reservation.zone in zones
        and reservation.tenancy == LAUNCHABLE_TENANCY
        and info.matches(
            requirements,
            reservation.zone,
            RESERVED,
            reservation.reservation_id,
            reservation.reservation_type,
            reservation.interruptible,
        )
        and (not reservation.interruptible or accepts_interruptible(requirements))
    )


def accepts_interruptible(requirements: Requirements) -> bool:
    """Capacity its owner may reclaim is opt-in: the requirements name the key and admit true."""
    return CAPACITY_RESERVATION_INTERRUPTIBLE in requirements and requirements.allows(
        CAPACITY_RESERVATION_INTERRUPTIBLE, "true"
    )


def _available(source: ReservationSource, offerings: Iterable[Offering]) -> int:
    available = {r.reservation_id: r.available for r in source.reservations}
    return sum(available.get(o.reservation_id or "", 0) for o in offerings)


def _unusable_reason(reservation: ReservationSnapshot) -> str:
    if reservation.state != "active":
        return f"ReservationNotActive:{reservation.state}"
    return "ReservationCapacityExceeded"


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

    @property
    def attempts(self) -> int:
        return self._attempts

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
