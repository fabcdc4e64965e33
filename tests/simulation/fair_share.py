"""Issue 37's fair share bound over the whole system: sustained contention in a pool of its own.

The `fair-share` profile runs one phase, a step at a time (`contend`). In `pool-fair` (limit
`ROOMS` instances, `m5.large` on-demand) the lender `fair-lender` runs `ROOMS` instances, all
within its nominal quota; the teams `fair-1` .. `fair-3` (nominal 0, borrowing without limit,
one cohort `sim-fair`, one priority, `fairSharing.weight` drawn from the seed, the largest at
least 3 times the smallest) each keep `WAITING_EACH` requests of one instance waiting for the
pool's limit. Each step:

1. the launch queue is served until nothing is visible (the wake the last room event sent, and
   the wakes it passed on, are served first);
2. each team asks again until it has `WAITING_EACH` waiting (one request for each admitted), and
   those are served at once: with no room, they wait;
3. one of the lender's instances terminates: one room, which its event (delivered within the
   step) wakes the queue for.

So every admission in the phase is a wake's, of a team whose requests all lie in the wake's
window (3 teams x 2 = 6 entries, of 8): the conditions of the bound proven over the wake loop
(tests/unit/test_fair_sharing.py), now through SQS, the launcher, the lease transactions, the
instance events and the sync's minute.

Half the seeds draw a tree instead (Kueue's hierarchical fair sharing): each team alone in a
cohort of its own (`sim-fair-fair-1` ..) under `sim-fair`, the lender's, with the drawn weight on
its Cohort's `spec.fairSharing` rather than on its quota. A team's subtree then borrows what the
team borrows, of the same 30 its parent could hold, so the order a wake tries its window in is
the flat one's by the subtrees' shares (ties: the teams' own shares), and the same bound holds.

The invariant (`SHARE_BOUND`), after every step of the phase: with N the requests of the teams
admitted so far and n_i team i's, `|n_i - N * w_i / W| <= len(TEAMS) + SLACK` (W the sum of the
weights). docs/queueing.md and docs/simulation.md ("Fair sharing's share bound") say why the
slack.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from capacity_launcher.domain.apis.documents import parse_document

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants
    from tests.simulation.scheduler import Simulation

POOL = "pool-fair"
COHORT = "sim-fair"
LENDER = "fair-lender"
TEAMS = ("fair-1", "fair-2", "fair-3")
ROOMS = 30  # room events in the phase: the lender's instances, ended one a step
WAITING_EACH = 2
PRIORITY = 40
# Drawn per team, the largest at least SPREAD times the smallest: then the teams admitted in turn
# (the queue's order, fair sharing off) are off their weight shares by 5 or more of 30
# admissions, past the bound; with closer weights the bound could not tell the two apart.
WEIGHTS = ("0.5", "1", "2", "3")
SPREAD = 3
# Beyond the wake loop's T: a room event whose wake a passed-on wake of the admission before it
# reaches first (the leave wakes the head again, and a woken entry refused passes the wake on,
# so an entry passed over 8 times blocks and goes first, whatever its share).
SLACK = 1
SHARE_BOUND = "under sustained contention each team's admitted share is within its bound"
CONTEND_WEIGHTS: dict[str, float] = {"contend": 1}


@dataclass
class Contention:
    weights: dict[str, Decimal]
    tree: bool = False  # the weights on the teams' cohorts, under the lender's
    asked: dict[str, list[str]] = field(default_factory=dict)  # team -> its request ids
    filler: str = ""  # the lender's request: its instances end one a step
    rooms: int = 0


def _quota(
    requester: str, nominal: int, weight: str | None, cohort: str = COHORT
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requesters": [requester],
        "cohort": cohort,
        "priority": PRIORITY,
        "allowBorrowing": weight is not None,
        "resourceGroups": [
            {
                "coveredResources": ["instances"],
                "flavors": [
                    {
                        "name": POOL,
                        "resources": [{"name": "instances", "nominalQuota": str(nominal)}],
                    }
                ],
            }
        ],
    }
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": f"quota-{requester}"},
        "spec": spec,
    }


def _pool() -> dict[str, Any]:
    from tests.simulation.operations import _document

    spec = {
        "nodeClassRef": "class-open",
        "weight": 1,
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "limits": {"instances": str(ROOMS)},
    }
    return _document("NodePool", POOL, spec)


def _body(sim: Simulation, requester: str, count: int) -> dict[str, Any]:
    sim.catalog.sequence += 1
    until = datetime.fromtimestamp(sim.world.now, UTC) + timedelta(hours=1)
    return {
        "requestId": f"fair-{sim.seed}-{sim.catalog.sequence}",
        "count": count,
        "nodePool": POOL,
        "requester": requester,
        "waitForCapacityUntil": until.isoformat().replace("+00:00", "Z"),
    }


def _start(sim: Simulation) -> Contention:
    draw = random.Random(f"{sim.seed}/fair-share")
    weights = [draw.choice(WEIGHTS) for _ in TEAMS]
    while max(map(Decimal, weights)) < SPREAD * min(map(Decimal, weights)):
        weights = [draw.choice(WEIGHTS) for _ in TEAMS]
    phase = Contention({t: Decimal(w) for t, w in zip(TEAMS, weights, strict=True)})
    phase.tree = draw.random() < 0.5
    if phase.tree:
        _apply_cohorts(sim, weights)
    documents = [_pool(), _quota(LENDER, ROOMS, None)]
    documents += [
        _quota(t, 0, "1", f"{COHORT}-{t}") if phase.tree else _quota(t, 0, w)
        for t, w in zip(TEAMS, weights, strict=True)
    ]
    for document in documents:
        # As the bootstrap does: the emulator's conflict mode may cancel an apply; a second
        # refusal raises why.
        for _ in range(2):
            if sim.apply(document) == "applied":
                break
        else:
            sim.store.apply(parse_document(document))
    fill = _body(sim, LENDER, ROOMS)
    fill.pop("waitForCapacityUntil")
    sim.send([fill], via_bus=False)
    sim.poll_everything()  # the pool full before any team asks
    phase.filler = fill["requestId"]
    sim.invariants.fair_share = phase  # judged after every step from now on
    return phase


def _apply_cohorts(sim: Simulation, weights: list[str]) -> None:
    """The tree: `sim-fair` over one cohort per team, weighted as drawn (a retry as above)."""
    from tests.simulation.cohort_operations import cohort_document
    from tests.simulation.versions import apply_as_written

    documents = [cohort_document(COHORT, {})]
    documents += [
        cohort_document(f"{COHORT}-{t}", {"parentName": COHORT, "fairSharing": {"weight": w}})
        for t, w in zip(TEAMS, weights, strict=True)
    ]
    for document in documents:
        for attempt in range(2):
            try:
                apply_as_written(sim.store, document)
                break
            except Exception:
                if attempt:
                    raise


def contend(sim: Simulation, rng: random.Random) -> str:
    """One step of the phase: serve what the last room woke, top each team's waiting requests
    up, end one of the lender's instances (a room)."""
    phase = sim.invariants.fair_share or _start(sim)
    sim.poll_everything()
    asked = []
    for team in TEAMS:
        mine = phase.asked.setdefault(team, [])
        waiting = [r for r in mine if sim.ledger.requests[r].ended_at is None]
        for _ in range(WAITING_EACH - len(waiting)):
            body = _body(sim, team, 1)
            mine.append(body["requestId"])
            asked.append(body)
    if asked:
        sim.send(asked, via_bus=False)
        sim.poll_everything()
    fillers = sorted(
        o.instance_id
        for o in sim.world.instances.values()
        if o.request_id == phase.filler and o.state in ("pending", "running")
    )
    if not fillers:
        return "no room left to make"
    ended = rng.choice(fillers)
    sim.world.ec2.terminate_instances(InstanceIds=[ended])
    phase.rooms += 1
    so_far = admitted(sim.invariants, phase)
    shape = "tree" if phase.tree else "flat"
    return f"room {phase.rooms} ({shape}), asked {len(asked)}, admitted {so_far}"


def admitted(invariants: Invariants, phase: Contention) -> dict[str, int]:
    """Each team's requests admitted so far (their outcome published: Fulfilled)."""
    requests = invariants.ledger.requests
    return {
        team: sum(1 for r in phase.asked.get(team, []) if requests[r].status == "Fulfilled")
        for team in TEAMS
    }


def within_bound(invariants: Invariants, phase: Contention) -> None:
    """Every team within `len(TEAMS) + SLACK` admissions of its weight share of all of them."""
    counts = admitted(invariants, phase)
    total = sum(counts.values())
    if total == 0:
        return
    weight = sum(phase.weights.values())
    bound = len(TEAMS) + SLACK
    for team, count in counts.items():
        share = Decimal(total) * phase.weights[team] / weight
        invariants.checks[SHARE_BOUND] += 1
        if abs(Decimal(count) - share) > bound:
            invariants._violate(
                SHARE_BOUND,
                f"{team} (weight {phase.weights[team]}) has {count} of {total} admissions, its"
                f" weight share {share:.1f}, off by more than {bound}: {counts},"
                f" weights { {t: str(w) for t, w in phase.weights.items()} }",
            )


CONTEND_OPERATIONS = {"contend": contend}
