"""Resolve: what one pool can offer a group, before anything is leased.

`read_pool` reads the NodeClass's subnets, image and reservations and finds the candidates; `screen`
then refuses what can never be served there (nothing matches, limits it can never fit, the
flexibility minValues asks); `nothing_left` and `cannot_hold` say why a request that named no
pool goes on to the next one now: every offering is dry, or the reservations the snapshots show
have too little room for its minCount.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial

from capacity_launcher.domain.capacity.candidates import (
    Candidates,
    find_candidates,
    flexibility_shortfall,
)
from capacity_launcher.domain.capacity.image_architectures import (
    ARCHITECTURE_MISMATCH,
    ImageArchitectures,
)
from capacity_launcher.domain.capacity.offering_exclusions import (
    excluding_keys,
    exclusion_words,
    places,
)
from capacity_launcher.domain.capacity.offerings import RESERVED, Offering
from capacity_launcher.domain.capacity.platforms import LINUX, PLATFORM_MISMATCH
from capacity_launcher.domain.capacity.reservations import ReservationSource, selection_of
from capacity_launcher.domain.errors import (
    AMIS_READY,
    NO_IMAGE_SELECTED,
    NO_SECURITY_GROUP_SELECTED,
    SECURITY_GROUPS_READY,
    SUBNETS_READY,
    InstanceProfileNotReady,
    LaunchFailed,
    NodeClassNotReady,
    NodeClassRefused,
    UnknownRequirementValues,
)
from capacity_launcher.domain.records.status import ErrorDetail, RequestStatus
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.progress import (
    MIN_VALUES,
    Context,
    LaunchReport,
    PoolView,
    Progress,
    Refusal,
)
from capacity_launcher.service.resolution import Prepared


def read_pool(
    ctx: Context,
    lead: Prepared,
    progress: Sequence[Progress],
    report: LaunchReport,
    *,
    every_reservation: bool = False,
) -> PoolView | Refusal:
    """What the pool offers the group (`PoolView`), or its refusal (a NodeClass AWS refuses).
    A launch reads the reservation snapshots with the most room first, only as many as its
    requests need; `every_reservation` reads every one its requests could use (a preview lists
    the scheduled ones too)."""
    p = ctx.ports
    try:
        # The identity the class names first: a role that cannot be given is the document's
        # to fix, so the request is Rejected naming spec.role, never launched without it.
        p.templates.instance_profile(lead.node_class)
    except InstanceProfileNotReady as refused:
        return Refusal(ErrorDetail(code=refused.code, message=refused.message))
    try:
        subnets = p.subnets.by_zone(lead.node_class)
        if not subnets:
            return _not_ready(lead, SUBNETS_READY)
        p.templates.security_group_ids(lead.node_class)
        platform = p.templates.image_platform(lead.node_class)
        architecture = p.templates.image_architectures(lead.node_class)
        unavailable = {k: e.reason for k, e in p.unavailable.current().items()}
        asked = sum(item.request.count for item in progress) or lead.request.count
        enough = partial(
            _enough_room, ctx, lead, subnets, (platform, architecture), unavailable, asked
        )
        sources: list[ReservationSource] = p.reservations.sources(
            lead.node_class,
            words.scope(lead.requirements, subnets),
            enough,
            most_room_first=not every_reservation,
        )
    except NodeClassRefused as refused:
        if refused.code in _NOT_READY_WHEN:
            return _not_ready(lead, _NOT_READY_WHEN[refused.code])
        return Refusal(ErrorDetail(code=refused.code, message=refused.message), FAILED)
    except LaunchFailed as refused:
        # The NodeClass names subnets, an image or reservations (a group) AWS refuses for
        # good: fail now, nothing is leased yet; a request that named no pool tries the next.
        error = ErrorDetail(code=refused.code, message=refused.message)
        return Refusal(error, RequestStatus.FAILED)
    try:
        candidates = _within_limits(
            lead, _candidates(ctx, lead, subnets, sources, platform, architecture)
        )
    except UnknownRequirementValues as unknown:
        # A name EC2 does not know (a typo): bad input, never retried; a request that named
        # no pool tries the next one (this pool's own requirements may be the ones naming it).
        return Refusal(ErrorDetail(code=unknown.code, message=words.unknown_values(lead, unknown)))
    for mismatch in candidates.platform_mismatches:
        # The NodeClass names a reservation its image can never use: say so on the record.
        error = ErrorDetail(code=PLATFORM_MISMATCH, message=mismatch.message(lead.node_class))
        for item in progress:
            item.errors.append(error)
    usable = candidates.drop(unavailable)
    for skipped in usable.skipped:
        report.hit(skipped.offering.capacity_type)
    held = [words.unavailable(s.offering, s.reason) for s in usable.skipped]
    return PoolView(lead, subnets, sources, architecture, candidates, usable, held)


# The refusals of a NodeClass's selectors that find nothing, and the condition each makes False.
_NOT_READY_WHEN = {
    NO_SECURITY_GROUP_SELECTED: SECURITY_GROUPS_READY,
    NO_IMAGE_SELECTED: AMIS_READY,
}


def _not_ready(lead: Prepared, condition: str) -> Refusal:
    """A NodeClass a selector of which finds nothing is the document's to fix, as Karpenter
    holds a NodePool whose EC2NodeClass is not Ready: the request is Rejected naming it and
    why (a request that named no pool tries the next), before anything is leased."""
    not_ready = NodeClassNotReady(lead.node_class.metadata.name, condition)
    return Refusal(ErrorDetail(code=not_ready.code, message=not_ready.message))


def nothing_left(view: PoolView) -> str | None:
    """Why no offering can be asked now: every one the pool has is in the ICE cache."""
    if view.candidates and not view.usable:
        return words.all_unavailable(view.usable)
    return None


def cannot_hold(view: PoolView, item: Progress) -> str | None:
    """Why the pool cannot hold the request now, as the snapshots show it: a pool that launches
    into reservations only, whose reservations have room for fewer than its minCount (a gang
    would launch some, miss minCount and be rolled back). Said only when another pool may serve
    it; a request that waits for scheduled capacity, or replays here, is never passed over."""
    usable = view.usable
    if not item.prepared.alternatives or item.request.wait_for_capacity_until is not None:
        return None
    if not usable.reserved or usable.on_demand or usable.spot:
        return None
    available = usable.reserved_available()
    if available >= item.request.min_count:
        return None
    return (
        f"its reservations have room for {available} instance(s) now, as the reservation "
        f"snapshots show, fewer than minCount={item.request.min_count}"
    )


NO_OFFERING = "NoOffering"
FAILED = RequestStatus.FAILED


def screen(ctx: Context, view: PoolView) -> Refusal | None:
    """What the pool can never serve: limits the smallest candidate never fits, nothing that
    matches, or less flexibility than minValues asks."""
    lead = view.lead
    never = _never_fits(ctx, lead, view.candidates)
    if never is not None:
        return Refusal(ErrorDetail(code="LimitExceeded", message=never))
    candidates = view.candidates
    if not candidates and not candidates.skipped:
        return _no_offering(ctx, view, lead)
    inflexible = flexibility_shortfall(
        lead.requirements, [*candidates.on_demand, *candidates.spot], candidates.instance_types
    )
    if inflexible and not candidates.reserved:
        # Even with nothing dry, on-demand and spot could never offer the flexibility asked.
        message = "; ".join(inflexible)
        return Refusal(ErrorDetail(code=MIN_VALUES, message=message), pass_on=False)
    return None


def _no_offering(ctx: Context, view: PoolView, lead: Prepared) -> Refusal:
    """Nothing matches at all (as opposed to: matches, but is full or dry right now). In a
    reserved-only pool that is no fault of the request (no reservation is active now, as far as
    anyone has looked): it fails, saying when reservations were last looked at; otherwise it is
    Rejected."""
    architecture = view.architecture
    if architecture is not None and view.candidates.cannot_run_image:
        # The pool allows types, but the NodeClass's image runs on none of them.
        message = architecture.refusal(
            lead.node_class, view.pool_name, view.candidates.cannot_run_image
        )
        return Refusal(ErrorDetail(code=ARCHITECTURE_MISMATCH, message=message), FAILED)
    if set(words.capacity_types(lead)) == {RESERVED}:
        message = words.no_reservation(lead, ctx.ports.reservations.as_of(lead.node_class))
        return Refusal(ErrorDetail(code=NO_OFFERING, message=message), FAILED)
    message = _excluded(lead, view, words.no_offering(lead, view.subnets))
    return Refusal(ErrorDetail(code=NO_OFFERING, message=message), RequestStatus.REJECTED)


def _excluded(lead: Prepared, view: PoolView, message: str) -> str:
    """The message, naming the requirement keys that leave the pool no offering and their
    rules, when some do (domain/capacity/offering_exclusions.py)."""
    types = list(view.candidates.instance_types.values())
    offered = places(types, view.subnets.keys(), lead.pool.spec.allowed_capacity_types())
    exclusion = excluding_keys(lead.requirements, offered)
    if exclusion is None:
        return message
    return f"{message}: {exclusion_words(lead.requirements, exclusion, offered)}"


def _enough_room(
    ctx: Context,
    lead: Prepared,
    subnets: Mapping[str, Sequence[str]],
    image: tuple[str | None, ImageArchitectures | None],
    unavailable: Mapping[str, str],
    asked: int,
    found: Sequence[ReservationSource],
) -> bool:
    """Whether the reservations `found` (the sync's view) have room for the `asked` instances,
    in those the request could launch into now, as its own candidates say (its requirements, the
    image's platform and architecture, a block's end, the pool's limits), less what the ICE
    cache holds. When they have not, the reservations port looks at EC2 for a reservation
    created, or room made, since the sync. A request that may not use reserved capacity has
    nothing to look for."""
    if RESERVED not in words.capacity_types(lead):
        return True
    platform, architecture = image
    try:
        reserved = _candidates(ctx, lead, subnets, found, platform, architecture, [RESERVED])
    except UnknownRequirementValues:
        return True  # the request is refused below, whatever EC2 has
    return _within_limits(lead, reserved).drop(unavailable).reserved_available() >= asked


def _candidates(
    ctx: Context,
    lead: Prepared,
    subnets: Mapping[str, Sequence[str]],
    sources: Sequence[ReservationSource],
    image_platform: str | None,
    image_architecture: ImageArchitectures | None,
    capacity_types: Sequence[str] | None = None,
) -> Candidates:
    """The pool's candidates for the request (of `capacity_types` only, when given)."""
    requirements = lead.requirements
    pinned = words.pinned_instance_types(requirements)
    types = ctx.ports.catalog.offered(subnets.keys(), pinned)
    return find_candidates(
        requirements,
        types,
        subnets.keys(),
        capacity_types or words.capacity_types(lead),  # type: ignore[arg-type]
        sources,
        image_platform=image_platform or LINUX,
        named_reservations=selection_of(lead.node_class).named_ids(),
        image_architecture=image_architecture,
        now=ctx.clock(),
    )


def _within_limits(lead: Prepared, candidates: Candidates) -> Candidates:
    """Without the types one instance of which exceeds the pool's limits, as Karpenter leaves
    them out: they can never launch in the pool, and a lease sized by them would leave no room
    for the smaller ones (`limits.cpu: 100` with 192-core types allowed). All of them when none
    fits: `screen` then says the pool can never hold the request."""
    limits = lead.pool.spec.limits
    if limits is None:
        return candidates

    def fitting(offerings: Sequence[Offering]) -> list[Offering]:
        types = candidates.instance_types
        return [o for o in offerings if not types[o.instance_type].resources().fits_within(limits)]

    reserved = [(source, fitting(offerings)) for source, offerings in candidates.reserved]
    kept = replace(
        candidates,
        reserved=[(source, offerings) for source, offerings in reserved if offerings],
        on_demand=fitting(candidates.on_demand),
        spot=fitting(candidates.spot),
    )
    return kept if kept else candidates


def _never_fits(ctx: Context, lead: Prepared, candidates: Candidates) -> str | None:
    limits = lead.pool.spec.limits
    if limits is None or not candidates:
        return None
    smallest = min(
        (candidates.instance_types[o.instance_type].resources() for o in candidates.all()),
        key=lambda r: (r.gpu, r.cpu, r.memory_mib),
    )
    need = smallest * lead.request.min_count
    exceeded = need.fits_within(limits)
    if exceeded:
        # This container's copy of the pool may be stale: "never" is decided on the stored one.
        stored = ctx.ports.leases.stored_limits(lead.pool.metadata.name)
        exceeded = need.fits_within(stored) if stored is not None else []
    if exceeded:
        return (
            f"minCount={lead.request.min_count} of the smallest candidate exceeds node pool "
            f"{lead.pool.metadata.name} limits on {', '.join(exceeded)}: it can never fit"
        )
    return None
