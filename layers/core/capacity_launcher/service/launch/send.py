"""Send and absorb: one CreateFleet, made now or replayed, and what it did.

`compose` turns an attempt into a launch intent (the exact input and its ClientToken), which is
stored before `send` makes the call; `absorb` hands each request its share of the instances,
tags shared fleets' instances per request, learns where they landed, and tells the ICE cache
and the reservation snapshots what EC2 said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.aws_errors import is_launch_template_gone
from capacity_launcher.domain.capacity.fleet import (
    FleetError,
    FleetOffer,
    FleetResult,
    InstanceLanding,
    LaunchTemplate,
    blame,
    fleet_offer,
    fleet_request,
    template_names,
)
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, RESERVED, SPOT, Offering, Turn
from capacity_launcher.domain.capacity.planning import LaunchAttempt
from capacity_launcher.domain.errors import LaunchFailed, Transient
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.intents import (
    IntentCompletion,
    LaunchIntent,
    allocate,
    client_token,
)
from capacity_launcher.domain.records.status import UnavailableOffering
from capacity_launcher.domain.records.tags import instance_tags, own_request_tags
from capacity_launcher.service import single_flight
from capacity_launcher.service.launch import words
from capacity_launcher.service.launch.dry_answers import remember_dry
from capacity_launcher.service.launch.progress import (
    Context,
    LaunchReport,
    OwnFills,
    PoolView,
    Progress,
)

# CreateTags calls after a coalesced fleet run side by side (one per request, at most this many).
_MAX_PARALLEL_TAGGING = 10
# A deferred answer rides its lease settle with the slots its instances took in this many
# reservations at most (one more item each in the settle's transaction, whose 100 are the
# members' and records' budget: adapters/pool_leases.py); more are noted with it at once.
_NOTED_WITH_SETTLE = 4


@dataclass(frozen=True)
class Sent:
    """One CreateFleet and its answer; `attempt` for one made now (a replay has none: only its
    intent is known, and the slots it claimed with it)."""

    intent: LaunchIntent
    result: FleetResult
    attempt: LaunchAttempt | None = None
    # Its answer not stored on the intent yet (`send(complete=False)`): `absorb` stores it, or
    # leaves it to the request's lease settle (`defers`).
    deferred: bool = False


@dataclass
class Absorbed:
    """What a CreateFleet told: where its instances landed, what was dry, what the record says."""

    landings: list[InstanceLanding] = field(default_factory=list)
    dry: list[Offering] = field(default_factory=list)
    unavailable: list[UnavailableOffering] = field(default_factory=list)


def compose(
    ctx: Context, attempt: LaunchAttempt, number: int, active: Sequence[Progress], view: PoolView
) -> LaunchIntent:
    """The attempt as a launch intent; LaunchFailed when its launch template cannot be made."""
    lead = view.lead
    shares = allocate(attempt.count, [(p.request_id, p.wanted) for p in active])
    token = client_token([s.request_id for s in shares], number)
    # One share: the fleet's tags name its request, which need not be the group's first
    # (an earlier attempt may have filled that one already).
    single = _owner(active, shares[0].request_id) if len(shares) == 1 else None
    offer = offer_of(attempt, view)
    # The attempt was cut to what its fleet offers (`offered_only`), which recorded the cut.
    template, by_type = _templates(ctx, attempt, view, offer)
    return LaunchIntent(
        token=token,
        attempt=number,
        capacity_type=attempt.capacity_type,
        shares=shares,
        fleet_input=fleet_request(
            attempt,
            count=sum(s.count for s in shares),
            client_token=token,
            launch_template=template,
            subnets=view.subnets,
            tags=instance_tags(lead.node_class, view.pool_name, single, ctx.stack),
            offer=offer,
            templates_by_type=by_type,
        ),
        offerings=tuple(o.key for o in attempt.offerings),
    )


def _templates(
    ctx: Context, attempt: LaunchAttempt, view: PoolView, offer: FleetOffer
) -> tuple[LaunchTemplate, dict[str, LaunchTemplate]]:
    """The launch template of the fleet, and of each offered type when the NodeClass has an
    image per architecture (an alias): one template per image the offered types launch, the
    first offered type's the fleet's. A pool of one architecture uses that one's image only."""

    def ensure(image_id: str | None = None) -> LaunchTemplate:
        return ctx.ports.templates.ensure(
            view.lead.node_class,
            attempt.target,
            spot=attempt.capacity_type == SPOT,
            image_id=image_id,
        )

    images = view.architecture
    if images is None or len(images.images) < 2:
        return ensure(), {}
    wanted = images.images_by_type(
        dict.fromkeys(o.instance_type for o in offer.offered), view.candidates.instance_types
    )
    if not wanted:
        return ensure(), {}
    made = {image_id: ensure(image_id) for image_id in dict.fromkeys(wanted.values())}
    return next(iter(made.values())), {t: made[i] for t, i in wanted.items()}


