"""The limits.unready, PriorityClass, queue and cohort-level invariants on their own, over a
stand-in for the world: each catches what it names and lets pass what the documentation
allows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

from capacity_launcher.domain.accounting.admission_queue import entry_key, queue_partition
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError
from tests.simulation.cohort_invariants import DEEP, LEVEL
from tests.simulation.edge_invariants import ASKED_FOR_QUOTA
from tests.simulation.fair_share import SHARE_BOUND, Contention, within_bound
from tests.simulation.invariants import Invariants, Ledger, Request
from tests.simulation.operations import Catalog
from tests.simulation.preemption_invariants import STILL_FITS
from tests.simulation.priority_invariants import (
    NAMES_EXISTING,
    ORDER_FREE,
    UNCHANGED,
    why_refused,
)
from tests.simulation.queue_invariants import COUNTED, TEAM
from tests.simulation.unready_invariants import GRANT, LAUNCHED, READY, count_partition
from tests.simulation.world import LiveAtCall, Observed, ReservationView, SyncTermination, World

TRANSACT = "dynamodb:TransactWriteItems"
ITEMS = "every stored item within 400 KB"


@dataclass
class StandIn:
    """The state table's partitions, EC2's status checks and instances, as the checks read them."""

    partitions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    passing: set[str] = field(default_factory=set)
    instances: dict[str, Observed] = field(default_factory=dict)
    now: float = 0.0
    views: dict[str, ReservationView] = field(default_factory=dict)
    terminations: list[SyncTermination] = field(default_factory=list)
    items: tuple[int, list[tuple[str, str, int]]] = (0, [])  # held, and those over the limit

    def partition(self, pk: str) -> dict[str, dict[str, Any]]:
        return self.partitions.get(pk, {})

    def status_checks_passed(self, instance_id: str) -> bool:
        return instance_id in self.passing

    def reservations(self) -> dict[str, ReservationView]:
        return self.views

    def take_sync_terminations(self) -> list[SyncTermination]:
        taken, self.terminations = self.terminations, []
        return taken

    def items_over(self, limit: int) -> tuple[int, list[tuple[str, str, int]]]:
        held, over = self.items
        return held, [found for found in over if found[2] > limit]

    def instance_resources(self, instance_type: str) -> dict[str, int]:
        return {"cpu": 2, "memory": 8192, "nvidia.com/gpu": 0, "instances": 1}


def _invariants(unready: int | str = 1) -> tuple[Invariants, StandIn]:
    world = StandIn()
    pool = {"spec": {"limits": {"instances": "8", "unready": unready}}}
    world.partitions["NodePool"] = {"pool-0": {"document": json.dumps(pool)}}
    world.partitions["Limits#pool-0"] = {}
    return Invariants(cast(World, world), Ledger(), seed=5, catalog=Catalog()), world


def _lease(invariants: Invariants, request_id: str, count: int) -> None:
    """The lease transaction as the service writes it, seen before and after it commits."""
    put = {"pk": {"S": "Limits#pool-0"}, "sk": {"S": f"Lease#{request_id}"}, "count": {"N": "2"}}
    put["count"] = {"N": str(count)}
    params = {"TransactItems": [{"Update": {}}, {"Put": {"Item": put}}]}
    invariants.unready.before(TRANSACT, params)
    invariants.unready.after(TRANSACT, params)


def _found(invariants: Invariants, name: str) -> list[str]:
    return [v.detail for v in invariants.violations if v.invariant == name]


def test_unready_counts_open_leases_and_unmarked_members_and_a_percentage_rounds_down() -> None:
    items = {"Lease#r1": {"count": "2"}, "Member#i-1": {}, "Member#i-2": {}, "Ready#i-2": {}}
    counted = count_partition(items, "50%")
    assert (counted.unready, counted.instances, counted.allowed) == (3, 4, 2)
    assert count_partition({"Member#i-1": {}}, "50%").allowed == 0
    assert count_partition(items, 3).allowed == 3


def test_a_lease_granted_within_the_limit_passes_even_if_it_takes_the_pool_over_it() -> None:
    invariants, world = _invariants(unready=1)
    world.partitions["Limits#pool-0"] = {"Member#i-1": {}}  # 1 unready: within 1
    _lease(invariants, "r1", 4)
    assert _found(invariants, GRANT) == []
    assert invariants.checks[GRANT] == 1


def test_a_lease_granted_over_the_limit_is_a_finding() -> None:
    invariants, world = _invariants(unready=1)
    world.partitions["Limits#pool-0"] = {"Lease#r0": {"count": "1"}, "Member#i-1": {}}
    _lease(invariants, "r1", 1)
    assert _found(invariants, GRANT) == [
        "pool pool-0: lease r1 x1 granted with 2 of 2 instances unready, limits.unready 1 allows 1"
    ]


def test_a_ready_mark_on_an_instance_still_initializing_is_a_finding() -> None:
    invariants, world = _invariants()
    world.passing = {"i-1"}
    for instance in ("i-1", "i-2"):
        put = {"pk": {"S": "Limits#pool-0"}, "sk": {"S": f"Ready#{instance}"}}
        params = {"TransactItems": [{"Put": {"Item": put}}]}
        invariants.unready.before(TRANSACT, params)
        invariants.unready.after(TRANSACT, params)
    assert [d.split(":")[1].split()[0] for d in _found(invariants, READY)] == ["i-2"]


def test_an_instance_beyond_its_requests_leases_in_the_pool_is_a_finding() -> None:
    invariants, world = _invariants()
    _lease(invariants, "r1", 1)
    for n in range(2):
        world.instances[f"i-{n}"] = Observed(
            f"i-{n}", "r1", "pool-0", "running", "m5.large", "us-east-1a", None
        )
    invariants.unready.every_step()
    assert len(_found(invariants, LAUNCHED)) == 1


def _class(name: str, value: int, default: bool = False) -> dict[str, Any]:
    document = {"kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    return {**document, "globalDefault": default}


def test_the_rules_say_what_must_be_refused() -> None:
    stored = {"high": {"document": json.dumps(_class("high", 100, default=True))}}
    snapshot = {"PriorityClass": stored, "CapacityQuota": {}}
    assert why_refused(snapshot, document=_class("high", 200)) == "value 100 -> 200"
    assert why_refused(snapshot, document=_class("high", 100)) is None
    assert why_refused(snapshot, document=_class("low", 1, default=True)) is not None
    # A reservation naming a class not stored is applied, waiting for it (order-free)
    reservation = {"kind": "CapacityReservation", "spec": {"priorityClassName": "gone"}}
    assert why_refused(snapshot, document=reservation) is None


def test_a_refused_change_that_changed_the_table_is_a_finding() -> None:
    invariants, world = _invariants()
    before = invariants.priority.snapshot()
    world.partitions["PriorityClass"] = {"high": {"document": "{}"}}
    invariants.priority.judged("apply PriorityClass high", before, None, "ConfigConflict")
    assert _found(invariants, UNCHANGED) == [
        "apply PriorityClass high refused (ConfigConflict), yet changed ['PriorityClass']"
    ]


def _reservation_item(priority: int, waits: str | None) -> dict[str, Any]:
    item = {
        "kept": json.dumps({"fields": {"spec.priorityClassName": "high"}}),
        "document": json.dumps({"spec": {"priority": priority}}),
    }
    return item if waits is None else {**item, "unresolvedPriorityClass": waits}


def test_a_reservation_neither_waiting_for_its_missing_class_nor_resolved_is_a_finding() -> None:
    invariants, world = _invariants()
    # Waiting for a class not stored, priority 0: as meant
    world.partitions["CapacityQuota"] = {"resv-a": _reservation_item(0, "high"), "quota-a": {}}
    invariants.priority.every_step()
    assert _found(invariants, NAMES_EXISTING) == []
    # Naming a class not stored, not marked waiting: a finding
    world.partitions["CapacityQuota"] = {"resv-a": _reservation_item(0, None)}
    invariants.priority.every_step()
    assert _found(invariants, NAMES_EXISTING) == [
        "reservation resv-a names high (stored: False): waits for None, priority 0"
    ]
    # The class stored, the reservation still waiting (its apply did not resolve it): a finding
    world.partitions["PriorityClass"] = {"high": {"document": json.dumps(_class("high", 1))}}
    world.partitions["CapacityQuota"] = {"resv-a": _reservation_item(0, "high")}
    invariants.priority.every_step()
    assert len(_found(invariants, NAMES_EXISTING)) == 2
    # Resolved with the class's value: as meant
    world.partitions["CapacityQuota"] = {"resv-a": _reservation_item(1, None)}
    invariants.priority.every_step()
    assert len(_found(invariants, NAMES_EXISTING)) == 2


def test_a_reservation_refused_for_its_class_is_a_finding() -> None:
    invariants, _ = _invariants()
    invariants.priority.reservation_refused("apply reservation resv-a", ConfigConflict("race"))
    assert _found(invariants, ORDER_FREE) == []
    refused = ConfigValidationError([FieldError("spec.priorityClassName", "not applied")])
    invariants.priority.reservation_refused("apply reservation resv-a", refused)
    assert len(_found(invariants, ORDER_FREE)) == 1


def test_a_sync_that_counts_other_than_the_waiting_records_is_a_finding() -> None:
    invariants, _world = _invariants()
    invariants.queues.counted_waiting(2, 2)
    assert _found(invariants, COUNTED) == []
    invariants.queues.counted_waiting(1, 2)
    assert _found(invariants, COUNTED) == ["the sync counted 1 requests waiting; the table holds 2"]


def test_a_queue_entry_naming_another_requester_than_its_request_is_a_finding() -> None:
    invariants, world = _invariants()
    body = {"requestId": "r-1", "requester": "team-a"}
    invariants.ledger.requests["r-1"] = Request("r-1", 0.0, valid_bodies={"{}": body})
    key = entry_key(0, datetime(2026, 1, 1, tzinfo=UTC), "r-1")
    item = {"requestId": "r-1", "priority": 0, "arrival": "2026-01-01T00:00:00+00:00"}
    world.partitions[queue_partition("pool-0")] = {key: {**item, "requester": "team-a"}}
    invariants.queues.every_step()
    assert _found(invariants, TEAM) == []
    world.partitions[queue_partition("pool-0")] = {key: {**item, "requester": "team-b"}}
    invariants.queues.every_step()
    assert _found(invariants, TEAM) == ["pool-0: r-1's entry names 'team-b', not 'team-a'"]


def test_a_reclaim_asked_by_a_request_not_refused_for_quota_is_a_finding() -> None:
    invariants, _world = _invariants()
    edges = invariants.edges
    asked = {"reclaimId": "reclaim-1", "requestId": "r-1", "quota": "a", "nodePool": "pool-0"}
    quota = [{"code": "QuotaExceeded", "message": "lent out; reclaim reclaim-1 requested"}]
    # A waiting request refused for its quota asked: as meant
    edges.reclaim_requested(asked)
    edges.request_outcome({"requestId": "r-1", "status": "Waiting", "errors": quota})
    assert _found(invariants, ASKED_FOR_QUOTA) == []
    assert invariants.checks["seen: a waiting request asked for a reclaim"] == 1
    # One admitted since its reclaim (its next event is Fulfilled): nothing to check
    edges.reclaim_requested(asked)
    edges.request_outcome({"requestId": "r-1", "status": "Fulfilled", "errors": []})
    assert _found(invariants, ASKED_FOR_QUOTA) == []
    # One that waits for its pool's limits, not its quota, asked: a finding
    edges.reclaim_requested(asked)
    limits = [{"code": "LimitExceeded", "message": "pool-0 limits"}]
    edges.request_outcome({"requestId": "r-1", "status": "Waiting", "errors": limits})
    assert _found(invariants, ASKED_FOR_QUOTA) == [
        "r-1 asked for reclaim-1 and is Waiting with ['LimitExceeded']"
    ]


def test_a_reclaim_asked_while_waiting_is_judged_by_the_refusal_naming_it() -> None:
    # Seed 4, queue profile, 150 steps: a woken request refused again for quota asks (no status
    # event then); later refused by its pool's limits, it fails at its deadline with those.
    invariants, _world = _invariants()
    edges = invariants.edges
    invariants.ledger.requests["r-1"] = Request("r-1", 0.0, waited=True)
    asked = {"reclaimId": "reclaim-1", "requestId": "r-1", "quota": "a", "nodePool": "pool-0"}
    limits = [
        {"code": "LimitExceeded", "message": "pool-0 limits"},
        {"code": "NotAdmittedByDeadline", "message": "passed while it waited for limits"},
    ]
    edges.reclaim_requested(asked)
    edges.request_outcome({"requestId": "r-1", "status": "Failed", "errors": limits})
    assert _found(invariants, ASKED_FOR_QUOTA) == []
    assert invariants.checks["seen: an outcome after a reclaim asked while waiting"] == 1
    # Its outcome still naming the reclaim on a refusal other than its quota's: a finding
    edges.reclaim_requested(asked)
    named = [{"code": "LimitExceeded", "message": "pool-0 limits; preemption reclaim-1 requested"}]
    edges.request_outcome({"requestId": "r-1", "status": "Failed", "errors": named})
    assert _found(invariants, ASKED_FOR_QUOTA) == [
        "r-1 asked for reclaim-1 and is Failed with ['LimitExceeded']"
    ]
    # One naming it on its quota's refusal: as meant
    edges.reclaim_requested(asked)
    quota = [{"code": "QuotaExceeded", "message": "quota a; preemption reclaim-1 requested"}]
    edges.request_outcome({"requestId": "r-1", "status": "Failed", "errors": quota + limits})
    assert len(_found(invariants, ASKED_FOR_QUOTA)) == 1


def _contended(invariants: Invariants, counts: dict[str, int]) -> Contention:
    """The fair-share phase with each team's admissions as `counts` (and one waiting each)."""
    phase = Contention({"fair-1": Decimal(3), "fair-2": Decimal("0.5"), "fair-3": Decimal(1)})
    for team, admitted in counts.items():
        for at in range(admitted + 1):
            request_id = f"{team}-{at}"
            request = Request(request_id, 0.0)
            request.status = "Fulfilled" if at < admitted else None
            invariants.ledger.requests[request_id] = request
            phase.asked.setdefault(team, []).append(request_id)
    return phase


