"""What a request could launch, before anything is known to be dry: every (capacity type,
instance type, zone) offering the requirements admit, reservations the most available first and
split by market (`find_candidates`), with what was left out and why; and whether offerings meet
the requirements' minValues (`flexibility_shortfall`). Attempts made of them:
domain/capacity/planning.py."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from capacity_launcher.domain.accounting.pool_usage import largest
from capacity_launcher.domain.capacity.constraints import Requirements
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
from capacity_launcher.domain.capacity.requirements import CAPACITY_RESERVATION_INTERRUPTIBLE
from capacity_launcher.domain.capacity.reservations import (
    BLOCK_ENDING_REASON,
    ReservationSnapshot,
    ReservationSource,
    by_market,
)
from capacity_launcher.domain.quantities import Resources

# EC2 matches platform (the image's, see find_candidates) and tenancy: we launch shared.
LAUNCHABLE_TENANCY = "default"


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