def offer_of(attempt: LaunchAttempt, view: PoolView) -> FleetOffer:
    """What the attempt's CreateFleet offers, in the launcher's order and cut at its override
    limit: the one function the launch and `submit --dry-run` (service/preview.py) order by."""
    return fleet_offer(
        attempt, view.subnets, view.candidates.instance_types, _reserved_fit(attempt, view)
    )


def _reserved_fit(attempt: LaunchAttempt, view: PoolView) -> frozenset[tuple[str, str]]:
    """(instance type, zone) of the reservations the pool may use: an on-demand attempt offers
    those first (an open reservation EC2 may match serves them at no extra cost)."""
    if attempt.capacity_type != ON_DEMAND:
        return frozenset()
    return frozenset(
        (o.instance_type, o.zone) for _, offerings in view.candidates.reserved for o in offerings
    )


def offered_only(
    attempt: LaunchAttempt, view: PoolView, active: Sequence[Progress]
) -> LaunchAttempt:
    """The attempt over the offerings its CreateFleet can offer (ordered, then cut at
    MAX_OVERRIDES_PER_FLEET overrides: `fleet_offer`), before anything is claimed for it: a
    broad pool's thousands of candidate offerings are neither claimed one by one in the ICE
    table nor written into the intent, only the ones EC2 is asked about. The records of the
    requests say what the cut left out."""
    offer = offer_of(attempt, view)
    left_out = offer.left_out_record()
    if left_out is None:
        return attempt
    for item in active:
        if item.left_out is None:
            item.left_out = left_out  # the first cut the request met goes on its record
    return replace(attempt, offerings=offer.offered)


def take_turn(ctx: Context, attempt: LaunchAttempt) -> tuple[Turn | None, dict[Offering, str]]:
    """Single flight on the shared cache (on-demand and spot; a reservation's slots are
    claimed in its snapshot): the turn, and the offerings found dry meanwhile (→ reason). Only
    offerings with evidence are claimed (service/single_flight.py)."""
    if attempt.capacity_type == RESERVED:
        return None, {}
    turn = single_flight.take_turn(
        ctx.ports.unavailable,
        [o.key for o in attempt.offerings],
        clock=lambda: ctx.clock().timestamp(),
        pause=ctx.sleep,
    )
    cached = {o: turn.unavailable[o.key] for o in attempt.offerings if o.key in turn.unavailable}
    return turn, cached


def deferring(
    intent: LaunchIntent, attempt: LaunchAttempt, active: Sequence[Progress]
) -> Progress | None:
    """The request that carries an attempt's answer to its lease settle instead of an
    UpdateItem of the intent's own (issue 38), when the attempt may: one request's fleet
    (a reserved one's slots claimed with its intent: a replay knows them claimed, and claims
    none again). A crash before that settle leaves the intent pending, and a redelivery sends
    it again with its ClientToken, which EC2 answers with its first answer
    (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html): nothing launches
    twice. The slots its instances took in reservations it did not claim (a group's member,
    an open reservation) are noted with the answer, in the same transaction, only while the
    intent is pending (a done intent tells a replay they were: `_locate`), so never twice.
    `absorb` stores it at once when the fleet launched nothing (the request may end
    elsewhere, with no settle here), gives claimed slots back, or took slots in more
    reservations than the settle carries (`_NOTED_WITH_SETTLE`). None: `send` stores it."""
    if len(intent.shares) != 1:
        return None
    return next((p for p in active if p.request_id == intent.shares[0].request_id), None)


