"""The invariants of placement (issue 15), team quotas (issue 17) and GPU reservations on the clock
(issue 16), checked beside the base ones in invariants.py.

Placement is judged on the request's one valid body and on the pools as the operator had them when
the request ended; where a NodePool or NodeClass changed within the launchers' configuration cache
(plus a second) of the request's life, the judgement on pools is skipped (a warm container may
have served it from its copy) and counted apart.

Quota bounds are judged on what EC2 runs (the instances' requester tags and their types'
resources), not on what admission wrote, so they hold whatever later releases them (reclaim,
terminations): a bound can only be broken by an instance running. Stopped instances the
simulation starts again are left out, as for pool limits (the start is the user's).

Reservations are judged from the emulator's own state: an instance is judged once, when first
seen, against the reservation it is in (active by then, not after its end, in its market).
"""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.capacity.reservations import BLOCK_BOOT_MARGIN, BLOCK_TERMINATION_LEAD
from tests.simulation.operations import COHORT, QUOTA_POOLS, QUOTAS
from tests.simulation.world import LIVE, Observed

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants, Request

# A block's instances are terminated this long before its end ("Capacity Blocks for ML").
BLOCK_TERMINATION_SECONDS = 30 * 60
# The service launches into no block from this long before its end: EC2's 30 minutes plus the
# boot margin an instance needs to be of use (docs/placement.md, Capacity Blocks).
BLOCK_LAST_LAUNCH_SECONDS = (BLOCK_TERMINATION_LEAD + BLOCK_BOOT_MARGIN).total_seconds()
# Between the launcher's decision and EC2's launch time: one CreateFleet, its retries included.
DECISION_TO_LAUNCH_SLACK = 60.0
# moto stamps launch times to the second.
LAUNCH_TIME_SLACK = 1.0
# An ODCR with a limited end date "is cancelled within an hour from the specified time" (EC2 API
# Reference, CreateCapacityReservation, EndDate): it takes launches until then, as the emulator
# does (EndDateSettings' lag); a Capacity Block ends at its end date exactly.
END_DATE_HOUR = 3600.0


def _ending_hour(kind: str) -> float:
    """How long after its end date a reservation of `kind` may still be active."""
    return END_DATE_HOUR if kind == "default" else 0.0


POOL_PASSED_OVER = "NodePoolPassedOver"
QUOTA_EXCEEDED = "QuotaExceeded"
# "CapacityQuota quota-a: NodePool pool-1, cpu: ..." or "no CapacityQuota: NodePool pool-1: ..."
QUOTA_MESSAGE = re.compile(
    r"^(?:CapacityQuota (?P<quota>[a-z0-9-]+)|no CapacityQuota): NodePool (?P<flavor>[a-z0-9-]+)"
    r"(?:, (?P<resource>[a-z./]+))?: "
)
# The resource names of quotas, and the attribute admission keeps each under.
ATTRIBUTES = {
    "cpu": "cpu",
    "memory": "memoryMiB",
    "nvidia.com/gpu": "gpu",
    "instances": "instances",
}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
CPU = "karpenter.k8s.aws/instance-cpu"
SUCCEEDED = ("Fulfilled", "PartiallyFulfilled")
# A pool's answers that pass a request naming no pool on to the next (docs/placement.md): its
# limits, its quota (as Kueue tries the next flavor), no offering it could launch now (issue 15:
# "at its limit or dry"), and a NodeClass it refers to that is missing or no longer valid
# (resolve_next skips such a pool).
FALLS_BACK = (
    "LimitExceeded",
    QUOTA_EXCEEDED,
    "NoOffering",
    "UnknownNodeClass",
    "InvalidNodeClass",
    "NodeClassNotReady",
)


def _requirements(document_or_body: dict[str, Any]) -> dict[str, set[str]]:
    """key → allowed values, for the `In` requirements (the only ones that name values here)."""
    spec = document_or_body.get("spec", document_or_body)
    found: dict[str, set[str]] = {}
    for requirement in spec.get("requirements") or []:
        if requirement["operator"] == "In":
            values = set(requirement["values"])
            found[requirement["key"]] = found.get(requirement["key"], values) & values
    return found


