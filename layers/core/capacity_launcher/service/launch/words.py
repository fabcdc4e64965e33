"""What the launch phases write down: a record's instances and unavailable offerings, instance
records, and the messages a request's record says why with. Pure: no port is called here."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.apis.quotas import format_amount
from capacity_launcher.domain.capacity.candidates import Candidates
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.fleet import InstanceLanding
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import RESERVED, SPOT, Offering
from capacity_launcher.domain.capacity.request_block_ends import opt_in
from capacity_launcher.domain.capacity.requirements import CAPACITY_TYPE, INSTANCE_TYPE
from capacity_launcher.domain.capacity.reservation_state import ReservationScope
from capacity_launcher.domain.capacity.reservations import (
    ReservationSnapshot,
    ReservationSource,
    selection_of,
)
from capacity_launcher.domain.errors import InvalidLaunchRequest, UnknownRequirementValues
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.detail_limits import MAX_LEFT_OUT_NAMED
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.status import (
    ErrorDetail,
    LaunchedInstance,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
)
from capacity_launcher.domain.records.tags import own_tags
from capacity_launcher.service.launch.progress import LEASE_HOLDS_NO_CANDIDATE
from capacity_launcher.service.resolution import Prepared

# A request leased room for fewer than it asked for (at least its minCount): the pool's limits,
# or its requester's quota, held the rest back (its record says which, with the numbers).
LIMIT_REACHED = "LimitReached"
QUOTA_REACHED = "QuotaReached"


def reservations_by_id(sources: Sequence[ReservationSource]) -> dict[str, ReservationSnapshot]:
    return {r.reservation_id: r for source in sources for r in source.reservations}


def launched(
    landing: InstanceLanding, reservations: Mapping[str, ReservationSnapshot]
) -> LaunchedInstance:
    """An instance as the record shows it, with the type and dates of the reservation it landed
    in when that reservation is one the NodeClass selects (an open ODCR EC2 matched on its own
    is named by id only)."""
    reservation = reservations.get(landing.capacity_reservation_id or "")
    return LaunchedInstance(
        instance_id=landing.instance_id,
        instance_type=landing.instance_type,
        zone=landing.zone,
        capacity_type=landing.capacity_type,
        capacity_reservation_id=landing.capacity_reservation_id,
        capacity_reservation_type=reservation.reservation_type if reservation else None,
        capacity_reservation_start_date=reservation.start_date if reservation else None,
        capacity_reservation_end_date=reservation.end_date if reservation else None,
    )


def counted(info: InstanceTypeInfo | None) -> Resources:
    """What one launched instance counts against its pool (an unknown type still counts as one)."""
    return info.resources() if info is not None else Resources(instances=1)


def in_target(landing: InstanceLanding, reservation_id: str) -> InstanceLanding:
    """A reserved attempt is `capacity-reservations-only` with one target: an instance EC2 has
    not described yet (only the CreateFleet answer is known) can only be in that reservation."""
    if landing.capacity_reservation_id is not None or landing.capacity_type == SPOT:
        return landing
    return replace(landing, capacity_type=RESERVED, capacity_reservation_id=reservation_id)


def reserved_somewhere(landing: InstanceLanding) -> InstanceLanding:
    """A reserved attempt's instance (`capacity-reservations-only`: a group's, whose member EC2
    chose) that EC2 describes in no reservation: it ended since, or its member did, and EC2 no
    longer names one. It was launched reserved; which member is not known."""
    if landing.capacity_reservation_id is not None or landing.capacity_type == SPOT:
        return landing
    return replace(landing, capacity_type=RESERVED)


def as_launched(
    landing: InstanceLanding, targets: Mapping[str, str | None], reserved: Collection[str] = ()
) -> InstanceLanding:
    """A replayed reserved intent's instance as it was launched: in the intent's reservation,
    though that reservation may have ended since (EC2 then reports it On-Demand, unnamed); one
    of `reserved` (a reserved intent's into a group: no single reservation) reserved, though
    EC2 may name no member for it now (`reserved_somewhere`)."""
    target = targets.get(landing.instance_id)
    if target:
        return in_target(landing, target)
    return reserved_somewhere(landing) if landing.instance_id in reserved else landing


def all_unavailable(usable: Candidates) -> str:
    reasons = sorted({s.reason for s in usable.skipped})
    return f"every offering is unavailable now ({', '.join(reasons)})"


def scope(requirements: Requirements, subnets: Mapping[str, Sequence[str]]) -> ReservationScope:
    """The reservations a request could launch into: its subnets' zones, its pinned types."""
    pinned = pinned_instance_types(requirements)
    return ReservationScope(frozenset(subnets), frozenset(pinned) if pinned is not None else None)


def pinned_instance_types(requirements: Requirements) -> list[str] | None:
    values = [
        r for r in requirements.to_list() if r.key == INSTANCE_TYPE and str(r.operator) == "In"
    ]
    if not values:
        return None
    return sorted({v for r in values for v in r.values})


def from_invalid_body(record: RequestRecord) -> bool:
    return record.status is RequestStatus.REJECTED and all(
        e.code == InvalidLaunchRequest.code for e in record.errors
    )


def missing_reservations(lead: Prepared, sources: Sequence[ReservationSource]) -> list[ErrorDetail]:
    """Reservation ids the NodeClass names that EC2 does not have active: said in the record."""
    return [
        ErrorDetail(
            code="CapacityReservationNotFound",
            message=f"{field}: NodeClass {lead.node_class.metadata.name}: capacity reservation "
            f"{reservation_id} does not exist or is not active; it was not used",
        )
        for field, reservation_id in selection_of(lead.node_class).missing(sources)
    ]


def unknown_values(lead: Prepared, unknown: UnknownRequirementValues) -> str:
    """Which document names the unknown values (the request's requirements, else its pool's)."""
    mine = {v for r in lead.request.requirements if r.key == unknown.key for v in r.values} & set(
        unknown.values
    )
    where = "requirements" if mine else f"NodePool {lead.pool.metadata.name} spec.requirements"
    names = ", ".join(unknown.values)
    return (
        f"{where}: {unknown.key}: {names}: does not exist in EC2 ({unknown.code}); "
        "values must name existing instance types"
    )


def lease_holds_no_candidate(pool: str, launched: int, candidates: Candidates) -> ErrorDetail:
    """Why a replay launched less than its lease held room for: that lease, taken by an earlier
    delivery, holds room for none of the types the pool allows now (its NodePool or NodeClass
    was applied since), and a request replaying intents takes no other lease."""
    types = sorted(candidates.sizes())
    named = ", ".join(types[:MAX_LEFT_OUT_NAMED])
    more = f" and {len(types) - MAX_LEFT_OUT_NAMED} more" if len(types) > MAX_LEFT_OUT_NAMED else ""
    return ErrorDetail(
        code=LEASE_HOLDS_NO_CANDIDATE,
        message=f"node pool {pool}: the lease an earlier delivery of this request took was sized "
        "for the instance types the pool allowed then and holds room for none of those it "
        f"allows now ({named}{more}): its NodePool or NodeClass was applied since; the request "
        f"keeps the {launched} instance(s) that delivery launched and launches no more",
    )


def short_lease(
    pool: str,
    limits: PoolLimits | None,
    others: Resources,
    lease: Lease,
    asked: int,
    quota: str | None,
) -> ErrorDetail:
    """Why a request was leased room for fewer instances than it asked for (at least its
    minCount), so the rest were never launched: the pool's limit that binds, with its numbers
    (`others`: what the pool's other instances and leases use), or else its requester's quota."""
    count = lease.count
    each = Resources.from_amounts({d: a / count for d, a in lease.amount.amounts().items()})
    tightest = None if limits is None else limits.tightest(others, each)
    if tightest is not None and tightest[1] < asked:
        dimension = tightest[0]
        bound = limits.limit_for(dimension) if limits is not None else None
        assert bound is not None
        return ErrorDetail(
            code=LIMIT_REACHED,
            message=f"node pool {pool} limits leave room for {count} of the {asked} instances "
            f"asked for: {dimension} limit {format_amount(dimension, bound)}, "
            f"{format_amount(dimension, others.amount(dimension))} used by its other instances "
            f"and leases, {format_amount(dimension, each.amount(dimension))} each; "
            f"the other {asked - count} were not launched",
        )
    return ErrorDetail(
        code=QUOTA_REACHED,
        message=f"CapacityQuota {quota or '(none)'} admits {count} of the {asked} instances "
        f"asked for in node pool {pool} now (the pool's limits would hold more); "
        f"the other {asked - count} were not launched",
    )


def full_lease(
    pool: str,
    limits: PoolLimits | None,
    used: Resources,
    sizes: Mapping[str, Resources],
    least: int,
) -> ErrorDetail:
    """Why a request was leased no room: the pool's limits hold fewer than its minCount even of
    the candidate type they admit the most of, with the limit that binds it and its numbers
    (`used`: what the pool's instances and leases use now). Said without numbers when they do not
    show it (no limit binds, or the room came back since the lease was refused)."""
    said = f"node pool {pool} limits leave room for fewer than minCount={least} instances now"
    rooms = {
        name: None if limits is None else limits.tightest(used, each)
        for name, each in sizes.items()
    }
    if limits is None or not rooms or any(room is None for room in rooms.values()):
        return ErrorDetail(code="LimitExceeded", message=said)
    fits = {name: room for name, room in rooms.items() if room is not None}
    name = max(sorted(fits), key=lambda n: fits[n][1])
    dimension, room = fits[name]
    bound = limits.limit_for(dimension)
    if room >= least or bound is None:
        return ErrorDetail(code="LimitExceeded", message=said)
    each = sizes[name].amount(dimension)
    return ErrorDetail(
        code="LimitExceeded",
        message=f"{said}: {dimension} limit {format_amount(dimension, bound)}, "
        f"{format_amount(dimension, used.amount(dimension))} used by its instances and leases, "
        f"{format_amount(dimension, each)} for one {name} (the candidate type it holds the "
        f"most of): room for {room}",
    )


def unavailable(offering: Offering, reason: str) -> UnavailableOffering:
    return UnavailableOffering(
        instance_type=offering.instance_type,
        zone=offering.zone,
        capacity_type=offering.capacity_type,
        capacity_reservation_id=offering.reservation_id,
        reason=reason,
    )


def no_offering(lead: Prepared, subnets: Mapping[str, Sequence[str]]) -> str:
    return (
        f"requirements: no instance type, zone and capacity type of node pool "
        f"{lead.pool.metadata.name} matches in the node class's zones {sorted(subnets)}"
    )


def capacity_types(lead: Prepared) -> list[str]:
    """The capacity types the pool allows, narrowed by the request."""
    return lead.requirements.allowed_values(CAPACITY_TYPE, lead.pool.spec.allowed_capacity_types())


def no_reservation(lead: Prepared, as_of: float | None) -> str:
    when = (
        datetime.fromtimestamp(as_of, UTC).isoformat(timespec="seconds")
        if as_of is not None
        else "never"
    )
    return (
        f"no reservation node class {lead.node_class.metadata.name} selects is active in the "
        f"request's zones and instance types, as of the last look at reservations ({when}); "
        f"node pool {lead.pool.metadata.name} allows reserved capacity only"
    )


def instance_record(
    landing: InstanceLanding, prepared: Prepared, info: InstanceTypeInfo | None, now: datetime
) -> InstanceRecord:
    return InstanceRecord.placed(
        landing,
        info.resources() if info else Resources.ZERO,
        request_id=prepared.request.request_id,
        node_pool=prepared.pool.metadata.name,
        node_class=prepared.node_class.metadata.name,
        requester=prepared.request.requester,
        launched_at=now.isoformat(),
        request_tags=own_tags(prepared.node_class, prepared.request),
        priority=prepared.priority,
        block_end=opt_in(prepared.request),
    )
