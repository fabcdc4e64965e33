"""What must hold, checked all along a run: the ledger of what producers asked and what the
system answered, and the invariants over it, EC2 and the stored state.

How a lowered limit is judged: a NodePool whose limit is lowered below what it already holds is
not an overrun. From the lowering on, its ceiling is the larger of the new limit and what was
committed then (live instances plus unsettled leases, which were granted under the old limit).
At the next quiescence every such lease has settled or expired, so the allowance becomes what
runs then, and from there it only shrinks as those instances end: a pool over its limit may
never gain an instance the service launched.

A stopped instance a user starts again is counted at once, even past the limit (the instance
runs; docs/operations.md): such restarts are the user's, so they are not held against the
service. Live instances the simulation restarted are left out of the count judged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.backoff import HAND_BACK_CAP_SECONDS
from tests.simulation.block_end_invariants import BlockEndInvariants, OptInInvariants
from tests.simulation.capacity_invariants import CapacityInvariants
from tests.simulation.cohort_invariants import CohortInvariants
from tests.simulation.edge_invariants import RECLAIM_REQUESTED, EdgeInvariants
from tests.simulation.emulator import START
from tests.simulation.fair_share import Contention, within_bound
from tests.simulation.group_invariants import GroupInvariants
from tests.simulation.hub_fields import HubFieldsInvariants
from tests.simulation.pool_index import index_holds
from tests.simulation.priority_invariants import PriorityInvariants
from tests.simulation.queue_invariants import QueueInvariants
from tests.simulation.quota_generations import QuotaGenerations
from tests.simulation.reserved_first import ReservedFirst
from tests.simulation.static_invariants import StaticInvariants
from tests.simulation.unready_invariants import UnreadyInvariants
from tests.simulation.usage_invariants import UsageInvariants
from tests.simulation.versions import stored_as_meant
from tests.simulation.world import LIVE, World

if TYPE_CHECKING:
    from tests.simulation.operations import Catalog

# A healthy request ends within this many simulated seconds of its submission or of the last
# disturbance (fault cleared, crashed message visible again), whichever is later: a message
# handed back just before a fault cleared returns after at most the longest hand-back wait.
LATENCY_BOUND_SECONDS = HAND_BACK_CAP_SECONDS + 60.0


@dataclass
class Violation:
    invariant: str
    detail: str
    at: float
    step: int

    def line(self) -> str:
        return f"[step {self.step}, t={self.at:.0f}s] {self.invariant}: {self.detail}"


@dataclass
class Request:
    request_id: str
    submitted_at: float
    submitted_step: int = 0
    counts: set[int] = field(default_factory=set)
    bodies: int = 0
    valid: bool = False
    ended_at: float | None = None
    ended_step: int | None = None
    outcomes: set[str] = field(default_factory=set)
    events: int = 0
    final_instances: frozenset[str] = frozenset()
    status: str | None = None
    exposed_to_permanent_fault: bool = False
    deliveries: int = 0
    handed_back: int = 0
    crashed: int = 0
    # The valid bodies sent under this id (JSON text → body): placement is judged on one body.
    valid_bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every distinct body sent under this id, valid or not (an invalid one binds the id too).
    distinct_bodies: set[str] = field(default_factory=set)
    # The pools as the operator had them when the request ended (name → document).
    pools_at_end: dict[str, dict[str, Any]] = field(default_factory=dict)
    classes_at_end: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A Launch Waiting event was published for it (issue 37): not an outcome, it waits.
    waited: bool = False

    @property
    def body(self) -> dict[str, Any] | None:
        return next(iter(self.valid_bodies.values())) if len(self.valid_bodies) == 1 else None


# The request id of a launch the sync sent for a static pool (domain static_request_id).
SYNC_LAUNCH = re.compile(r"static-.+-(\d{9,})-\d+")


@dataclass
class Disturbance:
    what: str
    start: float
    cleared: float | None = None
    permanent: bool = False


class Ledger:
    """Everything the invariants need to remember between steps."""

    def __init__(self) -> None:
        self.requests: dict[str, Request] = {}
        self.disturbances: list[Disturbance] = []
        self.limits: dict[str, int | None] = {}
        # pool → (step, what the operator did, the limit then): a finding tells its own story.
        self.limit_history: dict[str, list[tuple[int, str, int | None]]] = {}
        self.grace: dict[str, int] = {}
        self.instance_first_step: dict[str, int] = {}
        self.unknown_events: Counter[str] = Counter()

    def submitted(
        self,
        request_id: str,
        now: float,
        count: int | None,
        valid: bool,
        body: dict[str, Any] | None = None,
        step: int = 0,
        sent: str | None = None,
    ) -> None:
        request = self.requests.setdefault(request_id, Request(request_id, now, step))
        request.bodies += 1
        if sent is not None:
            request.distinct_bodies.add(sent)
        request.valid = request.valid or valid
        if count is not None:
            request.counts.add(count)
        if body is not None:
            request.valid_bodies[json.dumps(body, sort_keys=True)] = body

    def permanent_active(self) -> bool:
        return any(d.permanent and d.cleared is None for d in self.disturbances)

    def permanent_since(self, moment: float) -> bool:
        """Whether a permanent fault was active at some time from `moment` on."""
        return any(
            d.permanent and (d.cleared is None or d.cleared >= moment) for d in self.disturbances
        )

    def last_clear_before(self, moment: float) -> float:
        """When the last disturbance that began before `moment` stopped mattering."""
        latest = 0.0
        for disturbance in self.disturbances:
            if disturbance.start <= moment:
                cleared = moment if disturbance.cleared is None else disturbance.cleared
                latest = max(latest, min(cleared, moment))
        return latest

    def latency_after_clear(self, request: Request) -> float | None:
        if request.ended_at is None:
            return None
        since = max(request.submitted_at, self.last_clear_before(request.ended_at))
        return request.ended_at - since


class Invariants:
    def __init__(self, world: World, ledger: Ledger, seed: int, catalog: Catalog) -> None:
        self.world = world
        self.ledger = ledger
        self.seed = seed
        self.catalog = catalog
        self.violations: list[Violation] = []
        self.checks: Counter[str] = Counter()
        self.dead: set[str] = set()
        self._over_limit: set[str] = set()
        # Pools whose lowered-limit allowance only shrinks now (past a quiescence).
        self._shrinking: set[str] = set()
        self._seen: set[tuple[str, str]] = set()
        self.step = 0
        self.capacity = CapacityInvariants(self)
        self.edges = EdgeInvariants(self)
        self.unready = UnreadyInvariants(self)
        self.priority = PriorityInvariants(self)
        self.queues = QueueInvariants(self)
        self.static = StaticInvariants(self)
        self.usage = UsageInvariants(self)
        self.block_end = BlockEndInvariants(self)
        self.opt_in = OptInInvariants(self)
        self.hub_fields = HubFieldsInvariants(self)
        self.cohorts = CohortInvariants(self)
        self.groups = GroupInvariants(self)  # the `groups` profile's ODCR group
        # The scheduler has `unready`, `reserved` and `quota_generations` watch the calls.
        self.reserved = ReservedFirst(self)
        self.quota_generations = QuotaGenerations(self)
        # The fair-share profile's contention phase, once started (fair_share.py).
        self.fair_share: Contention | None = None

    def _violate(self, invariant: str, detail: str) -> None:
        if (invariant, detail) in self._seen:
            return  # the same finding at a later quiescence
        self._seen.add((invariant, detail))
        self.violations.append(
            Violation(invariant, detail, self.world.now - START.timestamp(), self.step)
        )

    # -- every step -----------------------------------------------------------------------------

    def lowered(self, pool: str, new_limit: int | None, committed: int) -> None:
        old = self.ledger.limits.get(pool)
        if new_limit is not None and (old is None or new_limit < old):
            self.ledger.grace[pool] = max(self.ledger.grace.get(pool, 0), committed)
            self._shrinking.discard(pool)
        self.ledger.limits[pool] = new_limit
        self.ledger.limit_history.setdefault(pool, []).append(
            (self.step, f"applied (committed {committed})", new_limit)
        )

    def stored_as_meant(self, meant: dict[str, Any], written: str, stored: str | None) -> None:
        """Issue 26: a document applied in any served version stores the hub the simulation
        meant, so the service acts on what was meant (conversion loses nothing it acts on)."""
        self.checks["stored hub == hub meant"] += 1
        why = stored_as_meant(meant, stored)
        if why is not None:
            name = f"{meant['kind']} {meant['metadata']['name']}"
            self._violate("stored hub == hub meant", f"{name} written as {written}: {why}")

    def quota_applied(self, name: str, document: dict[str, Any]) -> None:
        self.edges.quota_applied(name, document)

    def deleted(self, pool: str) -> None:
        """A deleted pool keeps its last limit: its instances outlive it, and no launch may
        join them beyond that limit (a container's copy of it may serve a request for 10 s)."""
        self.ledger.limit_history.setdefault(pool, []).append(
            (self.step, "deleted", self.ledger.limits.get(pool))
        )

    def every_step(self, status_events: list[dict[str, Any]]) -> None:
        self._note_status_events(status_events)
        self._limits_hold()
        self._nothing_after_end()
        index_holds(self)
        self.capacity.every_step()
        self.edges.every_step()
        self.unready.every_step()
        self.priority.every_step()
        self.reserved.every_step()
        self.groups.every_step()  # after `reserved`: the step's launches noted
        self.queues.every_step()
        self.usage.every_step()
        if self.fair_share is not None:
            within_bound(self, self.fair_share)

    def _note_status_events(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            detail = event.get("detail", {})
            self.edges.event_published(event, len(json.dumps(event).encode()))
            if event.get("detail-type") == RECLAIM_REQUESTED:
                self.edges.reclaim_requested(detail)
            if "status" not in detail or "requestId" not in detail:
                continue  # reservation and instance events
            self.edges.request_outcome(detail)
            request_id = detail["requestId"]
            request = self.ledger.requests.get(request_id)
            if request is None:
                self.ledger.unknown_events[request_id] += 1
                continue
            if detail["status"] == "Waiting":
                request.waited = True  # it waits; its outcome comes later (queue_invariants.py)
                self.checks["a waiting request is announced"] += 1
                continue
            if _refuses_another_body(detail):
                # The answer to a different body under a used requestId, not this request's.
                self.checks["a requestId serves only its first body"] += 1
                if len(request.distinct_bodies | set(request.valid_bodies)) < 2:
                    self._violate(
                        "a requestId serves only its first body",
                        f"{request_id}: refused as RequestIdReused, yet one body was sent",
                    )
                continue
            instances = frozenset(i["instanceId"] for i in detail.get("instances", []))
            outcome = json.dumps([event["detail-type"], sorted(instances)])
            request.events += 1
            request.outcomes.add(outcome)
            if request.ended_at is None:
                request.ended_at = self.world.now
                request.ended_step = self.step
                request.final_instances = instances
                request.status = detail["status"]
                request.pools_at_end = dict(self.catalog.pools)
                request.classes_at_end = dict(self.catalog.classes)
            self.checks["one outcome per request"] += 1
            if len(request.outcomes) > 1:
                self._violate(
                    "one outcome per request",
                    f"{request_id} published different outcomes: {sorted(request.outcomes)}",
                )
            if len(instances) > max(request.counts or {0}):
                self._violate(
                    "launches at most count",
                    f"{request_id} reports {len(instances)} instances, count {request.counts}",
                )

    def _limits_hold(self) -> None:
        live = self.world.live_by_pool()
        for pool, running in live.items():
            limit = self.ledger.limits.get(pool)
            self.checks["live <= limit (every step)"] += 1
            running -= self._restarted_live(pool)
            if pool in self._shrinking and pool in self.ledger.grace:
                self.ledger.grace[pool] = min(self.ledger.grace[pool], running)
                if limit is not None and self.ledger.grace[pool] <= limit:
                    del self.ledger.grace[pool]
            ceiling = None if limit is None else max(limit, self.ledger.grace.get(pool, 0))
            if ceiling is None or running <= ceiling:
                self._over_limit.discard(pool)
                continue
            if pool in self._over_limit:
                continue  # one violation per overrun, not one per step it lasts
            self._over_limit.add(pool)
            self._violate(
                "live <= limit (every step)",
                f"pool {pool}: {running} live, limit {limit}"
                + (f" (grace {self.ledger.grace[pool]})" if self.ledger.grace.get(pool) else "")
                + f"; usage item says {self.world.stored_usage().get(pool)}; "
                + self._limit_history(pool)
                + "; "
                + self._who_runs(pool),
            )

    def _restarted_live(self, pool: str) -> int:
        return sum(
            1
            for observed in self.world.instances.values()
            if observed.pool == pool
            and observed.state in LIVE
            and observed.instance_id in self.world.restarted
        )

    def _limit_history(self, pool: str, last: int = 8) -> str:
        history = self.ledger.limit_history.get(pool, [])
        told = [f"step {step} {what}, limit {limit}" for step, what, limit in history[-last:]]
        skipped = f"{len(history) - last} earlier, " if len(history) > last else ""
        return f"limit history: {skipped}{'; '.join(told) or 'none'}"

    def _who_runs(self, pool: str) -> str:
        """The live instances by request: when each request was submitted and ended, when each
        instance was first seen (the step it was admitted by, at the latest)."""
        by_request: dict[str, list[str]] = {}
        for observed in self.world.instances.values():
            if observed.pool == pool and observed.state in LIVE:
                first = self.ledger.instance_first_step.get(observed.instance_id, self.step)
                flag = " restarted" if observed.instance_id in self.world.restarted else ""
                by_request.setdefault(observed.request_id, []).append(
                    f"{observed.instance_id} seen step {first}{flag}"
                )
        parts = []
        for request_id, instances in sorted(by_request.items()):
            request = self.ledger.requests.get(request_id)
            when = "not submitted by the simulation"
            if request is not None:
                ended = (
                    "open"
                    if request.ended_step is None
                    else f"{request.status} at step {request.ended_step}"
                )
                when = f"submitted step {request.submitted_step}, {ended}"
            parts.append(f"{request_id} x{len(instances)} ({when}: {', '.join(sorted(instances))})")
        return "live: " + "; ".join(parts)

    def _nothing_after_end(self) -> None:
        for observed in self.world.instances.values():
            first = self.ledger.instance_first_step.setdefault(observed.instance_id, self.step)
            request = self.ledger.requests.get(observed.request_id)
            self.checks["never launches after end"] += 1
            if request is None:
                continue
            if (
                request.ended_step is not None
                and first > request.ended_step
                and observed.instance_id not in request.final_instances
            ):
                self._violate(
                    "never launches after end",
                    f"{observed.instance_id} for {observed.request_id} appeared at step {first},"
                    f" the request ended at step {request.ended_step}",
                )
                request.final_instances |= {observed.instance_id}

    # -- after quiescence -----------------------------------------------------------------------

    def after_quiescence(
        self,
        records: dict[str, dict[str, Any] | None],
        running_for: dict[str, dict[str, Any] | None],
    ) -> None:
        """`records`: the requests not checked before; `running_for`: the records of every
        request something runs for."""
        # Leases granted under an old limit have settled or expired: the allowance becomes what
        # runs now, and only shrinks from here.
        live = self.world.live_by_pool()
        for pool in list(self.ledger.grace):
            self.ledger.grace[pool] = live.get(pool, 0) - self._restarted_live(pool)
            self._shrinking.add(pool)
        self._usage_matches_ec2()
        self._snapshots_match_ec2()
        self._dead_letters_only_permanent()
        self._every_request_ends_once(records, self.dead)
        self._nothing_unnamed_runs(running_for)
        self.capacity.after_quiescence(records)
        self.groups.after_quiescence(records)
        self.edges.after_quiescence()
        self.usage.after_quiescence()

    def _usage_matches_ec2(self) -> None:
        live = self.world.live_by_pool()
        stored = self.world.stored_usage()
        for pool, limit in self.ledger.limits.items():
            if limit is None and pool not in stored:
                continue
            self.checks["usage == EC2 (quiescent)"] += 1
            if stored.get(pool, 0) != live.get(pool, 0):
                self._violate(
                    "usage == EC2 (quiescent)",
                    f"pool {pool}: usage records {stored.get(pool, 0)},"
                    f" EC2 runs {live.get(pool, 0)}",
                )

    def _snapshots_match_ec2(self) -> None:
        ec2 = self.world.ec2_availability()
        self.checks["snapshot == EC2 (quiescent)"] += 1
        try:
            snapshots = self.world.snapshot_availability()
        except Exception as error:  # the reads every launcher makes fail the same way
            empty_keys = [
                sk for sk, item in self.world.stored_reservation_items().items() if '"": ' in item
            ]
            self._violate(
                "snapshot == EC2 (quiescent)",
                f"the Reservation partition cannot be read ({type(error).__name__}: {error});"
                f" items with an empty-string attribute name: {empty_keys}",
            )
            return
        for reservation_id, available in snapshots.items():
            self.checks["snapshot == EC2 (quiescent)"] += 1
            if reservation_id not in ec2:
                continue  # cancelled: the next sync forgets it
            if available != ec2[reservation_id]:
                self._violate(
                    "snapshot == EC2 (quiescent)",
                    f"{reservation_id}: snapshot available {available}, EC2 {ec2[reservation_id]}",
                )

    def _dead_letters_only_permanent(self) -> None:
        for body in self.world.dead_letters():
            request_id = request_id_of(body)
            if request_id in self.dead:
                continue
            self.dead.add(request_id)
            self.checks["DLQ only permanent faults"] += 1
            request = self.ledger.requests.get(request_id)
            if request is None and self._sync_launch_exposed(request_id):
                continue
            if request is None or not request.exposed_to_permanent_fault:
                self._violate(
                    "DLQ only permanent faults",
                    f"{request_id} dead-lettered with no permanent fault: {body[:160]}",
                )

    def _sync_launch_exposed(self, request_id: str) -> bool:
        """A static pool's launch (docs/static-capacity.md: sent by the sync, not by the
        simulation, so not in the ledger) sent while or before a permanent fault held: its id
        says when it was sent (`static-<pool>-<epoch seconds>-<n>`)."""
        sent = SYNC_LAUNCH.fullmatch(request_id)
        return sent is not None and self.ledger.permanent_since(float(sent.group(1)))

    def _every_request_ends_once(
        self, records: dict[str, dict[str, Any] | None], dead: set[str]
    ) -> None:
        for request_id, record in records.items():
            request = self.ledger.requests[request_id]
            if request_id in dead and record is None:
                continue
            self.checks["every request ends once"] += 1
            if record is None:
                if request.ended_at is None:
                    self._violate(
                        "every request ends once",
                        f"{request_id}: no record, no status event, not in the DLQ (delivered"
                        f" {request.deliveries}x, handed back {request.handed_back}x, crashed"
                        f" {request.crashed}x)",
                    )
                else:
                    self._violate(
                        "every request ends once",
                        f"{request_id}: published {request.status} but has no record",
                    )
                continue
            if request.ended_at is None and request_id not in dead:
                # A dead-lettered request may have its record and no event: its group failed
                # after the record was written; a redrive publishes it.
                self._violate(
                    "every request ends once",
                    f"{request_id}: recorded {record['status']} but no status event was published",
                )
            recorded = frozenset(i["instanceId"] for i in record.get("instances", []))
            if request.ended_at is not None and recorded != request.final_instances:
                self._violate(
                    "every request ends once",
                    f"{request_id}: record names {sorted(recorded)}, the event"
                    f" {sorted(request.final_instances)}",
                )
            tagged = {
                o.instance_id for o in self.world.instances.values() if o.request_id == request_id
            }
            self.checks["launches at most count"] += 1
            if len(tagged) > int(record.get("requested") or 0) and record["status"] != "Rejected":
                self._violate(
                    "launches at most count",
                    f"{request_id}: {len(tagged)} instances tagged,"
                    f" requested {record['requested']}",
                )
            latency = self.ledger.latency_after_clear(request)
            if request.waited:
                # It waited for room (issue 37): it ends when room comes or by its deadline
                # (queue_invariants.py), not within the service's latency bound.
                continue
            self.checks["latency after last disturbance"] += 1
            if latency is not None and latency > LATENCY_BOUND_SECONDS:
                self._violate(
                    "latency after last disturbance",
                    f"{request_id}: ended {latency:.0f}s after submission or the last disturbance"
                    f" cleared (bound {LATENCY_BOUND_SECONDS:.0f}s); delivered"
                    f" {request.deliveries}x, handed back {request.handed_back}x, in"
                    f" {request.crashed} crashed invocation(s), ended {request.status}",
                )

    def _nothing_unnamed_runs(self, records: dict[str, dict[str, Any] | None]) -> None:
        for observed in self.world.instances.values():
            if observed.state not in LIVE:
                continue
            self.checks["nothing runs unnamed"] += 1
            record = records.get(observed.request_id)
            if record is None and observed.request_id in self.dead:
                continue  # parked in the DLQ: its intents name it, a redrive records it
            named = {i["instanceId"] for i in (record or {}).get("instances", [])}
            if observed.instance_id not in named:
                self._violate(
                    "nothing runs unnamed",
                    f"{observed.instance_id} ({observed.state}) runs for {observed.request_id!r},"
                    f" whose record {'does not exist' if record is None else 'does not name it'}",
                )


def request_id_of(body: str) -> str:
    try:
        parsed = json.loads(body)
    except RecursionError:  # a hostile body nested too deep: its id is at its start
        named = re.match(r'\{"requestId": "([^"]+)"', body)
        return named.group(1) if named else "<unparseable>"
    except ValueError:
        return "<unparseable>"
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), dict):
        parsed = parsed["detail"]
    return str(parsed.get("requestId", "<none>")) if isinstance(parsed, dict) else "<none>"


def _refuses_another_body(detail: dict[str, Any]) -> bool:
    errors = detail.get("errors") or []
    reused = bool(errors) and all(e["code"] == "RequestIdReused" for e in errors)
    return detail["status"] == "Rejected" and reused