def compatible(pool: dict[str, Any], body: dict[str, Any]) -> bool:
    """A request only narrows a pool: every value it names for a key the pool limits is allowed.
    A static pool (spec.replicas) is compatible with no producer's request."""
    if pool["spec"].get("replicas") is not None:
        return False
    allowed = _requirements(pool)
    return all(
        values <= allowed[key] for key, values in _requirements(body).items() if key in allowed
    )


def _allows_reserved(pool: dict[str, Any], body: dict[str, Any]) -> bool:
    types = [_requirements(pool), _requirements(body)]
    return all("reserved" in found.get(CAPACITY_TYPE, {"reserved"}) for found in types)


def candidates(pools: dict[str, dict[str, Any]], body: dict[str, Any]) -> list[str]:
    """The pools a request naming none is tried in, by weight: the compatible ones; a request
    that may wait (waitForCapacityUntil) goes first to those allowing reserved capacity, when
    some do (docs/contracts.md: it may wait for scheduled reservations there)."""
    fit = [p for p in order(pools) if compatible(pools[p], body)]
    if "waitForCapacityUntil" not in body:
        return fit
    return [p for p in fit if _allows_reserved(pools[p], body)] or fit


def order(pools: dict[str, dict[str, Any]]) -> list[str]:
    """Compatible pools are tried highest weight first, equal weights by name."""
    return sorted(pools, key=lambda name: (-int(pools[name]["spec"].get("weight", 0)), name))


class CapacityInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        self._judged: set[str] = set()  # instances judged at first sight
        self._over: set[str] = set()  # quota overruns already reported

    def _violate(self, invariant: str, detail: str) -> None:
        self.base._violate(invariant, detail)

    # -- every step -----------------------------------------------------------------------------

    def every_step(self) -> None:
        reservations = self.world.reservations()
        self._launches_into_active_reservations(reservations)
        self._ended_blocks_run_nothing(reservations)
        self._quotas_hold()

    def _launches_into_active_reservations(self, reservations: dict[str, Any]) -> None:
        for observed in list(self.world.instances.values()):
            if observed.instance_id in self._judged:
                continue
            self._judged.add(observed.instance_id)
            if observed.state not in LIVE:
                # Ended before we looked (a block's last 30 minutes end it at once): EC2 no
                # longer says which reservation it was in.
                self.checks["instances ended before first seen (not judged)"] += 1
                continue
            view = reservations.get(observed.reservation_id or "")
            self.checks["market type is the reservation's"] += 1
            if view is None:
                if observed.lifecycle == "capacity-block":
                    self._violate(
                        "market type is the reservation's",
                        f"{observed.instance_id} runs in the capacity-block market in no block",
                    )
                continue
            self.checks[f"seen: an instance launched into a {view.kind} reservation"] += 1
            if view.kind == "capacity-block" and observed.lifecycle != "capacity-block":
                self._violate(
                    "market type is the reservation's",
                    f"{observed.instance_id} in block {view.reservation_id} was launched in"
                    f" market {observed.lifecycle or 'on-demand'}, not capacity-block",
                )
            self._not_into_an_ending_block(observed, view)
            self.checks["nothing launches into a non-active reservation"] += 1
            launched = observed.launched_at
            early = launched + LAUNCH_TIME_SLACK < view.active_from
            ends = None if view.end is None else view.end + _ending_hour(view.kind)
            late = ends is not None and launched >= ends
            if early or late:
                self._violate(
                    "nothing launches into a non-active reservation",
                    f"{observed.instance_id} for {observed.request_id} launched at"
                    f" {launched:.0f} into {view.kind} {view.reservation_id}, active from"
                    f" {view.active_from:.0f} to {view.end}, now {view.state}",
                )

    def _not_into_an_ending_block(self, observed: Observed, view: Any) -> None:
        """Issue 27: an instance in a block was launched before the block's last 45 minutes
        (EC2 terminates it from 30 minutes before the end; the service keeps a boot margin)."""
        if view.kind != "capacity-block" or view.end is None:
            return
        self.checks["nothing launches into an ending block"] += 1
        last_launch = view.end - BLOCK_LAST_LAUNCH_SECONDS + DECISION_TO_LAUNCH_SLACK
        if observed.launched_at >= last_launch:
            self._violate(
                "nothing launches into an ending block",
                f"{observed.instance_id} for {observed.request_id} launched at"
                f" {observed.launched_at:.0f} into block {view.reservation_id} ending"
                f" {view.end:.0f}: within its last {BLOCK_LAST_LAUNCH_SECONDS / 60:.0f} minutes",
            )

    def _ended_blocks_run_nothing(self, reservations: dict[str, Any]) -> None:
        now = self.world.now
        for view in reservations.values():
            if view.kind != "capacity-block" or view.end is None:
                continue
            if now < view.end - BLOCK_TERMINATION_SECONDS:
                continue
            self.checks["an ending block runs nothing"] += 1
            running = sorted(
                o.instance_id
                for o in self.world.instances.values()
                if o.reservation_id == view.reservation_id and o.state in LIVE
            )
            if running:
                self._violate(
                    "an ending block runs nothing",
                    f"block {view.reservation_id} ({view.state}, ends {view.end:.0f}, now"
                    f" {now:.0f}) still runs {running}",
                )

    def _counted(self) -> list[Observed]:
        """Live instances as the service's launches left them (restarts are the user's)."""
        return [
            o
            for o in self.world.instances.values()
            if o.state in LIVE and o.instance_id not in self.world.restarted
        ]

    def _usage(self, instances: list[Observed]) -> dict[tuple[str, str, str], int]:
        """(requester, pool, resource) → what those instances use."""
        usage: dict[tuple[str, str, str], int] = defaultdict(int)
        for observed in instances:
            if observed.pool not in QUOTA_POOLS or not observed.requester:
                continue
            for resource, amount in self.world.instance_resources(observed.instance_type).items():
                usage[(observed.requester, observed.pool, resource)] += amount
        return usage

    def _quotas_hold(self) -> None:
        """Each applied quota within its most, and its cohort within the sum of the applied
        quotas' nominal amounts. A quota that is not applied (deleted, its re-apply refused)
        covers nobody: its requesters' instances count for their pools only, in no cohort
        (docs/quotas.md), so neither they nor its nominal quota are the cohort's."""
        usage = self._usage(self._counted())
        applied = self.base.catalog.quotas
        over: set[str] = set()
        for pool in QUOTA_POOLS:
            cohort_used: dict[str, int] = defaultdict(int)
            cohort_nominal: dict[str, int] = defaultdict(int)
            for name, (requesters, _, borrowing, amounts) in QUOTAS.items():
                if name not in applied:
                    continue
                for resource, (nominal, borrowing_limit, _) in amounts.items():
                    used = sum(usage.get((r, pool, resource), 0) for r in requesters)
                    cohort_used[resource] += used
                    cohort_nominal[resource] += int(nominal)
                    if borrowing and borrowing_limit is None:
                        continue  # bounded by the cohort only
                    most = int(nominal) + (int(borrowing_limit or 0) if borrowing else 0)
                    if used > int(nominal):
                        self.checks["seen: a quota borrowing (steps)"] += 1
                    self.checks["quota usage <= nominal + borrowingLimit"] += 1
                    if used > most:
                        self._report_over(
                            over,
                            "quota usage <= nominal + borrowingLimit",
                            f"{name}/{pool}/{resource}",
                            f"CapacityQuota {name}: NodePool {pool}: {resource} used {used},"
                            f" most {most}; {self._who(pool, requesters)}",
                        )
            # The cohort and, when a Cohort gives it a parent, each level of its tree
            # (cohort_invariants.py): the flat cohort's bound is the sum of nominal quotas.
            held = self._held(pool)
            for resource, used in cohort_used.items():
                self.base.cohorts.judge(
                    pool, resource, cohort_nominal[resource], used, held.get(resource)
                )
        self._over = over

    def _held(self, pool: str) -> dict[str, Decimal]:
        """What the cohort's quota usage item holds in `pool` for its members, by resource
        (leases in flight too), read from moto's backend (no call)."""
        item = self.world.partition(f"QuotaUsage#{COHORT}#{pool}").get("Usage") or {}
        held: dict[str, Decimal] = defaultdict(Decimal)
        for resource, attribute in ATTRIBUTES.items():
            for name, value in item.items():
                if name.startswith(f"u:{attribute}:"):
                    held[resource] += Decimal(str(value))
        return held

    def _report_over(self, over: set[str], invariant: str, key: str, detail: str) -> None:
        over.add(key)
        if key not in self._over:  # one violation per overrun, not per step it lasts
            self._violate(invariant, detail)

    def _who(self, pool: str, requesters: list[str] | None) -> str:
        parts = sorted(
            f"{o.instance_id}<{o.request_id} {o.requester} {o.instance_type}>"
            for o in self._counted()
            if o.pool == pool and (requesters is None or o.requester in requesters)
        )
        return "live: " + ", ".join(parts)

    def _counted_for(self, pool: str, requester: str) -> str:
        """What the pool's usage counts for the requester's live instances and leases: each
        member's amounts and the quota usage it holds (none: counted for the pool only)."""
        live = {
            o.instance_id
            for o in self.world.instances.values()
            if o.pool == pool and o.requester == requester and o.state in LIVE
        }
        parts = []
        for item in self.world.counted_items(pool):
            sk = str(item["sk"])
            subject = sk.split("#", 1)[1]
            if subject not in live and item.get("requester") != requester:
                continue
            amounts = " ".join(
                f"{a}={item[a]}" for a in ATTRIBUTES.values() if a in item and item[a] != "0"
            )
            parts.append(f"{sk} [{amounts}] holds {item.get('quotaUsage') or 'no quota usage'}")
        missing = sorted(i for i in live if not any(p.startswith(f"Member#{i} ") for p in parts))
        parts += [f"{i} not counted" for i in missing]
        return "counted: " + (", ".join(sorted(parts)) or "nothing")

    # -- after quiescence -----------------------------------------------------------------------

    def after_quiescence(self, records: dict[str, dict[str, Any] | None]) -> None:
        self._quota_usage_matches_ec2()
        for request_id, record in records.items():
            if record is None or record.get("status") == "<malformed>":
                continue
            request = self.base.ledger.requests[request_id]
            self._gang_holds(request, record)
            self._quota_refusal_named(request, record)
            self._lands_in_its_pool(request, record)

    def _quota_usage_matches_ec2(self) -> None:
        """What admission recorded per requester equals what EC2 runs for it, once quiet; nothing
        for a requester whose quota is not applied now (a re-apply after a delete can fail): the
        sync drops a member's hold when no quota covers it any more (docs/quotas.md)."""
        stored = self.world.stored_quota_usage()
        # A restarted instance counts against its quota again (the instance events count it with
        # its requester; docs/quotas.md), so every live instance is compared, restarts included.
        live = self._usage([o for o in self.world.instances.values() if o.state in LIVE])
        applied = self.base.catalog.quotas
        for pool in QUOTA_POOLS:
            pk = f"QuotaUsage#{COHORT}#{pool}"
            for name, (requesters, _, _, amounts) in QUOTAS.items():
                for requester in requesters:
                    for resource in amounts:
                        recorded = stored.get((pk, f"{ATTRIBUTES[resource]}:{requester}"), 0)
                        running = live.get((requester, pool, resource), 0)
                        # Covered by no quota now (its re-apply failed): it holds none.
                        expected = running if name in applied else 0
                        self.checks["quota usage == EC2 (quiescent)"] += 1
                        if recorded != expected:
                            self._violate(
                                "quota usage == EC2 (quiescent)",
                                f"{pk} {requester} {resource}: recorded {recorded:g}, EC2 runs"
                                f" {running}{'' if name in applied else f' ({name} deleted)'};"
                                f" {self._who(pool, [requester])};"
                                f" {self._counted_for(pool, requester)}",
                            )

    def _gang_holds(self, request: Request, record: dict[str, Any]) -> None:
        body = request.body
        if body is None or record["status"] not in SUCCEEDED:
            return
        instances = record.get("instances") or []
        self.checks["a gang gets minCount, in one zone"] += 1
        if len(instances) < int(body.get("minCount", 1)):
            self._violate(
                "a gang gets minCount, in one zone",
                f"{request.request_id}: {record['status']} with {len(instances)} instances,"
                f" minCount {body.get('minCount')}",
            )
        if int(body.get("minCount", 1)) > 1:
            self.checks["seen: a gang served"] += 1
        zones = sorted({i["zone"] for i in instances})
        if body.get("singleZone") and len(zones) > 1:
            self._violate(
                "a gang gets minCount, in one zone",
                f"{request.request_id}: singleZone, instances in {zones}",
            )

    def _quota_refusal_named(self, request: Request, record: dict[str, Any]) -> None:
        """A refusal names quota, flavor and resource; a requester no quota covers never runs in
        a pool quotas cover."""
        pool = record.get("nodePool")
        requester = record.get("requester")  # of the body the service served
        for error in record.get("errors") or []:
            if error.get("code") != QUOTA_EXCEEDED:
                continue
            self.checks["QuotaExceeded names quota, flavor, resource"] += 1
            self.checks["seen: a request refused by a quota"] += 1
            named = QUOTA_MESSAGE.match(error.get("message", ""))
            ok = (
                named is not None
                and named["flavor"] == pool
                and record["status"] == "Failed"
                and (named["quota"] is None or named["resource"] is not None)
                and (named["quota"] is None or requester in QUOTAS.get(named["quota"], ([],))[0])
            )
            if not ok:
                self._violate(
                    "QuotaExceeded names quota, flavor, resource",
                    f"{request.request_id} ({record['status']} in {pool}, requester"
                    f" {requester}): {error.get('message')}",
                )
        covered = any(requester in q[0] for q in QUOTAS.values())
        if request.body is not None and pool in QUOTA_POOLS and not covered:
            self.checks["uncovered requesters stay out of quota pools"] += 1
            if record.get("instances"):
                self._violate(
                    "uncovered requesters stay out of quota pools",
                    f"{request.request_id} (requester {requester}) launched"
                    f" {[i['instanceId'] for i in record['instances']]} in {pool}",
                )

    def _settled_catalog(self, request: Request) -> bool:
        """No pool or class changed while the request was served. A change before it was
        submitted governs it at once, whatever copy a launcher holds: a lease conditions on the
        revisions of the pool and class the request was resolved with (there is no slack for
        the launchers' configuration cache)."""
        start = request.submitted_at
        end = request.ended_at if request.ended_at is not None else self.world.now
        return not any(start <= moment <= end for moment in self.base.catalog.changed_at)

    def _lands_in_its_pool(self, request: Request, record: dict[str, Any]) -> None:
        body = request.body
        if body is None:
            return
        if not body.get("nodePool"):
            self._tries_every_pool(request, record)
        if record["status"] == "Rejected":
            return
        pool = record.get("nodePool")
        settled = self._settled_catalog(request) and pool in request.pools_at_end
        if body.get("nodePool"):
            self.checks["a request lands in a compatible pool"] += 1
            if pool != body["nodePool"]:
                self._violate(
                    "a request lands in a compatible pool",
                    f"{request.request_id} named {body['nodePool']}, served by {pool}",
                )
            elif settled:
                self._instances_fit(request, record, request.pools_at_end[pool])
            return
        if not self._settled_catalog(request) or not request.pools_at_end:
            self.checks["pool judgements skipped (configuration changed)"] += 1
            return
        pools = request.pools_at_end
        self.checks["a request lands in a compatible pool"] += 1
        if pool not in pools or not compatible(pools[pool], body):
            self._violate(
                "a request lands in a compatible pool",
                f"{request.request_id} ({body.get('requirements')}) served by {pool},"
                f" {'unknown' if pool not in pools else 'incompatible'}",
            )
            return
        self._instances_fit(request, record, pools[pool])
        earlier = candidates(pools, body)
        passed = earlier[: earlier.index(pool)] if pool in earlier else []
        named = " ".join(
            e.get("message", "")
            for e in record.get("errors") or []
            if e["code"] == POOL_PASSED_OVER
        )
        self.checks["a fallback names the pools passed over"] += 1
        if passed:
            self.checks["seen: a request served by a lower-weight pool"] += 1
        missing = [p for p in passed if f"nodePool {p}:" not in named]
        if missing:
            self._violate(
                "a fallback names the pools passed over",
                f"{request.request_id}: {record['status']} in {pool} (weight"
                f" {pools[pool]['spec'].get('weight')}), higher pools {passed}, the record"
                f" names none of {missing}: {record.get('errors')}",
            )

    def _tries_every_pool(self, request: Request, record: dict[str, Any]) -> None:
        """A request naming no pool that a pool could not take because of its limits, its quota
        or its offerings goes on to the next compatible pool; only the last one's answer stands."""
        body = request.body or {}
        pools = request.pools_at_end
        errors = record.get("errors") or []
        pool = record.get("nodePool")
        if pool is None and errors:  # refused while resolving: the message names the pool
            named = re.search(r"NodePool (\S+) refers to", errors[-1].get("message", ""))
            pool = named.group(1) if named else None
        if record.get("instances") or not errors or pool not in pools:
            return
        final = errors[-1]["code"]
        if final not in FALLS_BACK or not self._settled_catalog(request):
            return
        ordered = [p for p in candidates(pools, body) if self._viable(request, pools[p], body)]
        later = ordered[ordered.index(pool) + 1 :] if pool in ordered else []
        self.checks["a fallback tries every compatible pool"] += 1
        if later:
            self._violate(
                "a fallback tries every compatible pool",
                f"{request.request_id} ended {record['status']} {final} in {pool} (weight"
                f" {pools[pool]['spec'].get('weight')}) without trying {later}:"
                f" {errors[-1]['message']}",
            )

    def _viable(self, request: Request, pool: dict[str, Any], body: dict[str, Any]) -> bool:
        """Compatible, its NodeClass there, and no tag of the request that the class sets."""
        node_class = request.classes_at_end.get(pool["spec"]["nodeClassRef"])
        if node_class is None or not compatible(pool, body):
            return False
        owned = node_class["spec"].get("tags") or {}
        return not any(k in owned and owned[k] != v for k, v in (body.get("tags") or {}).items())

    def _instances_fit(
        self, request: Request, record: dict[str, Any], pool: dict[str, Any]
    ) -> None:
        allowed = _requirements(pool)
        wanted = _requirements(request.body or {})
        reservations = self.world.reservations()
        for instance in record.get("instances") or []:
            self.checks["instances fit pool and request"] += 1
            facts = {
                INSTANCE_TYPE: {instance["instanceType"]},
                CAPACITY_TYPE: {instance["capacityType"]},
                ZONE: {instance["zone"]},
            }
            view = reservations.get(instance.get("capacityReservationId") or "")
            if view is not None and view.open:
                # EC2 runs an on-demand launch in a matching open reservation on its own (the
                # NodeClass's preference `open`): on-demand asked, reserved got, both fit.
                facts[CAPACITY_TYPE] |= {"on-demand"}
            wrong = [
                f"{key}={sorted(values)}"
                for key, values in facts.items()
                for rules in (allowed, wanted)
                if key in rules and not values & rules[key]
            ]
            if wrong:
                self._violate(
                    "instances fit pool and request",
                    f"{request.request_id}: {instance['instanceId']} has {sorted(set(wrong))},"
                    f" pool {pool['metadata']['name']} allows {allowed}, the request {wanted}",
                )
