"""Placing instances into reservations and pools, as the EC2 User Guide describes.

"Launch instances into an existing Capacity Reservation": an instance runs in a reservation
only when type, platform, zone and tenancy match, the reservation is `active`, and it has
available capacity. `open` uses any matching `open` reservation and falls back to On-Demand;
`none` never uses one; a targeted id uses that reservation or fails; a group target uses any
matching member and falls back to On-Demand; `capacity-reservations-only` fails instead of
falling back. "Work with Capacity Reservation groups": `targeted` reservations serve only
launches that target them (by id or through their group).

Cluster placement groups ("Use Capacity Reservations with cluster placement groups",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html): a reservation created in one
serves only instances launched in that placement group. "Using Capacity Reservation in cluster
placement groups with a Capacity Reservation group"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-cpg-odcr-crg.html): a group target
with a placement group uses the group's members in that placement group; a group target alone
uses the members outside any placement group first, then those in any placement group (the
instance is then placed in the reservation's group).

Capacity Blocks ("Launch instances using Capacity Blocks",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html): a launch must
name the block's own reservation id, so a group target with the capacity-block market is refused.
An EC2 Fleet aimed at a block that has not started gets insufficient capacity
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-launch-instances-capacity-blocks-walkthrough.html).
"""

from collections import Counter
from dataclasses import dataclass, field

from moto.ec2.exceptions import EC2ClientError

from moto_capacity.ec2.exceptions import (
    CapacityReservationNotFound,
    InsufficientInstanceCapacity,
    InvalidParameterValue,
    ReservationCapacityExceeded,
)
from moto_capacity.resourcegroups import models as groups

from .backend import CAPACITY_LOCK, OFFERING_POOLS, CapacityReservationBackend, Slot
from .launches import InstanceAttributes, ReservationPreference
from .offerings import Offering
from .reservations import (
    CAPACITY_BLOCK_MARKET,
    INTERRUPTIBLE_MARKET,
    ON_DEMAND_MARKET,
    CapacityReservation,
)

SPOT_MARKET = "spot"
MARKETS = (ON_DEMAND_MARKET, SPOT_MARKET, CAPACITY_BLOCK_MARKET, INTERRUPTIBLE_MARKET)
# Markets served only by reservations of their kind, never by On-Demand or Spot capacity.
RESERVED_MARKETS = (CAPACITY_BLOCK_MARKET, INTERRUPTIBLE_MARKET)


def wrong_market(reservation: CapacityReservation, market: str) -> InvalidParameterValue:
    """Launching into a block or an interruptible reservation needs its own market type, and
    those market types serve nothing else (EC2 answers InvalidParameterValue)."""
    return InvalidParameterValue(
        f"The market type {market} is not valid for Capacity Reservation {reservation.id}, "
        f"which needs InstanceMarketOptions.MarketType {reservation.market}."
    )


def block_needs_its_id(group_arn: str) -> InvalidParameterValue:
    """A Capacity Block is launched into by its own reservation id, never through a group."""
    return InvalidParameterValue(
        f"The capacity-block market type needs the Capacity Block's own Capacity Reservation "
        f"id; a Capacity Reservation group ({group_arn}) cannot be targeted."
    )


def refused_target(market: str, preference: ReservationPreference) -> EC2ClientError | None:
    """What EC2 refuses before placing anything: an unknown market type, a reserved market
    without a target, a Capacity Block through a group."""
    if market not in MARKETS:
        return InvalidParameterValue(
            f"Value ({market}) for parameter InstanceMarketOptions.MarketType is invalid."
        )
    if market in RESERVED_MARKETS and not (preference.reservation_id or preference.group_arn):
        return InvalidParameterValue(
            f"The market type {market} needs a CapacityReservationTarget naming a "
            "Capacity Reservation of that kind, or a group of them."
        )
    if market == CAPACITY_BLOCK_MARKET and preference.group_arn:
        return block_needs_its_id(preference.group_arn)
    return None


@dataclass
class Placement:
    """Slots found for a launch, and why it got fewer than asked for (None when it got all)."""

    slots: list[Slot] = field(default_factory=list)
    failure: EC2ClientError | None = None