def test_each_teams_admissions_within_its_bound_of_its_weight_share_pass() -> None:
    invariants, _ = _invariants()
    # 30 admissions by weights 3, 0.5 and 1: shares 20, 3.3 and 6.7; each within T + 1 = 4
    within_bound(invariants, _contended(invariants, {"fair-1": 17, "fair-2": 6, "fair-3": 7}))
    assert invariants.checks[SHARE_BOUND] == 3
    assert invariants.violations == []


def test_teams_admitted_in_turn_whatever_their_weights_are_past_the_bound() -> None:
    invariants, _ = _invariants()
    # The queue's order (fair sharing off): 10 each, where the weights give 20, 3.3 and 6.7
    within_bound(invariants, _contended(invariants, {"fair-1": 10, "fair-2": 10, "fair-3": 10}))
    [first, second] = invariants.violations
    assert first.invariant == second.invariant == SHARE_BOUND
    assert "fair-1 (weight 3) has 10 of 30 admissions, its weight share 20.0" in first.detail
    assert "fair-2 (weight 0.5) has 10 of 30 admissions, its weight share 3.3" in second.detail


def _store_cohorts(world: StandIn, *documents: dict[str, Any]) -> None:
    world.partitions["CapacityQuotas"] = {
        f"Cohort#{d['metadata']['name']}": {"document": json.dumps(d)} for d in documents
    }


