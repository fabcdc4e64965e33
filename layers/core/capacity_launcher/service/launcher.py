"""The launch use case: from a validated request to instances, a request record and an event.

`Launcher.serve` takes a group of compatible requests (usually one; several when an SQS batch
coalesces), so one CreateFleet can serve them all. Every CreateFleet is preceded by a launch
intent in DynamoDB; a retry replays the intents it finds instead of composing new ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from capacity_launcher.domain.aws_errors import ErrorKind, classify, retryable_error
from capacity_launcher.domain.backoff import IN_PROCESS_RETRIES, in_process_delay
from capacity_launcher.domain.capacity_wait import (
    awaited,
    awaited_records,
    missed_deadline,
    next_check_seconds,
)
from capacity_launcher.domain.errors import (
    InvalidLaunchRequest,
    LaunchFailed,
    NodePoolDeleted,
    QuotaExceeded,
    UnknownRequirementValues,
)
from capacity_launcher.domain.fleet import (
    Blamed,
    FleetError,
    FleetResult,
    InstanceLanding,
    blame,
    fleet_request,
)
from capacity_launcher.domain.image_architectures import ARCHITECTURE_MISMATCH, ImageArchitecture
from capacity_launcher.domain.instance_records import InstanceRecord
from capacity_launcher.domain.instance_types import InstanceTypeInfo
from capacity_launcher.domain.intents import LaunchIntent, allocate, client_token
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.offerings import RESERVED, SPOT, Offering, Turn, offering_key
from capacity_launcher.domain.planning import (
    Candidates,
    Landed,
    LaunchAttempt,
    LaunchPlan,
    find_candidates,
    flexibility_shortfall,
)
from capacity_launcher.domain.platforms import LINUX, PLATFORM_MISMATCH
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.requester_origins import Origin
from capacity_launcher.domain.requirements import CAPACITY_TYPE, INSTANCE_TYPE, Requirements
from capacity_launcher.domain.reservations import (
    ReservationScope,
    ReservationSnapshot,
    ReservationSource,
    selection_of,
)
from capacity_launcher.domain.status import (
    CAPACITY_NOT_ACTIVE_BY_DEADLINE,
    ErrorDetail,
    LaunchedInstance,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
    status_for,
)
from capacity_launcher.domain.tags import (
    NODE_POOL,
    REQUEST_ID,
    instance_tags,
    own_request_tags,
    own_tags,
)
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.resolution import Prepared, resolve, resolve_in, resolve_next

# Why a reservation was left out before asking EC2: EC2's own code for a full reservation.
RESERVATION_FULL = "ReservationCapacityExceeded"
# The record's word for offerings too few to give the flexibility minValues asks.
MIN_VALUES = "MinValuesNotMet"
# The record's word for a pool a request that named none was not served by, and why.
POOL_PASSED_OVER = "NodePoolPassedOver"
# The record's word for a single-zone landing given up for another zone.
ZONE_ROLLED_BACK = "ZoneRolledBack"
# CreateTags calls after a coalesced fleet run side by side (one per request, at most this many).
_MAX_PARALLEL_TAGGING = 10


def utcnow() -> datetime:
    return datetime.now(UTC)


def pause(seconds: float) -> None:
    time.sleep(seconds)


@dataclass
class _Progress:
    """What one request has got so far, across replays and attempts."""

    prepared: Prepared
    granted: int = 0
    instance_ids: list[str] = field(default_factory=list)
    errors: list[ErrorDetail] = field(default_factory=list)
    # Its lease was settled by an earlier delivery: launching is over, only the record is left.
    settled: bool = False
    # An intent names it: EC2 may have instances for it, so its lease must outlive an exception.
    launching: bool = False
    # Its Waiting record, when an earlier delivery put it to wait for scheduled capacity.
    waited: RequestRecord | None = None
    # The first quota refusal a reclaim could answer: asked for only if the request ends with
    # no instance (another pool may still serve it).
    reclaim: QuotaExceeded | None = None

    @property
    def request(self) -> LaunchRequest:
        return self.prepared.request

    @property
    def wanted(self) -> int:
        return max(self.granted - len(self.instance_ids), 0)


@dataclass
class _Claim:
    """Slots of one reservation taken in the shared snapshot for one attempt."""

    reservation_id: str
    granted: int
    returned: bool = False


@dataclass
class _OwnFills:
    """Dry marks of reservations that this serve's own instances filled, held back until the
    requests are settled: a reservation a rolled-back gang filled has free slots again, so its
    exhaustion was no evidence of dryness (README "How it works": the ICE cache holds dry ones)."""

    # Reservation id -> its ICE-cache mark (key, code, message).
    marks: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # Every instance this serve saw land, rolled back or not.
    landings: list[InstanceLanding] = field(default_factory=list)


@dataclass
class LaunchReport:
    """What happened to a group; the handler publishes the records and emits the metrics."""

    records: dict[str, RequestRecord]
    replayed: set[str] = field(default_factory=set)
    fleet_calls: int = 0
    fallbacks_to_on_demand: int = 0
    cache_hits: dict[str, int] = field(default_factory=dict)
    cache_writes: dict[str, int] = field(default_factory=dict)
    # Requests that wait for scheduled capacity (their records are Waiting, not stored here):
    # request id -> seconds until the next look.
    waiting: dict[str, int] = field(default_factory=dict)
    # Instances of shared fleets EC2 did not know in time for their request's tags: the sync's
    # reconciliation tags them from their instance records.
    untagged: list[str] = field(default_factory=list)


class Launcher:
    def __init__(
        self,
        ports: LaunchPorts,
        *,
        max_attempts: int = 4,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._p = ports
        self._max_attempts = max_attempts
        self._clock = clock
        self._sleep = sleep

    def prepare(
        self,
        request: LaunchRequest,
        received_at: datetime | None = None,
        origin: Origin | None = None,
    ) -> Prepared:
        """Check the requester against the origin, resolve pool, class and requirements;
        RequestRejected when it can never be served."""
        return resolve(self._p.config, request, received_at or self._clock(), origin)

    # -- serving ------------------------------------------------------------------------------

    def serve(self, group: Sequence[Prepared]) -> LaunchReport:
        """Launch for a group of compatible requests; returns one record per request."""
        report = LaunchReport(records={})
        fresh: list[_Progress] = []
        for prepared in group:
            record, intents = self._p.records.load(prepared.request.request_id)
            if record is not None and _from_invalid_body(record):
                # An invalid body that borrowed this requestId never decides a valid one's fate.
                record = None
            if record is not None and not record.is_final:
                # Waiting for scheduled capacity: look again (a wait never leaves intents).
                fresh.append(_Progress(prepared, waited=record))
            elif record is not None:
                report.records[record.request_id] = record
                report.replayed.add(record.request_id)
            elif intents:
                # A crashed or throttled predecessor: finish its intents, alone, first, in the
                # pool they were made for (a lower-weight one, if it fell back); never in another.
                pool = intents[-1].node_pool
                placed: Prepared | None = prepared
                if pool and pool != prepared.pool.metadata.name:
                    placed = resolve_in(self._p.config, prepared, pool)
                if placed is not None:
                    self._serve_or_give_back([_Progress(placed)], report, intents)
                else:
                    fresh += self._afresh(prepared, report, intents, pool or "")
            else:
                fresh.append(_Progress(prepared))
        if fresh:
            self._serve_or_give_back(fresh, report, [])
        return report

    def _afresh(
        self, prepared: Prepared, report: LaunchReport, intents: list[LaunchIntent], pool: str
    ) -> list[_Progress]:
        """A request whose intents' pool is gone (or no longer one it may use): they are not
        sent again; it is served afresh, where it resolves now, for what they did not launch."""
        why = f"nodePool {pool} is no longer one this request may use: not sent again"
        known = {i for intent in intents for i in intent.instance_ids}
        ended = [self._end_unsent(intent, why, known) for intent in intents]
        request = prepared.request
        launched = sum(len(i.split(i.instance_ids).get(request.request_id, [])) for i in ended)
        there = f"; the {launched} it launched there are counted there" if launched else ""
        note = ErrorDetail(
            code=POOL_PASSED_OVER,
            message=f"nodePool {pool}: no longer one this request may use since an earlier "
            f"delivery tried it: nothing more is launched in it{there}",
        )
        left = request.count - launched
        item = _Progress(prepared, errors=[note])
        if left < 1:
            report.records[request.request_id] = self._finish(
                item, [], [], RequestStatus.FAILED, [note]
            )
            return []
        rest = request.model_copy(update={"count": left, "min_count": min(request.min_count, left)})
        return [_Progress(replace(prepared, request=rest), errors=[note])]

    def _end_unsent(self, intent: LaunchIntent, why: str, known: set[str]) -> LaunchIntent:
        """End a pending intent without sending it (no live lease covers it in its pool): done,
        with the instances EC2 already has for it if its call did reach EC2 (a single request's
        fleet carries its request tag; a coalesced one's are left to reconciliation)."""
        if intent.state == "done":
            return intent
        found: list[str] = []
        if len(intent.shares) == 1 and intent.node_pool:
            tags = {REQUEST_ID: intent.shares[0].request_id, NODE_POOL: intent.node_pool}
            found = [
                i["InstanceId"]
                for i in self._p.fleet.find_managed(tags)
                if i["InstanceId"] not in known
                and i.get("State", {}).get("Name") not in ("shutting-down", "terminated")
            ][: intent.shares[0].count]
            known.update(found)
        error = {"code": "NotSentAgain", "message": why}
        self._p.records.complete_intent(intent.token, found, [error])
        return replace(intent, state="done", instance_ids=tuple(found), errors=(error,))

    def _serve_or_give_back(
        self, progress: list[_Progress], report: LaunchReport, intents: list[LaunchIntent]
    ) -> None:
        """`_serve`; on any exception, give back the leases of requests no intent names."""
        try:
            self._serve(progress, report, intents)
        except BaseException:
            for item in progress:
                if item.granted and not item.settled and not item.launching:
                    self._cancel_lease(item)
            raise

    def _cancel_lease(self, item: _Progress) -> None:
        try:
            self._p.limits.cancel(item.prepared.pool.metadata.name, item.request.request_id)
        except Exception:  # the lease then expires and the sync reclaims it
            logger.exception("lease not given back", extra={"requestId": item.request.request_id})

    def _serve(
        self, progress: list[_Progress], report: LaunchReport, intents: list[LaunchIntent]
    ) -> None:
        lead = progress[0].prepared
        pool_name = lead.pool.metadata.name
        try:
            subnets = self._p.subnets.by_zone(lead.node_class)
            platform = self._p.templates.image_platform(lead.node_class)
            architecture = self._p.templates.image_architecture(lead.node_class)
            sources: list[ReservationSource] = self._p.reservations.sources(
                lead.node_class, _scope(lead.requirements, subnets)
            )
        except LaunchFailed as refused:
            # The NodeClass names subnets, an image or reservations (a group) AWS refuses for
            # good: fail now, nothing is leased yet; a request that named no pool tries the next.
            stay = self._fall_back(progress, report, refused.message)
            error = ErrorDetail(code=refused.code, message=refused.message)
            self._reject_all(stay, report, error, RequestStatus.FAILED)
            return
        try:
            candidates = self._candidates(lead, subnets, sources, platform, architecture)
        except UnknownRequirementValues as unknown:
            # A name EC2 does not know (a typo): bad input, never retried; a request that named
            # no pool tries the next one (this pool's own requirements may be the ones naming it).
            message = _unknown_values(lead, unknown)
            stay = self._fall_back(progress, report, message)
            self._reject_all(stay, report, ErrorDetail(code=unknown.code, message=message))
            return
        for mismatch in candidates.platform_mismatches:
            # The NodeClass names a reservation its image can never use: say so on the record.
            error = ErrorDetail(code=PLATFORM_MISMATCH, message=mismatch.message(lead.node_class))
            for item in progress:
                item.errors.append(error)
        unavailable = self._p.unavailable.current()
        usable = candidates.drop({k: e.reason for k, e in unavailable.items()})
        for skipped in usable.skipped:
            report.cache_hits[skipped.offering.capacity_type] = (
                report.cache_hits.get(skipped.offering.capacity_type, 0) + 1
            )
        skipped_records = [_unavailable(s.offering, s.reason) for s in usable.skipped]
        progress = self._wait_or_go(progress, report, usable, candidates, sources)
        if not progress:
            return

        nothing_left = _all_unavailable(usable) if candidates and not usable else None
        if nothing_left:
            progress = self._fall_back(progress, report, nothing_left)
            if not progress:
                return
            lead = progress[0].prepared  # the same pool and requirements; its own minCount
        per_instance = candidates.largest() if candidates else Resources.ZERO
        never = self._never_fits(lead, candidates, per_instance)
        if never is not None:
            stay = self._fall_back(progress, report, never)
            self._reject_all(stay, report, ErrorDetail(code="LimitExceeded", message=never))
            return
        if not candidates and not candidates.skipped:
            # Nothing matches at all (as opposed to: matches, but is full or dry right now): a
            # request that named no pool tries the next one. In a reserved-only pool that is no
            # fault of the request (no reservation is active now, as far as anyone has looked):
            # it fails, saying when reservations were last looked at; otherwise it is Rejected.
            message = _no_offering(lead, subnets)
            code, status = "NoOffering", RequestStatus.REJECTED
            if architecture is not None and candidates.cannot_run_image:
                # The pool allows types, but the NodeClass's image runs on none of them.
                message = architecture.refusal(
                    lead.node_class, pool_name, candidates.cannot_run_image
                )
                code, status = ARCHITECTURE_MISMATCH, RequestStatus.FAILED
            elif set(_capacity_types(lead)) == {RESERVED}:
                message = _no_reservation(lead, self._p.reservations.as_of(lead.node_class))
                status = RequestStatus.FAILED
            stay = self._fall_back(progress, report, message)
            self._reject_all(stay, report, ErrorDetail(code=code, message=message), status)
            return
        inflexible = flexibility_shortfall(
            lead.requirements, [*candidates.on_demand, *candidates.spot], candidates.instance_types
        )
        if inflexible and not candidates.reserved:
            # Even with nothing dry, on-demand and spot could never offer the flexibility asked.
            message = "; ".join(inflexible)
            self._reject_all(progress, report, ErrorDetail(code=MIN_VALUES, message=message))
            return

        # Limits: lease what the largest candidate would use; settle to what actually launched.
        # A request its replayed intents name launched here already: if its lease was lost
        # meanwhile (expired and reclaimed, its instances counted by the sync), it launches no
        # more but still takes what those intents launched, and never falls back to launch anew.
        replayed = {request_id for intent in intents for request_id in intent.request_ids}
        for item in progress:
            if self._p.limits.is_settled(pool_name, item.request.request_id):
                item.settled = True  # it absorbs its done intents below and never launches more
                continue
            try:
                item.granted = self._p.limits.reserve(
                    pool_name,
                    item.request.request_id,
                    per_instance,
                    item.request.count,
                    item.request.min_count,
                    lead.pool.spec.limits,
                    requester=item.request.requester,
                )
            except QuotaExceeded as refused:
                # Like a flavor in Kueue, a pool its quota refuses passes it on as one at its
                # limits does; a reclaim waits for the request's end (`_finish`).
                item.errors.append(ErrorDetail(code=refused.code, message=str(refused)))
                if refused.reclaim and item.reclaim is None:
                    item.reclaim = refused
                continue
            except NodePoolDeleted as gone:
                # A copy of the pool outlived its deletion: nothing is leased, a request that
                # named no pool tries the next one.
                item.errors.append(ErrorDetail(code=gone.code, message=str(gone)))
                continue
            if item.granted == 0 and item.request.request_id not in replayed:
                item.errors.append(
                    ErrorDetail(
                        code="LimitExceeded",
                        message=f"node pool {pool_name} limits leave room for fewer than "
                        f"minCount={item.request.min_count} instances now",
                    )
                )
        full = [
            p
            for p in progress
            if p.granted == 0
            and not p.settled
            and p.prepared.alternatives
            and p.request.request_id not in replayed
        ]
        if full:
            stay = self._fall_back(full, report)
            progress = [p for p in progress if p not in full or p in stay]
        active = [
            p for p in progress if p.granted > 0 or p.settled or p.request.request_id in replayed
        ]
        missing_reservations = _missing_reservations(lead, sources)
        for item in active:
            item.errors += [e for e in missing_reservations if e not in item.errors]

        observed: list[UnavailableOffering] = []
        seen: list[InstanceLanding] = []
        own_fills = _OwnFills()
        attempt_number = max((i.attempt for i in intents), default=0)
        known = {i for intent in intents for i in intent.instance_ids}
        replayed_in: dict[str, str | None] = {}  # a replayed intent's instance → its reservation
        for intent in intents:
            if intent.state == "pending" and not self._covered(intent, active, pool_name):
                # Its lease was reclaimed and the pool has no room for it now: EC2 may never have
                # seen the call, so sending it again could launch beyond the limits.
                message = (
                    f"node pool {pool_name} limits leave room for fewer than the "
                    f"{sum(x.count for x in intent.shares)} instance(s) of an earlier launch, "
                    "whose lease expired: it is not sent again"
                )
                intent = self._end_unsent(intent, message, known)
                for item in active:
                    if len(intent.instance_ids) < sum(x.count for x in intent.shares) and (
                        item.request.request_id in intent.request_ids
                    ):
                        item.errors.append(ErrorDetail(code="LimitExceeded", message=message))
            _mark_launching(progress, intent)
            result = self._run_intent(intent, report)
            self._absorb(intent, result, active, observed, report)
            replayed_in.update(dict.fromkeys(result.instance_ids, intent.reservation_id))
        plan = LaunchPlan(
            usable,
            sum(p.wanted for p in active),
            single_zone=lead.request.single_zone,
            max_attempts=self._max_attempts,
            requirements=lead.requirements,
            min_count=sum(min(p.request.min_count, p.wanted) for p in active),
        )
        tried_reserved = False
        transient_retries = 0
        while active and sum(p.wanted for p in active) > 0:
            attempt = plan.next_attempt()
            if attempt is None and plan.zone_short and not intents:
                # The zone cannot complete the gang: take back what landed there, try the next.
                seen = self._roll_back_zone(active, seen)
                plan.abandon_zone()
                continue
            if attempt is None:
                break
            if attempt.capacity_type == RESERVED:
                tried_reserved = True
            elif tried_reserved:
                report.fallbacks_to_on_demand += 1
            claim = self._claim(attempt)
            if claim is not None and claim.granted == 0:
                # Other workers hold its last slots: known without asking EC2.
                observed += [_unavailable(o, RESERVATION_FULL) for o in attempt.offerings]
                plan.record(attempt, [], [])
                continue
            if claim is not None:
                attempt = replace(attempt, count=min(attempt.count, claim.granted))
            turn, cached = self._take_turn(attempt)
            observed += [_unavailable(o, cached[o]) for o in cached]
            if turn is not None and not turn.allowed:
                plan.record(attempt, [], cached)  # another worker's attempt found them dry
                continue
            if turn is not None:
                attempt = replace(
                    attempt, offerings=tuple(o for o in attempt.offerings if o.key in turn.allowed)
                )
            attempt_number += 1
            landings: list[InstanceLanding] = []
            dry: list[Offering] = []
            try:
                try:
                    intent = self._intent(attempt, attempt_number, active, lead, subnets)
                except LaunchFailed as refused:
                    # The NodeClass names something AWS refuses for good: no attempt can succeed.
                    error = ErrorDetail(code=refused.code, message=refused.message)
                    for item in active:
                        item.errors.append(error)
                    break  # the claim is given back below
                _mark_launching(progress, intent)
                self._p.records.write_intent(intent)
                result = self._run_intent(intent, report)
                landings, dry = self._absorb(
                    intent, result, active, observed, report, attempt, claim, own_fills
                )
            finally:
                if claim is not None:
                    self._give_back(claim, used=0)  # no-op once _absorb gave back the unused
                if turn is not None:
                    self._p.unavailable.end_turn(
                        turn,
                        launched={
                            offering_key(attempt.capacity_type, x.instance_type, x.zone)
                            for x in landings
                        },
                        dry={o.key for o in dry},
                    )
            seen += landings
            own_fills.landings += landings
            landed = [Landed(x.instance_type, x.zone) for x in landings]
            retryable = [e for e in result.errors if classify(e.code).retryable]
            if retryable and sum(p.wanted for p in active) > 0:
                # Throttled or faulty overrides (what launched is kept): ask for the rest again.
                if transient_retries >= IN_PROCESS_RETRIES:
                    code = retryable[0].code
                    raise retryable_error("CreateFleet", code, classify(code))
                transient_retries += 1
                (self._sleep or pause)(in_process_delay(transient_retries))
                plan.again(attempt, landed, [*dry, *cached])
                continue
            plan.record(attempt, landed, [*dry, *cached])
            for offering in dry:
                report.cache_writes[offering.capacity_type] = (
                    report.cache_writes.get(offering.capacity_type, 0) + 1
                )
            if (
                any(classify(e.code) is ErrorKind.FATAL for e in result.errors)
                and not result.instance_ids
            ):
                break

        for refusal in plan.refusals:
            error = ErrorDetail(code=MIN_VALUES, message=refusal)
            for item in active:
                if item.wanted and error not in item.errors:
                    item.errors.append(error)
        where = {x.instance_id: x for x in seen}
        missing = [i for p in progress for i in p.instance_ids if i not in where]
        described = self._p.fleet.describe(missing)
        where.update({x.instance_id: _as_launched(x, replayed_in) for x in described})
        reservations = _reservations_by_id(sources)
        for item in progress:
            record = self._settle(
                item, where, [*skipped_records, *observed], candidates, reservations
            )
            report.records[item.request.request_id] = record
        self._remember_own_fills(own_fills, progress, report)

    def _wait_or_go(
        self,
        progress: list[_Progress],
        report: LaunchReport,
        usable: Candidates,
        candidates: Candidates,
        sources: Sequence[ReservationSource],
    ) -> list[_Progress]:
        """Requests that go on now; those that wait for scheduled capacity get a Waiting record,
        those whose wait is over a Failed one (README: Waiting for scheduled capacity)."""
        going = []
        now = self._clock()
        for item in progress:
            deadline = item.request.wait_for_capacity_until
            if deadline is None or usable.reserved_available() >= item.request.min_count:
                going.append(item)  # no wait asked, or reserved capacity can serve it now
                continue
            waited_for = awaited(candidates.scheduled, deadline)
            request_id = item.request.request_id
            if now < deadline and waited_for:
                report.records[request_id] = self._waiting(item, deadline, waited_for, now)
                report.waiting[request_id] = next_check_seconds(now, deadline, waited_for)
            elif now >= deadline and item.waited is not None:
                message = missed_deadline(
                    deadline, item.waited.waiting_for, _reservations_by_id(sources)
                )
                error = ErrorDetail(code=CAPACITY_NOT_ACTIVE_BY_DEADLINE, message=message)
                report.records[request_id] = self._finish(
                    item, [], [], RequestStatus.FAILED, [*item.errors, error]
                )
            else:
                going.append(item)  # nothing it could wait for: served as without the field
        return going

    def _waiting(
        self,
        item: _Progress,
        deadline: datetime,
        waited_for: Sequence[ReservationSnapshot],
        now: datetime,
    ) -> RequestRecord:
        """The Waiting record; the batch stores it once the message is held in the queue."""
        return RequestRecord(
            request_id=item.request.request_id,
            node_pool=item.prepared.pool.metadata.name,
            requester=item.request.requester,
            status=RequestStatus.WAITING,
            requested=item.request.count,
            launched=0,
            errors=list(item.errors),
            received_at=item.prepared.received_at,
            finished_at=now,
            wait_for_capacity_until=deadline,
            waiting_for=awaited_records(waited_for),
        )

    def _fall_back(
        self, items: Sequence[_Progress], report: LaunchReport, why: str | None = None
    ) -> list[_Progress]:
        """Requests that named no pool try the next compatible one by weight, as Karpenter does;
        returns those that have none (a request that named this pool, coalesced with them, or
        the last compatible pool's), whose answer is this pool's. Nothing was leased or launched
        for them in this pool. `why`: this pool's answer to all; without it, each one's last
        error (its limits or its quota)."""
        stay: list[_Progress] = []
        following = []
        for item in items:
            nxt, skipped = resolve_next(self._p.config, item.prepared)
            if nxt is None:
                stay.append(item)
                continue
            passed_over = [e for e in item.errors if e.code == POOL_PASSED_OVER]
            passed_over.append(
                ErrorDetail(
                    code=POOL_PASSED_OVER,
                    message=f"nodePool {item.prepared.pool.metadata.name}: "
                    f"{why or item.errors[-1].message}",
                )
            )
            notes = [ErrorDetail(code=POOL_PASSED_OVER, message=m) for m in skipped]
            following.append(_Progress(nxt, errors=[*passed_over, *notes], reclaim=item.reclaim))
        for group in _by_pool(following):
            self._serve_or_give_back(group, report, [])
        return stay

    def _reject_all(
        self,
        progress: Sequence[_Progress],
        report: LaunchReport,
        error: ErrorDetail,
        status: RequestStatus = RequestStatus.REJECTED,
    ) -> None:
        for item in progress:
            passed_over = [e for e in item.errors if e.code == POOL_PASSED_OVER]
            report.records[item.request.request_id] = self._finish(
                item, [], [], status, [*passed_over, error]
            )

    # -- one attempt --------------------------------------------------------------------------

    def _intent(
        self,
        attempt: LaunchAttempt,
        number: int,
        active: Sequence[_Progress],
        lead: Prepared,
        subnets: Mapping[str, Sequence[str]],
    ) -> LaunchIntent:
        shares = allocate(attempt.count, [(p.request.request_id, p.wanted) for p in active])
        token = client_token([s.request_id for s in shares], number)
        template = self._p.templates.ensure(
            lead.node_class, attempt.target, spot=attempt.capacity_type == SPOT
        )
        # One share: the fleet's tags name its request, which need not be the group's first
        # (an earlier attempt may have filled that one already).
        single = _owner(active, shares[0].request_id) if len(shares) == 1 else None
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
                subnets=subnets,
                tags=instance_tags(lead.node_class, lead.pool.metadata.name, single),
            ),
            offerings=tuple(o.key for o in attempt.offerings),
        )

    def _claim(self, attempt: LaunchAttempt) -> _Claim | None:
        """Claim a targeted reservation's slots in the shared snapshot before asking EC2."""
        target = attempt.target
        if target is None or target.reservation_id is None:
            return None
        granted = self._p.reservations.claim(target.reservation_id, attempt.count)
        return None if granted is None else _Claim(target.reservation_id, granted)

    def _take_turn(self, attempt: LaunchAttempt) -> tuple[Turn | None, dict[Offering, str]]:
        """Single flight on the shared cache (on-demand and spot; a reservation's slots are
        claimed in its snapshot): the turn, and the offerings found dry meanwhile (→ reason)."""
        if attempt.capacity_type == RESERVED:
            return None, {}
        turn = self._p.unavailable.take_turn([o.key for o in attempt.offerings])
        cached = {
            o: turn.unavailable[o.key] for o in attempt.offerings if o.key in turn.unavailable
        }
        return turn, cached

    def _give_back(self, claim: _Claim, used: int) -> None:
        """Give back a claim's slots that no instance took, once, whichever way the attempt ends."""
        if claim.returned:
            return
        claim.returned = True
        if claim.granted > used:
            self._p.reservations.give_back(claim.reservation_id, claim.granted - used)

    def _covered(self, intent: LaunchIntent, active: Sequence[_Progress], pool: str) -> bool:
        """Whether live leases in `pool` cover a pending intent's every share: its own requests'
        leases have room left for it; a coalesced partner's (served by its own delivery) is open
        and as large (replaying then gives the partner what its own replay would)."""
        items = {p.request.request_id: p for p in active}
        for share in intent.shares:
            item = items.get(share.request_id)
            if item is None:
                lease = self._p.limits.lease(pool, share.request_id)
                if lease is None or lease.settled or lease.count < share.count:
                    return False
            elif item.settled or len(item.instance_ids) + share.count > item.granted:
                return False
        return True

    def _run_intent(self, intent: LaunchIntent, report: LaunchReport) -> FleetResult:
        if intent.state == "done":
            return FleetResult(intent.instance_ids, ())
        report.fleet_calls += 1
        try:
            result = self._p.fleet.create(intent.fleet_input)
        except LaunchFailed as error:
            # Raised (not returned) errors apply to the whole fleet call.
            result = FleetResult((), (FleetError(error.code, error.reason, None, None, None),))
        self._p.records.complete_intent(
            intent.token,
            result.instance_ids,
            [{"code": e.code, "message": e.message} for e in result.errors],
        )
        return result

    def _absorb(
        self,
        intent: LaunchIntent,
        result: FleetResult,
        active: Sequence[_Progress],
        observed: list[UnavailableOffering],
        report: LaunchReport,
        attempt: LaunchAttempt | None = None,
        claim: _Claim | None = None,
        own_fills: _OwnFills | None = None,
    ) -> tuple[list[InstanceLanding], list[Offering]]:
        """What one fleet call (made now or replayed) did: to the requests, the ICE cache and the
        reservations. Returns where its instances landed and the offerings found dry."""
        if claim is not None:
            # A claimed attempt targets one reservation only: every instance it got is in it.
            self._give_back(claim, used=len(result.instance_ids))
        retags = _hand_out(intent, result, active)
        landings = self._tag_and_locate(intent, result, attempt, retags, report)
        blamed = blame(result.errors, attempt.offerings if attempt is not None else ())
        observed += [_unavailable(o, code) for o, code in blamed.hits]
        for item in active:
            if item.request.request_id in intent.request_ids:
                item.errors += [f for f in blamed.fatal if f not in item.errors]
        self._remember_dry(blamed, result, landings, own_fills)
        self._note_reservation_use(landings, claim)
        return landings, blamed.dry

    def _tag_and_locate(
        self,
        intent: LaunchIntent,
        result: FleetResult,
        attempt: LaunchAttempt | None,
        retags: Sequence[tuple[list[str], Mapping[str, str]]],
        report: LaunchReport,
    ) -> list[InstanceLanding]:
        """Tag each coalesced request's instances while asking EC2 where they landed."""
        with ThreadPoolExecutor(max_workers=min(len(retags), _MAX_PARALLEL_TAGGING) or 1) as pool:
            tagging = [pool.submit(self._p.fleet.tag, ids, tags) for ids, tags in retags]
            # A pending intent replayed now took its slots now (its claim, if any, was given back).
            fresh = attempt is not None or intent.state != "done"
            landings = self._p.fleet.describe(result.instance_ids) if fresh else []
            if attempt is not None and attempt.target and attempt.target.reservation_id:
                landings = [_in_target(x, attempt.target.reservation_id) for x in landings]
            for done in tagging:
                report.untagged += done.result()
        return landings

    def _remember_dry(
        self,
        blamed: Blamed,
        result: FleetResult,
        landings: Sequence[InstanceLanding],
        own_fills: _OwnFills | None,
    ) -> None:
        """Dry offerings go to the shared ICE cache; dry reservations are marked exhausted. A
        reservation this attempt's own instances landed in waits in `own_fills` for the end."""
        filled = {x.capacity_reservation_id for x in landings if x.capacity_reservation_id}
        held = [o for o in blamed.dry if own_fills is not None and o.reservation_id in filled]
        if own_fills is not None and held:
            marks = replace(blamed, dry=held, spot_unavailable=None).unavailable_marks(
                result.errors
            )
            own_fills.marks.update(
                (o.reservation_id, mark)
                for o, mark in zip(held, marks, strict=True)
                if o.reservation_id
            )
            blamed = replace(blamed, dry=[o for o in blamed.dry if o not in held])
        if blamed.dry or blamed.spot_unavailable:
            self._p.unavailable.mark(blamed.unavailable_marks(result.errors))
            self._p.reservations.mark_exhausted(
                [o.reservation_id for o in blamed.dry if o.reservation_id]
            )

    def _remember_own_fills(
        self, own_fills: _OwnFills, progress: Sequence[_Progress], report: LaunchReport
    ) -> None:
        """Mark the reservations this serve's instances filled, except those where an instance
        was rolled back (terminated because a gang missed minCount): their slots are free."""
        if not own_fills.marks:
            return
        kept = {
            x.instance_id
            for item in progress
            for x in report.records[item.request.request_id].instances
        }
        freed = {
            x.capacity_reservation_id
            for x in own_fills.landings
            if x.capacity_reservation_id and x.instance_id not in kept
        }
        dry = [r for r in own_fills.marks if r not in freed]
        if len(dry) < len(own_fills.marks):  # counted as cache writes when EC2 answered
            skipped = len(own_fills.marks) - len(dry)
            report.cache_writes[RESERVED] = max(report.cache_writes.get(RESERVED, 0) - skipped, 0)
        if dry:
            self._p.unavailable.mark([own_fills.marks[r] for r in dry])
            self._p.reservations.mark_exhausted(dry)

    def _note_reservation_use(
        self, landings: Sequence[InstanceLanding], claim: _Claim | None
    ) -> None:
        """Slots taken by instances EC2 put in reservations, for every worker to see."""
        launched_into: dict[str, int] = {}
        for landing in landings:
            if landing.capacity_reservation_id:
                launched_into[landing.capacity_reservation_id] = (
                    launched_into.get(landing.capacity_reservation_id, 0) + 1
                )
        if claim is not None:
            launched_into.pop(claim.reservation_id, 0)  # claimed slots are taken already
        if launched_into:
            self._p.reservations.note_launched(launched_into)

    # -- the end of a request -----------------------------------------------------------------

    def _settle(
        self,
        item: _Progress,
        landings: Mapping[str, InstanceLanding],
        unavailable: Sequence[UnavailableOffering],
        candidates: Candidates,
        reservations: Mapping[str, ReservationSnapshot],
    ) -> RequestRecord:
        request = item.request
        pool_name = item.prepared.pool.metadata.name
        mine = [landings[i] for i in item.instance_ids if i in landings]
        if len(mine) < request.min_count:
            if mine:
                self._p.fleet.terminate([x.instance_id for x in mine])
                if not item.settled:  # the delivery that settled gave the slots back already
                    self._give_back_slots(mine)
                item.errors.append(
                    ErrorDetail(
                        code="MinCountNotMet",
                        message=f"launched {len(mine)} of minCount={request.min_count}; "
                        f"terminated {', '.join(x.instance_id for x in mine)}",
                    )
                )
            elif not item.errors:
                item.errors.append(
                    ErrorDetail(
                        code="InsufficientCapacity", message="no offering could serve the request"
                    )
                )
            mine = []
        types = self._landed_types(candidates, mine)
        counted = {x.instance_id: _counted(types.get(x.instance_type)) for x in mine}
        if item.granted:
            self._p.limits.settle(pool_name, request.request_id, counted)
        records = [
            _instance_record(x, item.prepared, types.get(x.instance_type), self._clock())
            for x in mine
        ]
        if item.settled:
            # An earlier delivery wrote these; events since (a stop, a termination) must stay.
            self._p.instances.adopt(records)
        else:
            self._p.instances.put(records)
        status = status_for(request.count, len(mine), request.min_count)
        return self._finish(item, mine, unavailable, status, item.errors, reservations)

    def _landed_types(
        self, candidates: Candidates, landed: Sequence[InstanceLanding]
    ) -> Mapping[str, InstanceTypeInfo]:
        """The facts of every type that landed. A replay serves the instances its predecessor
        launched with the candidates of the pool as applied now: a pool applied again meanwhile
        with other instance types (or another NodeClass's zones) does not name theirs, and an
        instance counted without them would hold its pool's and its quota's usage for none of
        its CPUs, memory or GPUs."""
        known = candidates.instance_types
        missing = [x for x in landed if x.instance_type not in known]
        if not missing:
            return known
        zones = sorted({x.zone for x in missing})
        names = sorted({x.instance_type for x in missing})
        return {**known, **{f.name: f for f in self._p.catalog.offered(zones, names)}}

    def _roll_back_zone(
        self, active: Sequence[_Progress], seen: list[InstanceLanding]
    ) -> list[InstanceLanding]:
        """Terminate what a single-zone group got in a zone that cannot hold its minCount."""
        ids = [i for item in active for i in item.instance_ids]
        landed = [x for x in seen if x.instance_id in ids]
        zone = landed[0].zone if landed else "its zone"
        self._p.fleet.terminate(ids)
        self._give_back_slots(landed)
        for item in active:
            if item.instance_ids:
                item.errors.append(
                    ErrorDetail(
                        code=ZONE_ROLLED_BACK,
                        message=f"singleZone: {zone} held {len(ids)} of minCount="
                        f"{item.request.min_count}; terminated {', '.join(item.instance_ids)} "
                        "and tried another zone",
                    )
                )
                item.instance_ids = []
        return [x for x in seen if x.instance_id not in ids]

    def _give_back_slots(self, terminated: Sequence[InstanceLanding]) -> None:
        """Reservation slots of instances a failed gang terminated are free again at once."""
        freed: dict[str, int] = {}
        for landing in terminated:
            if landing.capacity_reservation_id:
                reservation = landing.capacity_reservation_id
                freed[reservation] = freed.get(reservation, 0) + 1
        for reservation_id, count in sorted(freed.items()):
            self._p.reservations.give_back(reservation_id, count)

    def _finish(
        self,
        item: _Progress,
        landings: Sequence[InstanceLanding],
        unavailable: Sequence[UnavailableOffering],
        status: RequestStatus,
        errors: Sequence[ErrorDetail],
        reservations: Mapping[str, ReservationSnapshot] | None = None,
    ) -> RequestRecord:
        request = item.request
        if item.reclaim is not None and not landings:
            errors = self._request_reclaim(item, item.reclaim, errors)
        record = RequestRecord(
            request_id=request.request_id,
            node_pool=item.prepared.pool.metadata.name,
            requester=request.requester,
            status=status,
            requested=request.count,
            launched=len(landings),
            instances=[_launched(x, reservations or {}) for x in landings],
            unavailable_offerings=list(unavailable),
            errors=list(errors),
            received_at=item.prepared.received_at,
            finished_at=self._clock(),
        )
        self._p.records.put_record(record)
        return record

    def _request_reclaim(
        self, item: _Progress, refused: QuotaExceeded, errors: Sequence[ErrorDetail]
    ) -> list[ErrorDetail]:
        """The request ends with nothing, refused where its own nominal quota is lent out: ask
        for it back, and name the reclaim in that pool's error (docs/quotas.md, Reclaim)."""
        if self._p.reclaims is None:
            return list(errors)
        note = self._p.reclaims.request(refused, item.request.request_id, item.request.requester)
        refusal = str(refused)
        return [
            ErrorDetail(code=e.code, message=e.message + note) if e.message.endswith(refusal) else e
            for e in errors
        ]

    def _candidates(
        self,
        lead: Prepared,
        subnets: Mapping[str, Sequence[str]],
        sources: list[ReservationSource],
        image_platform: str | None,
        image_architecture: ImageArchitecture | None,
    ) -> Candidates:
        requirements = lead.requirements
        pinned = _pinned_instance_types(requirements)
        types: list[InstanceTypeInfo] = self._p.catalog.offered(subnets.keys(), pinned)
        return find_candidates(
            requirements,
            types,
            subnets.keys(),
            _capacity_types(lead),  # type: ignore[arg-type]
            sources,
            image_platform=image_platform or LINUX,
            named_reservations=selection_of(lead.node_class).named_ids(),
            image_architecture=image_architecture,
        )

    def _never_fits(
        self, lead: Prepared, candidates: Candidates, per_instance: Resources
    ) -> str | None:
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
            stored = self._p.limits.stored_limits(lead.pool.metadata.name)
            exceeded = need.fits_within(stored) if stored is not None else []
        if exceeded:
            return (
                f"minCount={lead.request.min_count} of the smallest candidate exceeds node pool "
                f"{lead.pool.metadata.name} limits on {', '.join(exceeded)}: it can never fit"
            )
        return None