def send(
    ctx: Context, intent: LaunchIntent, report: LaunchReport, *, complete: bool = True
) -> FleetResult:
    """The intent's CreateFleet (none for one done already), its answer stored on the intent
    (`complete=False`: by the caller, `absorb` or the request's settle)."""
    if intent.state == "done":
        return FleetResult(intent.instance_ids, ())
    report.fleet_calls += 1
    try:
        result = ctx.ports.fleet.create(intent.fleet_input)
    except LaunchFailed as error:
        # Raised (not returned) errors apply to the whole fleet call.
        result = FleetResult((), (FleetError(error.code, error.reason, None, None, None),))
    except Transient as error:
        if not is_launch_template_gone(error.code):
            raise
        # EC2 refused the whole call, launching nothing: the answer is stored as any other.
        message = f"a launch template of {', '.join(template_names(intent.fleet_input))} is gone"
        result = FleetResult((), (FleetError(error.code, message, None, None, None),))
    if any(is_launch_template_gone(e.code) for e in result.errors):
        # A template the launcher trusted is gone (the sweep, an operator): it drops the names,
        # and the next attempt (retried in process, as any retryable error) creates them again,
        # as Karpenter drops its cached template on this error.
        ctx.ports.templates.forget(template_names(intent.fleet_input))
    if complete:
        store(ctx, completion(intent, result))
    return result


def completion(intent: LaunchIntent, result: FleetResult) -> IntentCompletion:
    """The fleet's answer as its intent stores it, with the claimed slots it gives back."""
    errors = tuple({"code": e.code, "message": e.message} for e in result.errors)
    return intent.completion(result.instance_ids, errors)


def store(ctx: Context, done: IntentCompletion) -> None:
    """An answer stored on its intent by a write of its own (the slots it gives back with it)."""
    ctx.ports.records.complete_intent(done)


def complete_left(ctx: Context, progress: Sequence[Progress]) -> None:
    """Store the answers no lease settle carried (a request that settled no lease here, one
    settled already, a visit that ends on an exception): every intent made in a visit is done
    before the visit ends (a crash alone leaves one pending, for a redelivery to send again)."""
    for item in progress:
        while item.completions:
            store(ctx, item.completions[0])
            item.completions.pop(0)


def _store_unless_settled(
    ctx: Context, sent: Sent, active: Sequence[Progress], landings: Sequence[InstanceLanding]
) -> bool:
    """A deferred answer takes the slots its instances took in reservations it did not claim
    (noted with it, once), and stays with its request for its lease settle, unless the fleet
    launched nothing, gives claimed slots back, or took slots in more reservations than a
    settle carries: then it is stored now. Whether the slots are noted with it."""
    if not sent.deferred:
        return False
    noted = _noted(sent.intent, landings)
    for item in active:
        for index, found in enumerate(item.completions):
            if found.token != sent.intent.token:
                continue
            done = replace(found, noted=noted)
            if done.slots_back is None and done.instance_ids and len(noted) <= _NOTED_WITH_SETTLE:
                item.completions[index] = done  # its lease settle carries it, and the noting
            else:
                store(ctx, done)
                item.completions.pop(index)
            return True
    return False


def absorb(
    ctx: Context,
    sent: Sent,
    active: Sequence[Progress],
    report: LaunchReport,
    own_fills: OwnFills | None = None,
) -> Absorbed:
    """What one fleet call (made now or replayed) did: to the requests, the ICE cache and the
    reservations. `own_fills` holds back the dry marks of reservations its instances filled."""
    intent, result, attempt = sent.intent, sent.result, sent.attempt
    retags = _hand_out(intent, result, active)
    node_class = next(
        (p.prepared.node_class for p in active if p.request_id in intent.request_ids), None
    )
    landings = _tag_and_locate(ctx, sent, retags, report, node_class)
    blamed = blame(result.errors, attempt.offerings if attempt is not None else ())
    for item in active:
        if item.request_id in intent.request_ids:
            item.errors += [f for f in blamed.fatal if f not in item.errors]
    remember_dry(ctx, blamed, result, landings, own_fills)
    if not _store_unless_settled(ctx, sent, active, landings):
        _note_reservation_use(ctx, landings, intent)
    hits = [words.unavailable(o, code) for o, code in blamed.hits]
    return Absorbed(landings, blamed.dry, hits)


def mark_launching(progress: Sequence[Progress], intent: LaunchIntent) -> None:
    for item in progress:
        if item.request_id in intent.request_ids:
            item.mark_launching()


def _hand_out(
    intent: LaunchIntent, result: FleetResult, active: Sequence[Progress]
) -> list[tuple[list[str], Mapping[str, str]]]:
    """Each request gets its share of the fleet's instances; the tags each share still needs."""
    by_request = intent.split(result.instance_ids)
    retags: list[tuple[list[str], Mapping[str, str]]] = []
    for item in active:
        mine = by_request.get(item.request_id, [])
        item.instance_ids += mine
        if len(intent.shares) > 1 and mine:
            # One fleet served several requests: each request's instances get its own tags.
            retags.append((mine, own_request_tags(item.prepared.node_class, item.request)))
    return retags