def _tree(root_instances: str, borrowing: str | None) -> list[dict[str, Any]]:
    from tests.simulation.cohort_operations import ROOT, _group, cohort_document

    child = {"nominalQuota": "0"} | ({} if borrowing is None else {"borrowingLimit": borrowing})
    return [
        cohort_document(
            ROOT, {"resourceGroups": _group({"instances": {"nominalQuota": root_instances}})}
        ),
        cohort_document(
            "sim", {"parentName": ROOT, "resourceGroups": _group({"instances": child})}
        ),
    ]


def test_a_cohort_level_over_its_nominal_quota_and_what_it_may_borrow_is_a_finding() -> None:
    invariants, world = _invariants()
    judge = invariants.cohorts.judge
    # Flat: the sum of the members' nominal quotas (7)
    judge("pool-1", "instances", 7, 7, None)
    assert _found(invariants, LEVEL) == []
    judge("pool-1", "instances", 7, 8, None)
    assert len(_found(invariants, LEVEL)) == 1
    # A tree: the root lends 2, sim may borrow 1 of them
    invariants, world = _invariants()
    _store_cohorts(world, *_tree("2", "1"))
    invariants.cohorts.judge("pool-1", "instances", 7, 8, None)
    assert _found(invariants, LEVEL) == []
    invariants.cohorts.judge("pool-1", "instances", 7, 9, None)
    assert [d.split(":")[0] for d in _found(invariants, LEVEL)] == ["cohort sim"]