class CapacityLedger:
    """Tentative takes from reservations and pools; `commit` applies them all at once.

    Use only while holding `CAPACITY_LOCK`, from planning through commit.
    """

    def __init__(self, backend: CapacityReservationBackend) -> None:
        self.backend = backend
        self._reservation_takes: Counter[str] = Counter()
        self._pool_takes: Counter[Offering] = Counter()

    def fork(self) -> "CapacityLedger":
        """A copy to try a plan on without touching this one."""
        copy = CapacityLedger(self.backend)
        copy._reservation_takes = Counter(self._reservation_takes)
        copy._pool_takes = Counter(self._pool_takes)
        return copy

    def commit(self) -> None:
        assert CAPACITY_LOCK._is_owned()  # type: ignore[attr-defined]
        for reservation_id, count in self._reservation_takes.items():
            self.backend.reservations[reservation_id].used += count
        for offering, count in self._pool_takes.items():
            OFFERING_POOLS.take(offering, count)
        self._reservation_takes.clear()
        self._pool_takes.clear()

    def place(
        self,
        attributes: InstanceAttributes,
        preference: ReservationPreference,
        count: int,
        market: str = ON_DEMAND_MARKET,
        reservations_only: bool = False,
        fleet: bool = False,
    ) -> Placement:
        """Find up to `count` slots for instances of this market type (`on-demand`, `spot`,
        `capacity-block`, `interruptible-capacity-reservation`); `reservations_only` never
        touches a pool (a first pass); `fleet` for an EC2 Fleet's launch (a block that has not
        started answers insufficient capacity there)."""
        self.backend.expire_due_reservations()
        placement = Placement()
        placement.failure = refused_target(market, preference)
        if placement.failure is not None:
            return placement
        if market == SPOT_MARKET:
            if reservations_only:
                return placement
            return self._from_pool(placement, attributes, count, market)
        reserved_market = market in RESERVED_MARKETS
        if preference.reservation_id:
            return self._from_target(
                placement, attributes, preference.reservation_id, count, market, fleet=fleet
            )
        any_group = False
        if preference.avoids_reservations:
            reservations: list[CapacityReservation] = []
        elif preference.group_arn:
            found = self._group_reservations(preference.group_arn)
            if isinstance(found, EC2ClientError):
                placement.failure = found
                return placement
            reservations = _by_placement_group(found, attributes.placement_group)
            any_group = attributes.placement_group is None
        else:
            reservations = [
                r for r in self.backend.reservations.values() if r.instance_match_criteria == "open"
            ]
        matching = [
            r
            for r in reservations
            if r.market == market
            and r.is_active
            and r.mismatch(attributes, any_group=any_group) is None
        ]
        self._take_reservations(placement, matching, count)
        missing = count - len(placement.slots)
        if missing and (preference.reservations_only or reserved_market):
            target = preference.group_arn or "open Capacity Reservations"
            placement.failure = ReservationCapacityExceeded(target)
            return placement
        if missing and not reservations_only:
            self._from_pool(placement, attributes, missing, market)
        return placement

    def _from_target(
        self,
        placement: Placement,
        attributes: InstanceAttributes,
        reservation_id: str,
        count: int,
        market: str,
        *,
        fleet: bool = False,
    ) -> Placement:
        reservation = self.backend.reservations.get(reservation_id)
        if reservation is None:
            placement.failure = CapacityReservationNotFound(reservation_id)
            return placement
        if reservation.market != market:
            placement.failure = wrong_market(reservation, market)
            return placement
        if not reservation.is_active and fleet and market == CAPACITY_BLOCK_MARKET:
            placement.failure = InsufficientInstanceCapacity(
                attributes.instance_type, attributes.availability_zone
            )
            return placement
        if not reservation.is_active:
            placement.failure = InvalidParameterValue(
                f"Capacity Reservation {reservation_id} is {reservation.state}, not active."
            )
            return placement
        mismatch = reservation.mismatch(attributes)
        if mismatch:
            placement.failure = InvalidParameterValue(mismatch)
            return placement
        self._take_reservations(placement, [reservation], count)
        if len(placement.slots) < count:
            placement.failure = ReservationCapacityExceeded(reservation_id)
        return placement

    def _group_reservations(self, group_arn: str) -> list[CapacityReservation] | EC2ClientError:
        group = groups.find_group(self.backend.account_id, self.backend.region, group_arn)
        if group is None or not groups.is_capacity_reservation_pool(group):
            return InvalidParameterValue(
                f"The Capacity Reservation group {group_arn} does not exist or is not a "
                f"{groups.POOL_CONFIGURATION} group."
            )
        ids = groups.reservation_ids_in(group)
        return [self.backend.reservations[rid] for rid in ids if rid in self.backend.reservations]

    def _take_reservations(
        self, placement: Placement, reservations: list[CapacityReservation], count: int
    ) -> None:
        for reservation in reservations:
            free = reservation.available_instance_count - self._reservation_takes[reservation.id]
            take = min(free, count - len(placement.slots))
            if take <= 0:
                continue
            self._reservation_takes[reservation.id] += take
            placement.slots.extend(Slot(reservation_id=reservation.id) for _ in range(take))

    def _from_pool(
        self,
        placement: Placement,
        attributes: InstanceAttributes,
        count: int,
        market: str,
    ) -> Placement:
        offering = Offering(
            self.backend.region,
            attributes.instance_type,
            attributes.availability_zone,
            "spot" if market == SPOT_MARKET else "on-demand",
        )
        free = OFFERING_POOLS.free(offering)
        if free is None:
            placement.slots.extend(Slot() for _ in range(count))
            return placement
        take = max(0, min(count, free - self._pool_takes[offering]))
        self._pool_takes[offering] += take
        placement.slots.extend(Slot(pool=offering) for _ in range(take))
        if take < count:
            placement.failure = InsufficientInstanceCapacity(
                attributes.instance_type, attributes.availability_zone
            )
        return placement


def _by_placement_group(
    members: list[CapacityReservation], placement_group: str | None
) -> list[CapacityReservation]:
    """A group's members a launch may use, in the order it uses them: those in its placement
    group when it names one; else those outside any placement group first, then the others."""
    if placement_group is not None:
        return [r for r in members if r.placement_group == placement_group]
    return sorted(members, key=lambda r: r.placement_group is not None)


def place_restarted_instance(backend: CapacityReservationBackend, instance: object) -> None:
    """A stopped instance that starts again is placed anew, by the preference it launched with."""
    instance_id = getattr(instance, "id", "")
    with CAPACITY_LOCK:
        capacity = backend.instances.get(instance_id)
        if capacity is None or capacity.slot is not None:
            return
        ledger = CapacityLedger(backend)
        placed = ledger.place(
            capacity.attributes,
            capacity.preference,
            1,
            capacity.capacity_type,
        )
        if not placed.slots:
            assert placed.failure is not None
            raise placed.failure
        ledger.commit()
        capacity.slot = placed.slots[0]
        backend.attach(instance, capacity.slot, capacity)