def _reservations_by_id(sources: Sequence[ReservationSource]) -> dict[str, ReservationSnapshot]:
    return {r.reservation_id: r for source in sources for r in source.reservations}


def _launched(
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


def _hand_out(
    intent: LaunchIntent, result: FleetResult, active: Sequence[_Progress]
) -> list[tuple[list[str], Mapping[str, str]]]:
    """Each request gets its share of the fleet's instances; the tags each share still needs."""
    by_request = intent.split(result.instance_ids)
    retags: list[tuple[list[str], Mapping[str, str]]] = []
    for item in active:
        mine = by_request.get(item.request.request_id, [])
        item.instance_ids += mine
        if len(intent.shares) > 1 and mine:
            # One fleet served several requests: each request's instances get its own tags.
            retags.append((mine, own_request_tags(item.prepared.node_class, item.request)))
    return retags


def _owner(active: Sequence[_Progress], request_id: str) -> LaunchRequest:
    return next(p.request for p in active if p.request.request_id == request_id)


def _mark_launching(progress: Sequence[_Progress], intent: LaunchIntent) -> None:
    for item in progress:
        if item.request.request_id in intent.request_ids:
            item.launching = True


def _counted(info: InstanceTypeInfo | None) -> Resources:
    """What one launched instance counts against its pool (an unknown type still counts as one)."""
    return info.resources() if info is not None else Resources(instances=1)


def _in_target(landing: InstanceLanding, reservation_id: str) -> InstanceLanding:
    """A reserved attempt is `capacity-reservations-only` with one target: an instance EC2 has
    not described yet (only the CreateFleet answer is known) can only be in that reservation."""
    if landing.capacity_reservation_id is not None or landing.capacity_type == SPOT:
        return landing
    return replace(landing, capacity_type=RESERVED, capacity_reservation_id=reservation_id)


def _as_launched(landing: InstanceLanding, targets: Mapping[str, str | None]) -> InstanceLanding:
    """A replayed reserved intent's instance as it was launched: in the intent's reservation,
    though that reservation may have ended since (EC2 then reports it On-Demand, unnamed)."""
    target = targets.get(landing.instance_id)
    return _in_target(landing, target) if target else landing


def _all_unavailable(usable: Candidates) -> str:
    reasons = sorted({s.reason for s in usable.skipped})
    return f"every offering is unavailable now ({', '.join(reasons)})"


def _by_pool(items: Sequence[_Progress]) -> list[list[_Progress]]:
    groups: dict[str, list[_Progress]] = {}
    for item in items:
        groups.setdefault(item.prepared.pool.metadata.name, []).append(item)
    return list(groups.values())


def _scope(requirements: Requirements, subnets: Mapping[str, Sequence[str]]) -> ReservationScope:
    """The reservations a request could launch into: its subnets' zones, its pinned types."""
    pinned = _pinned_instance_types(requirements)
    return ReservationScope(frozenset(subnets), frozenset(pinned) if pinned is not None else None)


def _pinned_instance_types(requirements: Requirements) -> list[str] | None:
    values = [
        r for r in requirements.to_list() if r.key == INSTANCE_TYPE and str(r.operator) == "In"
    ]
    if not values:
        return None
    return sorted({v for r in values for v in r.values})


def _from_invalid_body(record: RequestRecord) -> bool:
    return record.status is RequestStatus.REJECTED and all(
        e.code == InvalidLaunchRequest.code for e in record.errors
    )


def _missing_reservations(
    lead: Prepared, sources: Sequence[ReservationSource]
) -> list[ErrorDetail]:
    """Reservation ids the NodeClass names that EC2 does not have active: said in the record."""
    return [
        ErrorDetail(
            code="CapacityReservationNotFound",
            message=f"{field}: NodeClass {lead.node_class.metadata.name}: capacity reservation "
            f"{reservation_id} does not exist or is not active; it was not used",
        )
        for field, reservation_id in selection_of(lead.node_class).missing(sources)
    ]


def _unknown_values(lead: Prepared, unknown: UnknownRequirementValues) -> str:
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


def _unavailable(offering: Offering, reason: str) -> UnavailableOffering:
    return UnavailableOffering(
        instance_type=offering.instance_type,
        zone=offering.zone,
        capacity_type=offering.capacity_type,
        capacity_reservation_id=offering.reservation_id,
        reason=reason,
    )


def _no_offering(lead: Prepared, subnets: Mapping[str, Sequence[str]]) -> str:
    return (
        f"requirements: no instance type, zone and capacity type of node pool "
        f"{lead.pool.metadata.name} matches in the node class's zones {sorted(subnets)}"
    )


def _capacity_types(lead: Prepared) -> list[str]:
    """The capacity types the pool allows, narrowed by the request."""
    return lead.requirements.allowed_values(CAPACITY_TYPE, lead.pool.spec.allowed_capacity_types())


def _no_reservation(lead: Prepared, as_of: float | None) -> str:
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


def _instance_record(
    landing: InstanceLanding, prepared: Prepared, info: InstanceTypeInfo | None, now: datetime
) -> InstanceRecord:
    resources = info.resources() if info else Resources.ZERO
    return InstanceRecord(
        instance_id=landing.instance_id,
        request_id=prepared.request.request_id,
        node_pool=prepared.pool.metadata.name,
        node_class=prepared.node_class.metadata.name,
        requester=prepared.request.requester,
        instance_type=landing.instance_type,
        zone=landing.zone,
        capacity_type=landing.capacity_type,
        capacity_reservation_id=landing.capacity_reservation_id,
        cpu=resources.cpu,
        memory_mib=resources.memory_mib,
        gpu=resources.gpu,
        launched_at=now.isoformat(),
        request_tags=own_tags(prepared.node_class, prepared.request),
    )