def _level(name: str, parent: str | None, instances: str, borrowing: str | None = None) -> Any:
    from tests.simulation.cohort_operations import _group, cohort_document

    term = {"nominalQuota": instances}
    if borrowing is not None:
        term["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {"resourceGroups": _group({"instances": term})}
    if parent is not None:
        spec["parentName"] = parent
    return cohort_document(name, spec)


def test_every_level_of_a_deeper_tree_is_bounded_by_its_limits_and_its_parent() -> None:
    from tests.simulation.cohort_operations import MID, ROOT, UPPER

    # sim-root (2) <- sim-mid (1 of its own, borrows at most 1) <- sim (members: 7)
    tree = [_level(ROOT, None, "2"), _level(MID, ROOT, "1", "1"), _level("sim", MID, "0")]
    invariants, world = _invariants()
    _store_cohorts(world, *tree)
    assert invariants.cohorts.bounds("pool-1", "instances", 7) == {
        ROOT: 10,
        MID: 9,  # its 8, and 1 of the root's 2
        "sim": 9,  # all sim-mid may hold
    }
    invariants.cohorts.judge("pool-1", "instances", 7, 9, None)
    assert _found(invariants, LEVEL) == []
    assert invariants.checks[DEEP] > 0  # seen lending, through three levels
    invariants.cohorts.judge("pool-1", "instances", 7, 10, None)
    assert sorted(d.split(":")[0] for d in _found(invariants, LEVEL)) == [
        "cohort sim",
        "cohort sim-mid",
    ]
    # A sibling branch under the root lends up its own quota; a fourth level's limit holds
    invariants, world = _invariants()
    _store_cohorts(
        world,
        _level(ROOT, None, "2"),
        _level(UPPER, ROOT, "1", "2"),
        _level(MID, UPPER, "0"),
        _level("sim", MID, "0"),
        _level("sim-side", ROOT, "3"),
    )
    assert invariants.cohorts.bounds("pool-1", "instances", 7) == {
        ROOT: 13,
        UPPER: 10,  # its 8, and 2 of the root's and sim-side's 5
        MID: 10,
        "sim": 10,
    }
    # A parent not applied ends the path: sim-mid stands alone
    invariants, world = _invariants()
    _store_cohorts(world, _level(MID, UPPER, "1"), _level("sim", MID, "0"))
    assert invariants.cohorts.bounds("pool-1", "instances", 7) == {MID: 8, "sim": 8}


def test_a_tree_made_smaller_takes_back_nothing_that_runs_but_admits_nothing_over_it() -> None:
    invariants, world = _invariants()
    _store_cohorts(world, *_tree("2", None))
    invariants.cohorts.judge("pool-1", "instances", 7, 9, Decimal(9))
    # The root deleted: 9 run under the old bound, and may go on running
    _store_cohorts(world, _tree("2", None)[1])
    invariants.cohorts.judge("pool-1", "instances", 7, 9, Decimal(9))
    assert _found(invariants, LEVEL) == []
    # One ends: what is held shrinks the allowance; a new one over it is a finding
    invariants.cohorts.judge("pool-1", "instances", 7, 8, Decimal(8))
    invariants.cohorts.judge("pool-1", "instances", 7, 9, Decimal(9))
    assert len(_found(invariants, LEVEL)) == 1


RECLAIMS = "a reclaim terminates only what the policy in force allows"


def test_a_sync_termination_no_reclaim_named_is_a_finding_unless_an_opted_in_block_evacuation() -> (
    None
):
    """Block-end seeds 1 and 3: the sync evacuates an opted-in request's Capacity Block instance
    (or its replacement's, replaced in turn) once the replacement runs. By the time the
    invariant looks, the instance is terminated and EC2 holds it in no reservation: the block is
    the one EC2 held it in when the sync asked."""
    invariants, world = _invariants()
    invariants.catalog.opted_in.append("optin-1")
    block = ReservationView(
        "cr-block", "capacity-block", "active", 0.0, 9e9, "capacity-block", frozenset(), ()
    )
    world.views = {
        "cr-block": block,
        "cr-plain": replace(block, reservation_id="cr-plain", kind="default", market="on-demand"),
    }
    ids = {
        "i-1": "optin-1",
        "i-2": "optin-1.evac-a.evac-b",
        "i-3": "optin-1",
        "i-4": "other-1",
        "i-5": "optin-1",
    }
    for instance_id, request_id in ids.items():
        world.instances[instance_id] = Observed(
            instance_id,
            request_id,
            "pool-block-requests",
            "terminated",
            "p4d.24xlarge",
            "us-east-1a",
            None,
        )
    # The request's own instance and its replacement's replacement's, each in a block when asked
    world.terminations = [SyncTermination("i-1", "cr-block"), SyncTermination("i-2", "cr-block")]
    invariants.edges.every_step()
    assert _found(invariants, RECLAIMS) == []
    assert invariants.checks["seen: an opted-in request's block instance evacuated"] == 2
    # In no reservation when asked, another request's in a block, one in a plain reservation
    world.terminations = [
        SyncTermination("i-3", None),
        SyncTermination("i-4", "cr-block"),
        SyncTermination("i-5", "cr-plain"),
    ]
    invariants.edges.every_step()
    assert _found(invariants, RECLAIMS) == [
        f"the sync terminated {i}, which no reclaim named" for i in ("i-3", "i-4", "i-5")
    ]


def _preempting(invariants: Invariants, pool_limit: str, group_limit: str) -> None:
    """team-a's quota (LowerPriority, 4 instances in each of pool-0 and pool-1, at most
    ``group_limit`` across them), pool-0 limited to ``pool_limit``; a preemption for 1 instance
    in pool-0 naming a-low in pool-1 and b-low in pool-0."""
    flavors = [
        {"name": p, "resources": [{"name": "instances", "nominalQuota": "4"}]}
        for p in ("pool-0", "pool-1")
    ]
    group = {"coveredResources": ["instances"], "flavors": flavors, "limits": {}}
    group["limits"] = {"instances": group_limit}
    invariants.catalog.quotas["team-a"] = {
        "metadata": {"name": "team-a"},
        "spec": {
            "requesters": ["team-a"],
            "resourceGroups": [group],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }
    invariants.catalog.pools["pool-0"] = {"spec": {"limits": {"instances": pool_limit}}}
    victims = [("a-low", "pool-1"), ("a-low-2", "pool-0")]
    invariants.edges.reclaim_requested(
        {
            "reclaimId": "reclaim-1",
            "requestId": "urgent",
            "quota": "team-a",
            "nodePool": "pool-0",
            "priority": 100,
            "arrivedAt": "2026-11-29T00:00:00+00:00",
            "enforced": True,
            "amount": [{"name": "instances", "total": "1"}],
            "instances": [
                {
                    "instanceId": i,
                    "quota": "team-a",
                    "nodePool": p,
                    "preemption": "withinClusterQueue",
                    "priority": 0,
                    "launchedAt": "2026-11-28T00:00:00+00:00",
                }
                for i, p in victims
            ],
        }
    )


# At the sync's call: team-a's urgent instance and a-low-2 in pool-0, a-low and a-high in pool-1.
LIVE_AT_CALL = (
    LiveAtCall("a-urgent", "pool-0", "team-a", "m5.large"),
    LiveAtCall("a-low-2", "pool-0", "team-a", "m5.large"),
    LiveAtCall("a-low", "pool-1", "team-a", "m5.large"),
    LiveAtCall("a-high", "pool-1", "team-a", "m5.large"),
)


def test_a_victim_terminated_for_a_preemptor_that_would_still_not_fit_is_a_finding() -> None:
    # Given team-a at its group limit of 4 and pool-0 at its limit of 2
    invariants, world = _invariants()
    _preempting(invariants, pool_limit="2", group_limit="4")
    # When the sync terminates only a-low (in pool-1): the group has room, pool-0 none
    world.terminations = [SyncTermination("a-low", None, LIVE_AT_CALL)]
    invariants.edges.every_step()
    # Then it is a finding, naming the pool's limits
    assert invariants.checks[STILL_FITS] == 1
    (found,) = _found(invariants, STILL_FITS)
    assert "reclaim-1 for urgent terminated ['a-low'], yet NodePool pool-0's limits" in found
    # When instead it terminates both: pool-0 and the group have room for the request
    world.terminations = [
        SyncTermination("a-low", None, LIVE_AT_CALL),
        SyncTermination("a-low-2", None, LIVE_AT_CALL),
    ]
    invariants.edges.every_step()
    assert invariants.checks[STILL_FITS] == 2 and len(_found(invariants, STILL_FITS)) == 1


def test_a_group_limit_still_short_with_the_victims_gone_is_a_finding() -> None:
    # Given a group limit of 3 and room in pool-0: a-low-2 alone leaves the group at 3
    invariants, world = _invariants()
    _preempting(invariants, pool_limit="8", group_limit="3")
    world.terminations = [SyncTermination("a-low-2", None, LIVE_AT_CALL)]
    invariants.edges.every_step()
    (found,) = _found(invariants, STILL_FITS)
    assert "CapacityQuota team-a's group limits: instances 3 used" in found


def test_every_stored_item_is_a_check_and_one_over_400_kb_a_finding() -> None:
    invariants, world = _invariants()
    # No item stored: nothing judged (the check is not counted at all)
    invariants.edges.after_quiescence()
    assert ITEMS not in invariants.checks
    # Three items stored, one of them over DynamoDB's 400 KB
    world.items = (3, [("state", "Request#r1/Record", 409601), ("state", "Request#r2/Record", 5)])
    invariants.edges.after_quiescence()
    assert invariants.checks[ITEMS] == 3
    assert _found(invariants, ITEMS) == ["state item Request#r1/Record: 409601 bytes"]
