"""Cohort trees of three and four levels (issue 37, Kueue's Cohort): the team quotas' cohort `sim`
under `sim-mid`, under `sim-upper` (a four-level tree, drawn half the time), under the root
`sim-root`; each cohort with a quota of its own in the quota pools (the root's 1-3 instances and
2 or 4 CPUs, the others' 0 or 1 instance) and a borrowing limit of its own there, drawn from the
seed; applied in a drawn order (parents often late: a child before its parent is accepted, and
joins the tree when the parent arrives), one level changed or deleted, and half the time applied
under a launch (before its lease transactions: a lease decided on the tree as it was must not be
written), or between launches followed by a burst of the borrowing teams' requests into a quota
pool, often with the pool applied with room beyond the flat cohort's quota (so what the tree
lends is used). A four-level tree drawn after a three-level one leaves `sim-upper` under the
root beside `sim-mid`: a sibling branch lending up its own quota. A cycle is refused. The
invariant is cohort_invariants.py's: no level of the tree uses more than its nominal quotas plus
what its limits and its parent allow."""

from __future__ import annotations

import copy
import itertools
import random
from typing import TYPE_CHECKING, Any

from tests.simulation.cohort_invariants import stored_cohorts
from tests.simulation.quota_generations import _under_the_launch
from tests.simulation.versions import apply_as_written

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

ROOT = "sim-root"
MID = "sim-mid"
UPPER = "sim-upper"
# What the root holds of its own in each quota pool; what a cohort below it holds of its own and
# the borrowing limit it gets there.
ROOT_INSTANCES = ("1", "2", "3")
ROOT_CPU = ("2", "4")
OWN_INSTANCES = ("0", "0", "1")
CHILD_BORROWING = (None, "1", "2")
ROOMY_LIMIT = 12
COHORT_WEIGHTS: dict[str, float] = {"cohort_tree": 3}


def _group(resources: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    from tests.simulation.operations import QUOTA_POOLS

    return [
        {
            "coveredResources": list(resources),
            "flavors": [
                {"name": pool, "resources": [{"name": r, **t} for r, t in resources.items()]}
                for pool in QUOTA_POOLS
            ],
        }
    ]


def cohort_document(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def root_document(rng: random.Random) -> dict[str, Any]:
    resources = {
        "instances": {"nominalQuota": rng.choice(ROOT_INSTANCES)},
        "cpu": {"nominalQuota": rng.choice(ROOT_CPU)},
    }
    return cohort_document(ROOT, {"resourceGroups": _group(resources)})


def chain(rng: random.Random) -> list[str]:
    """The cohorts from `sim` up to the root: three levels, or four half the time."""
    from tests.simulation.operations import COHORT

    return [COHORT, MID, UPPER, ROOT] if rng.random() < 0.5 else [COHORT, MID, ROOT]


def child_document(rng: random.Random, name: str, parent: str) -> dict[str, Any]:
    from tests.simulation.operations import COHORT

    instances = {"nominalQuota": "0" if name == COHORT else rng.choice(OWN_INSTANCES)}
    limit = rng.choice(CHILD_BORROWING)
    if limit is not None:
        instances["borrowingLimit"] = limit
    if rng.random() < 0.3:
        instances["lendingLimit"] = "0"  # keeps its own (and its subtree's) for its subtree
    resources = {"instances": instances, "cpu": {"nominalQuota": "0"}}
    return cohort_document(name, {"parentName": parent, "resourceGroups": _group(resources)})


def tree_documents(rng: random.Random) -> list[dict[str, Any]]:
    """A drawn tree: every cohort of a drawn chain, the root last in the chain."""
    names = chain(rng)
    documents = [child_document(rng, n, p) for n, p in itertools.pairwise(names)]
    return [*documents, root_document(rng)]


def _apply(sim: Simulation, document: dict[str, Any]) -> str:
    try:
        apply_as_written(sim.store, document)
    except Exception as error:  # a fault on the simulation's own call, or a refusal
        return type(error).__name__
    return "applied"


def _delete(sim: Simulation, name: str) -> str:
    try:
        sim.store.delete("Cohort", name)
    except Exception as error:
        return type(error).__name__
    return "deleted"


def _change(sim: Simulation, rng: random.Random) -> str:
    draw = rng.random()
    if draw < 0.45:  # the whole tree, in a drawn order (a parent before or after its children)
        documents = tree_documents(rng)
        rng.shuffle(documents)
        done = [f"{d['metadata']['name']} {_apply(sim, d)}" for d in documents]
        return "tree: " + ", ".join(done)
    stored = stored_cohorts(sim.world)
    if draw < 0.7:  # one cohort of a drawn tree, as drawn
        document = rng.choice(tree_documents(rng))
        return f"{document['metadata']['name']}: {_apply(sim, document)}"
    if draw < 0.9:
        name = rng.choice(sorted(stored) or [ROOT])
        return f"{name}: {_delete(sim, name)}"
    # The root naming a cohort below it as its parent: a cycle, refused
    below = _below(stored, ROOT)
    if not below:
        return f"{ROOT}: {_apply(sim, root_document(rng))}"
    parent = rng.choice(sorted(below))
    cycle = cohort_document(ROOT, {"parentName": parent})
    outcome = _apply(sim, cycle)
    sim.invariants.cohorts.cycle_refused(outcome, stored, stored_cohorts(sim.world))
    return f"cycle ({ROOT} under {parent}): {outcome}"


def _below(stored: dict[str, dict[str, Any]], top: str) -> set[str]:
    """The stored cohorts under `top`, at any depth."""
    found: set[str] = set()
    grown = True
    while grown:
        more = {
            name
            for name, document in stored.items()
            if document.get("spec", {}).get("parentName") in found | {top} and name != top
        }
        grown = not more <= found
        found |= more
    return found


def cohort_tree(sim: Simulation, rng: random.Random) -> str:
    """The tree changed between launches, or under one (before each of its lease
    transactions, up to 5)."""
    if rng.random() < 0.5:
        return f"between launches: {_change(sim, rng)}, then {_burst(sim, rng)}"
    return _under_the_launch(sim, rng, lambda: _change(sim, rng), "the tree changed")


def _burst(sim: Simulation, rng: random.Random) -> str:
    """The borrowing teams' requests into one quota pool: what a tree lends is used."""
    from tests.simulation.adversary import _body_for
    from tests.simulation.operations import QUOTA_POOLS

    pool = rng.choice(QUOTA_POOLS)
    roomy = ""
    applied = sim.catalog.pools.get(pool)
    if applied is not None and rng.random() < 0.6:
        # Room in the pool beyond the flat cohort's sum of nominal quotas (7 instances), so the
        # parent's quota is what bounds the borrowing teams (the pool's own limits are 1-8).
        document = copy.deepcopy(applied)
        document["spec"]["limits"] = {"instances": str(ROOMY_LIMIT)}
        for requirement in document["spec"]["requirements"]:
            if requirement["key"] == "karpenter.sh/capacity-type":
                requirement["values"] = sorted({*requirement["values"], "on-demand"})
        roomy = f"{pool} limit {ROOMY_LIMIT}: {sim.apply(document)}, "
    bodies = [
        _body_for(sim, rng, rng.choice(("team-a", "team-b")), pool)
        for _ in range(rng.randint(2, 4))
    ]
    sim.send(bodies, via_bus=False)
    return f"{roomy}{len(bodies)} sent to {pool}"


COHORT_OPERATIONS = {"cohort_tree": cohort_tree}
