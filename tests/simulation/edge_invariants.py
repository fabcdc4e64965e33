"""The invariants of issue 24, where the newest features meet the core:

- **group usage <= group limits**: what a quota's requesters run summed over the flavors (pools)
  of a resource group stays within the group's `limits`, at every step. A limit set below what
  the group already holds is not an overrun: from the apply on, the ceiling is the larger of the
  limit and what was committed then (live instances plus every open lease in the group's pools,
  granted under the old document); at the next quiescence it becomes what runs, and only
  shrinks from there (as for pool limits, invariants.py).
- **a reclaim terminates only what the policy in force allows**: every instance the sync
  terminates (only reclaims terminate there) was named by an enforced `Capacity Reclaim
  Requested`, and the lender's `reclaimWithinCohort` and priorities as applied at that moment
  still allow taking it from its owner (`Any`; `LowerPriority` and a lower owner priority).
- **a reclaim names a request refused for quota** (issue 37, preemption by a waiting request):
  the request a `Capacity Reclaim Requested` names ends `Failed` or waits (`Waiting`) with a
  `QuotaExceeded` among its errors, in its next such event: a lender preempts only for a
  refusal of its own quota, whether it fails or waits. Any error naming the reclaim is that
  refusal (QuotaExceeded, or a pool passed over for quota). A request already waiting when it
  asked (woken and refused again, which publishes no status event) may be refused later for
  something else (its pool's limits) and end with that: an outcome naming no reclaim is then a
  later refusal's, not judged; one that had not waited yet is judged by that event as before.
- **every stored item within DynamoDB's 400 KB**, every status event within EventBridge's
  256 KB: items are measured as DynamoDB does (names plus values), read from moto's tables every
  few steps and at each quiescence, without an API call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.simulation import preemption_invariants as preemption
from tests.simulation.operations import QUOTA_POOLS, QUOTAS

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants
    from tests.simulation.world import SyncTermination

ITEM_LIMIT_BYTES = 400 * 1024
EVENT_LIMIT_BYTES = 256 * 1024
ITEM_CHECK_EVERY = 10  # steps
RECLAIM_REQUESTED = "Capacity Reclaim Requested"
ASKED_FOR_QUOTA = "a reclaim names a request refused for quota"


@dataclass(frozen=True)
class Reclaim:
    reclaim_id: str
    lender: str
    owner: str  # the quota of the instance's requester
    enforced: bool
    pool: str
    # A waiting request's preemption (issue 37): the event's detail and the victim's entry.
    preemption: tuple[dict[str, Any], dict[str, Any]] | None = None


class EdgeInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        self.group_limits: dict[str, dict[str, int]] = {}
        self._allowance: dict[str, int] = {}  # quota → instances committed at its last apply
        self._shrinking: set[str] = set()
        self._over: set[str] = set()
        self.reclaims: dict[str, Reclaim] = {}  # instance id → the reclaim naming it
        self._asking: dict[str, str] = {}  # request id → the reclaim it asked for, not yet seen end
        self._silent: set[str] = set()  # of those, asked while already waiting (no event then)
        # (requester, from, until): its quota was deleted then, so it was covered by none.
        self._uncovered: list[tuple[str, float, float]] = []

    def _violate(self, invariant: str, detail: str) -> None:
        self.base._violate(invariant, detail)

    # -- notes ----------------------------------------------------------------------------------

    def quota_applied(self, name: str, document: dict[str, Any]) -> None:
        limits = document["spec"]["resourceGroups"][0].get("limits") or {}
        self.group_limits[name] = {resource: int(value) for resource, value in limits.items()}
        if limits:
            committed = self._group_used(name) + sum(self.world.leased(p) for p in QUOTA_POOLS)
            self._allowance[name] = max(self._allowance.get(name, 0), committed)
            self._shrinking.discard(name)

    def uncovered(self, requester: str, start: float, end: float) -> None:
        self._uncovered.append((requester, start, end))

    def reclaim_requested(self, detail: dict[str, Any]) -> None:
        self.checks["seen: a reclaim requested"] += 1
        request_id = str(detail["requestId"])
        self._asking[request_id] = str(detail["reclaimId"])
        request = self.base.ledger.requests.get(request_id)
        if request is not None and request.waited:
            self._silent.add(request_id)
        else:
            self._silent.discard(request_id)
        for instance in detail.get("instances") or []:
            scope = instance.get("preemption")
            self.reclaims[instance["instanceId"]] = Reclaim(
                detail["reclaimId"],
                detail["quota"],
                instance["quota"],
                bool(detail.get("enforced")),
                detail["nodePool"],
                None if scope is None else (detail, instance),
            )
            if scope is not None:
                self._preemption_allowed(detail, instance, "asked")

    def _preemption_allowed(
        self, detail: dict[str, Any], victim: dict[str, Any], when: str
    ) -> bool:
        """Issue 37: the victim meets the preempting quota's policy as applied now."""
        quotas = self.base.catalog.quotas
        self.checks[preemption.ALLOWED] += 1
        self.checks[preemption.PRIORITY] += 1
        self.checks[f"seen: a preemption {when} ({victim['preemption']})"] += 1
        found = preemption.refused(
            victim["preemption"], quotas.get(detail["quota"]), quotas.get(victim["quota"]),
            victim, detail,
        )  # fmt: skip
        if found is not None:
            invariant, why = found
            self._violate(
                invariant,
                f"{when}: {detail['reclaimId']} for {detail['requestId']} ({detail['quota']})"
                f" names {victim['instanceId']} of {victim['quota']}: {why}",
            )
        return found is None

    def request_outcome(self, detail: dict[str, Any]) -> None:
        """A request's status event: if it asked for a reclaim, it fails or waits refused for
        quota (any other status: admitted since, the check is for its refusal's event)."""
        request_id = str(detail.get("requestId"))
        reclaim = self._asking.pop(request_id, None)
        silent = request_id in self._silent
        self._silent.discard(request_id)
        status = detail.get("status")
        if reclaim is None or status not in ("Failed", "Waiting"):
            return
        if status == "Waiting":
            self.checks["seen: a waiting request asked for a reclaim"] += 1
        errors = detail.get("errors") or []
        codes = [e.get("code") for e in errors]
        naming = [e for e in errors if reclaim in str(e.get("message", ""))]
        if silent and not naming:
            # Asked while waiting (no event then); this outcome is a later refusal's.
            self.checks["seen: an outcome after a reclaim asked while waiting"] += 1
            return
        self.checks[ASKED_FOR_QUOTA] += 1
        asking = naming or errors
        # Refused for quota here, or in a pool it then passed over (its note says the quota's
        # refusal; the reclaim is asked for that pool when the request ends, wherever it ends).
        passed_for_quota = any(
            e.get("code") == "NodePoolPassedOver" and "quota" in str(e.get("message", "")).lower()
            for e in asking
        )
        if not any(e.get("code") == "QuotaExceeded" for e in asking) and not passed_for_quota:
            self._violate(
                ASKED_FOR_QUOTA,
                f"{detail.get('requestId')} asked for {reclaim} and is {status} with {codes}",
            )

    def event_published(self, event: dict[str, Any], size: int) -> None:
        self.checks["every status event within 256 KB"] += 1
        if size > EVENT_LIMIT_BYTES:
            self._violate(
                "every status event within 256 KB",
                f"{event.get('detail-type')} for {event.get('detail', {}).get('requestId')}:"
                f" {size} bytes",
            )

    # -- every step -----------------------------------------------------------------------------

    def every_step(self) -> None:
        self._group_limits_hold()
        self._uncovered_launch_nothing()
        self._reclaims_allowed(self.world.take_sync_terminations())
        if self.base.step % ITEM_CHECK_EVERY == 0:
            self._items_within_limit()

    def _group_used(self, name: str, resource: str = "instances") -> int:
        requesters = set(QUOTAS[name][0])
        used = 0
        for observed in self.world.instances.values():
            counted = observed.state in ("pending", "running")
            counted = counted and observed.instance_id not in self.world.restarted
            if counted and observed.pool in QUOTA_POOLS and observed.requester in requesters:
                used += self.world.instance_resources(observed.instance_type)[resource]
        return used

    def _group_limits_hold(self) -> None:
        over: set[str] = set()
        for name, limits in self.group_limits.items():
            for resource, limit in limits.items():
                used = self._group_used(name, resource)
                ceiling = max(limit, self._allowance_for(name, used, limit))
                self.checks["group usage <= group limits"] += 1
                if used <= ceiling:
                    continue
                key = f"{name}/{resource}"
                over.add(key)
                if key not in self._over:  # one violation per overrun
                    self._violate(
                        "group usage <= group limits",
                        f"CapacityQuota {name}: {resource} summed over {list(QUOTA_POOLS)} is"
                        f" {used}, group limit {limit}; {self._who(name)}",
                    )
        self._over = over

    def _uncovered_launch_nothing(self) -> None:
        """No instance launched in a quota pool for a requester while its quota was deleted."""
        for observed in self.world.instances.values():
            if observed.pool not in QUOTA_POOLS:
                continue
            for requester, start, end in self._uncovered:
                if observed.requester != requester:
                    continue
                self.checks["a deleted quota's requester launches nothing in its pools"] += 1
                if start <= observed.launched_at <= end:
                    self._violate(
                        "a deleted quota's requester launches nothing in its pools",
                        f"{observed.instance_id} for {observed.request_id} ({requester}) launched"
                        f" in {observed.pool} at {observed.launched_at:.0f}, while no quota"
                        f" covered {requester} ({start:.0f}-{end:.0f})",
                    )

    def _allowance_for(self, name: str, used: int, limit: int) -> int:
        allowance = self._allowance.get(name, 0)
        if name in self._shrinking:
            allowance = min(allowance, used)
            self._allowance[name] = allowance
            if allowance <= limit:
                self._allowance.pop(name, None)
        return allowance

    def _who(self, name: str) -> str:
        requesters = set(QUOTAS[name][0])
        live = sorted(
            f"{o.instance_id}<{o.request_id} {o.pool}>"
            for o in self.world.instances.values()
            if o.state in ("pending", "running") and o.requester in requesters
        )
        return "live: " + ", ".join(live)

    def _in_static_pool(self, instance_id: str) -> bool:
        observed = self.world.instances.get(instance_id)
        pool = None if observed is None else self.base.catalog.pools.get(observed.pool)
        return pool is not None and pool["spec"].get("replicas") is not None

    def _evacuated(self, terminated: SyncTermination) -> bool:
        """An instance of a request that opted in to capacityBlockEnd (or of one of its
        replacements), in a Capacity Block when the sync asked: the sync lets it go once its
        replacement runs (docs/static-capacity.md), judged by the request's count
        (block_end_invariants.py), not by a reclaim. The block is the one EC2 held the instance
        in at the call: once terminated, an instance is in no reservation."""
        observed = self.world.instances.get(terminated.instance_id)
        if observed is None or terminated.reservation_id is None:
            return False
        view = self.world.reservations().get(terminated.reservation_id)
        return (
            view is not None
            and view.kind == "capacity-block"
            and any(
                observed.request_id == r or observed.request_id.startswith(f"{r}.evac-")
                for r in self.base.catalog.opted_in
            )
        )

    def _reclaims_allowed(self, terminated: list[SyncTermination]) -> None:
        quotas = self.base.catalog.quotas
        # A preemption's victims the sync terminated, by reclaim: judged together on the world
        # at that call (`_preemptor_fits`).
        preempted: dict[str, list[SyncTermination]] = {}
        for termination in terminated:
            instance_id = termination.instance_id
            reclaim = self.reclaims.get(instance_id)
            if reclaim is None and self._in_static_pool(instance_id):
                # A static pool's scale-down (docs/static-capacity.md): judged by how many of
                # the pool run (static_invariants.py), not by a reclaim.
                self.checks["seen: an instance terminated by a static pool's scale-down"] += 1
                continue
            if reclaim is None and self._evacuated(termination):
                self.checks["seen: an opted-in request's block instance evacuated"] += 1
                continue
            self.checks["a reclaim terminates only what the policy in force allows"] += 1
            if reclaim is None:
                self._violate(
                    "a reclaim terminates only what the policy in force allows",
                    f"the sync terminated {instance_id}, which no reclaim named",
                )
                continue
            self.checks["seen: an instance terminated by a reclaim"] += 1
            if reclaim.preemption is not None:
                self._preemption_terminated(instance_id, *reclaim.preemption)
                preempted.setdefault(reclaim.reclaim_id, []).append(termination)
                continue
            why = _refused(reclaim, quotas.get(reclaim.lender), quotas.get(reclaim.owner))
            if why:
                self._violate(
                    "a reclaim terminates only what the policy in force allows",
                    f"reclaim {reclaim.reclaim_id} by {reclaim.lender} in {reclaim.pool}"
                    f" terminated {instance_id} of {reclaim.owner}, yet {why}",
                )
        for victims in preempted.values():
            self._preemptor_fits(victims)

    def _preemptor_fits(self, victims: list[SyncTermination]) -> None:
        """Issue 37: with the victims of one preemption the sync terminated gone, its request
        fits its pool's limits, its quota's bound and its group's limits, on the instances live
        at the sync's call and the documents as applied (`preemption.still_short`)."""
        preempting = self.reclaims[victims[0].instance_id].preemption
        assert preempting is not None
        detail = preempting[0]
        catalog = self.base.catalog
        self.checks[preemption.STILL_FITS] += 1
        why = preemption.still_short(
            detail,
            {v.instance_id for v in victims},
            victims[0].live,
            catalog.quotas.get(str(detail["quota"])),
            catalog.pools.get(str(detail["nodePool"])),
            self.world.instance_resources,
        )
        if why is not None:
            self._violate(
                preemption.STILL_FITS,
                f"{detail['reclaimId']} for {detail['requestId']} terminated"
                f" {sorted(v.instance_id for v in victims)}, yet {why}",
            )

    def _preemption_terminated(
        self, instance_id: str, detail: dict[str, Any], victim: dict[str, Any]
    ) -> None:
        """A preemption's victim terminated: the policy in force still allows it, and its
        request still waits (admitted, failed or ended, it needs nothing: nothing in vain)."""
        self._preemption_allowed(detail, victim, "terminated")
        request = self.base.ledger.requests.get(str(detail["requestId"]))
        self.checks[preemption.FITS] += 1
        if request is not None and request.ended_at is not None:
            self._violate(
                preemption.FITS,
                f"{instance_id} terminated for {detail['requestId']}, which ended"
                f" {request.status} at {request.ended_at:.0f}: the preemption was in vain",
            )

    # -- stored items ---------------------------------------------------------------------------

    def after_quiescence(self) -> None:
        self._items_within_limit()
        # Leases granted under an old group limit have settled or expired: the allowance is what
        # runs now, and only shrinks from here.
        for name in list(self._allowance):
            self._allowance[name] = self._group_used(name)
            self._shrinking.add(name)

    def _items_within_limit(self) -> None:
        held, over = self.world.items_over(ITEM_LIMIT_BYTES)
        if held:  # one check per item
            self.checks["every stored item within 400 KB"] += held
        for table, key, size in over:
            self._violate("every stored item within 400 KB", f"{table} item {key}: {size} bytes")


def _refused(reclaim: Reclaim, lender: dict[str, Any] | None, owner: dict[str, Any] | None) -> str:
    """Why the policy in force does not allow the termination ('' when it does)."""
    if not reclaim.enforced:
        return "the reclaim was only asked, not enforced"
    if lender is None:
        return f"{reclaim.lender} is deleted"
    policy = (lender["spec"].get("preemption") or {}).get("reclaimWithinCohort", "Never")
    if policy == "Any":
        return ""
    if policy == "Never":
        return f"{reclaim.lender}'s reclaimWithinCohort is Never now"
    mine = int(lender["spec"].get("priority", 0))
    theirs = int((owner or {}).get("spec", {}).get("priority", 0))
    if theirs >= mine:
        return f"{reclaim.owner}'s priority {theirs} is not below {reclaim.lender}'s {mine} now"
    return ""