def _owner(active: Sequence[Progress], request_id: str) -> LaunchRequest:
    return next(p.request for p in active if p.request_id == request_id)


def _tag_and_locate(
    ctx: Context,
    sent: Sent,
    retags: Sequence[tuple[list[str], Mapping[str, str]]],
    report: LaunchReport,
    node_class: NodeClass | None,
) -> list[InstanceLanding]:
    """Tag each coalesced request's instances while asking EC2 where they landed."""
    fleet = ctx.ports.fleet
    with ThreadPoolExecutor(max_workers=min(len(retags), _MAX_PARALLEL_TAGGING) or 1) as pool:
        tagging = [pool.submit(fleet.tag, ids, tags) for ids, tags in retags]
        landings = _locate(ctx, sent, node_class)
        for done in tagging:
            report.untagged += done.result()
    return landings


def _locate(ctx: Context, sent: Sent, node_class: NodeClass | None) -> list[InstanceLanding]:
    """Where a fleet's instances landed. A done intent replayed is left out: its predecessor
    noted its slots (a pending intent replayed now took its slots now: they are noted, but for
    those it claimed when it was written, `_noted`).

    An attempt made now that can land in no reservation but one it names (a reserved attempt
    is `capacity-reservations-only` with one reservation id), in none (spot), or in none the
    account has open where its instances landed (`_outside_open_reservations`) is located by
    CreateFleet's own answer: its type, zone and lifecycle are the answer's, its reservation
    the one targeted, if any (issue 38: no DescribeInstances). Any other asks EC2
    (DescribeInstances): only it names the reservation, if any, an on-demand instance or a
    group's was put in."""
    attempt = sent.attempt
    if attempt is None and sent.intent.state == "done":
        return []
    target = attempt.target.reservation_id if attempt is not None and attempt.target else None
    spot = attempt is not None and attempt.capacity_type == SPOT
    answered = sent.result.landings_answered() if attempt is not None else None
    if answered is not None and (
        target or spot or _outside_open_reservations(ctx, attempt, node_class, answered)
    ):
        landings = answered
    else:
        landings = ctx.ports.fleet.describe(sent.result.instance_ids)
    if target:
        landings = [words.in_target(x, target) for x in landings]
    return landings


def _outside_open_reservations(
    ctx: Context,
    attempt: LaunchAttempt | None,
    node_class: NodeClass | None,
    answered: Sequence[InstanceLanding],
) -> bool:
    """Whether EC2 could have put none of an on-demand attempt's instances in a reservation:
    its NodeClass's reservation preference is `none` (its launch template says so), or no open
    reservation of the account, as the sync last listed them and the class's resolution held
    now carries them, is of the type and zone any of them landed in. False when that cannot be
    said (no resolution held): EC2 is asked. An open reservation made or opened since that list
    is the one way an instance is in a reservation its record does not name (docs/operations.md,
    *Where an instance landed*)."""
    if attempt is None or attempt.capacity_type != ON_DEMAND or node_class is None:
        return False
    if node_class.spec.reservation_preference == "none":
        return True
    summary = ctx.ports.open_reservations
    held = summary.open_reservations(node_class) if summary is not None else None
    return held is not None and held.isdisjoint((x.instance_type, x.zone) for x in answered)


def _noted(intent: LaunchIntent, landings: Sequence[InstanceLanding]) -> dict[str, int]:
    """The slots instances took in reservations the intent did not claim: to be noted."""
    launched_into: dict[str, int] = {}
    for landing in landings:
        if landing.capacity_reservation_id:
            launched_into[landing.capacity_reservation_id] = (
                launched_into.get(landing.capacity_reservation_id, 0) + 1
            )
    if intent.claimed and intent.reservation_id:
        launched_into.pop(intent.reservation_id, 0)  # claimed slots are taken already
    return launched_into


def _note_reservation_use(
    ctx: Context, landings: Sequence[InstanceLanding], intent: LaunchIntent
) -> None:
    """Slots taken by instances EC2 put in reservations, for every worker to see (a replay's
    too, but for those its intent claimed when it was written)."""
    launched_into = _noted(intent, landings)
    if launched_into:
        ctx.ports.reservations.note_launched(launched_into)
