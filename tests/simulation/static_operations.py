"""Static NodePools in the simulation (docs/static-capacity.md): an operator applies the static
pool now and then with other replicas and limits; producers' requests may name it (Rejected,
StaticNodePool), some with ids shaped as the sync's own launches (forge_static_launch: refused
too); instances of it are stopped, started and terminated by the other operations.

The pool launches a type no other operation dries or reserves (STATIC_TYPE) through a class no
other operation deletes, so "capacity allows" always holds for it and its convergence is judged
at every quiescence (static_invariants.py).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

STATIC_POOL, STATIC_CLASS, STATIC_TYPE = "pool-static", "class-static", "m5.2xlarge"
ZONES = ("us-east-1a", "us-east-1b")


def static_documents(sim: Simulation, replicas: int, limit: int | None) -> list[dict[str, Any]]:
    node_class = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": STATIC_CLASS},
        "spec": {
            "imageId": sim.world.image_id,
            "subnetIds": [sim.world.subnets[z] for z in ZONES],
            "securityGroupIds": [sim.world.security_group],
        },
    }
    spec: dict[str, Any] = {
        "nodeClassRef": STATIC_CLASS,
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [STATIC_TYPE]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "replicas": replicas,
    }
    if limit is not None:
        spec["limits"] = {"instances": str(limit)}
    pool = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": STATIC_POOL},
        "spec": spec,
    }
    return [node_class, pool]


def apply_static_pool(sim: Simulation, rng: random.Random) -> str:
    """The static pool applied with replicas 0 to 3 and a limit above, at or below them."""
    replicas = rng.randint(0, 3)
    limit = rng.choice((None, replicas + 1, max(0, replicas - 1)))
    outcomes = [sim.apply(document) for document in static_documents(sim, replicas, limit)]
    return f"replicas {replicas}, limit {limit}: {', '.join(outcomes)}"


def forge_static_launch(sim: Simulation, rng: random.Random) -> str:
    """A producer's request whose id is shaped as the sync's static launches
    (`static-<pool>-...`), naming the static pool: it must launch nothing (static_invariants)."""
    if STATIC_POOL not in sim.catalog.pools:
        return "no static pool"
    sim.catalog.sequence += 1
    request_id = f"static-{STATIC_POOL}-{sim.catalog.sequence}-0"
    via_bus = rng.random() < 0.3
    sim.send([{"requestId": request_id, "nodePool": STATIC_POOL, "count": 1}], via_bus=via_bus)
    sim.catalog.forged.append(request_id)
    return "bus" if via_bus else "sqs"


# Issue 39, before a Capacity Block ends: a static pool on the purchased blocks (the GPU type,
# reserved first, on-demand allowed: where an evacuation may go) whose capacityBlockEnd is drawn
# (Evacuate, Extend within a price that fits or not, None). Blocks are bought, activate and
# expire by the other operations and the clock; block_end_invariants.py judges it.
BLOCK_END_POOL, BLOCK_END_CLASS = "pool-static-blocks", "class-static-blocks"


def block_end_documents(
    sim: Simulation, replicas: int, policy: dict[str, Any]
) -> list[dict[str, Any]]:
    from tests.simulation.operations import BLOCK_TAG, GPU_TYPE

    node_class, pool = static_documents(sim, replicas, None)
    node_class["metadata"]["name"] = BLOCK_END_CLASS
    node_class["spec"]["capacityReservationSelectorTerms"] = [{"tags": BLOCK_TAG}]
    pool["metadata"]["name"] = BLOCK_END_POOL
    pool["spec"]["nodeClassRef"] = BLOCK_END_CLASS
    pool["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [GPU_TYPE]},
        {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": ["reserved", "on-demand"],
        },
    ]
    pool["spec"]["capacityBlockEnd"] = policy
    return [node_class, pool]


def apply_block_end_pool(sim: Simulation, rng: random.Random) -> str:
    """The block pool applied with replicas 0 to 3 and a drawn capacityBlockEnd."""
    replicas = rng.randint(0, 3)
    action = rng.choice(("Evacuate", "Extend", "Extend", "None"))
    policy: dict[str, Any] = {"action": action, "leadMinutes": rng.choice((60, 120, 240))}
    if action == "Extend":
        # The emulator's fee for a day of 1 to 3 p4d.24xlarge: ~790 USD an instance; 1 never fits
        policy["maxExtensionPrice"] = rng.choice(("1", "100000"))
    outcomes = [sim.apply(document) for document in block_end_documents(sim, replicas, policy)]
    return f"replicas {replicas}, {policy}: {', '.join(outcomes)}"


def jump_into_block_lead(sim: Simulation, rng: random.Random) -> str:
    """The clock to within 0 to 4 hours of an active block's end (where the block pool's lead
    begins), the queue drained first: activations and expiries come from `advance_clock`."""
    now = sim.world.now
    ends = sorted(
        view.end
        for view in sim.world.reservations().values()
        if view.kind == "capacity-block" and view.state == "active" and view.end is not None
    )
    ahead = [end - rng.uniform(0, 4 * 3600) for end in ends]
    ahead = [moment for moment in ahead if moment > now]
    if not ahead:
        return "no active block ahead"
    return sim.jump_to(rng.choice(ahead))


def evacuation_at_quiescence(sim: Simulation, rng: random.Random) -> str:
    """The clock to a minute inside the lead of an active block that holds the block pool's
    instances or an opted-in request's (the lead the pool's policy, or the opt-in pool's bound,
    says: a request asks none here), then a quiescence after this step: the evacuation its
    syncs carry out is judged (block_end_invariants.py, from the quiescence's start). A jump
    (`jump_into_block_lead`) lands anywhere in a block's last hours, and the evacuation it starts
    is mostly over, between two syncs of ordinary steps, before the next quiescence looks."""
    now = sim.world.now
    leads = _leads(sim)
    ends = {
        rid: view.end
        for rid, view in sim.world.reservations().items()
        if view.kind == "capacity-block" and view.state == "active" and view.end is not None
    }
    moments = sorted(
        ends[o.reservation_id] - lead + 60
        for o in sim.world.instances.values()
        if o.state in ("pending", "running") and o.reservation_id in ends
        and (lead := leads.get(o.pool)) is not None
    )  # fmt: skip
    ahead = [moment for moment in moments if moment > now]
    if not ahead:
        return "no evacuation ahead"
    jumped = sim.jump_to(rng.choice(ahead))
    sim.quiesce_after_step = True
    return f"{jumped}, then a quiescence"


def _leads(sim: Simulation) -> dict[str, float]:
    """The lead in seconds of each pool whose instances an evacuation may move: the block pool
    (Evacuate or Extend) and the opt-in pool (its bound's lead, else 120 minutes)."""
    leads: dict[str, float] = {}
    spec = sim.catalog.pools.get(BLOCK_END_POOL, {}).get("spec", {})
    policy = spec.get("capacityBlockEnd") or {}
    if spec.get("replicas") and policy.get("action", "Evacuate") != "None":
        leads[BLOCK_END_POOL] = 60.0 * int(policy.get("leadMinutes", 120))
    if OPT_IN_POOL in sim.catalog.pools:
        bound = sim.catalog.pools[OPT_IN_POOL].get("spec", {}).get("capacityBlockEnd") or {}
        if bound.get("action") != "None":
            leads[OPT_IN_POOL] = 60.0 * int(bound.get("leadMinutes", 120))
    return leads


# Issue 39, launch requests that opt in: a dynamic pool on the same blocks (reserved first,
# on-demand allowed) whose capacityBlockEnd (the bound on what its requests may ask) is drawn,
# and requests naming it with a drawn capacityBlockEnd; block_end_invariants.py judges them.
OPT_IN_POOL, OPT_IN_CLASS = "pool-block-requests", "class-block-requests"
POOL_BOUNDS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"action": "Evacuate"},
    {"action": "Extend", "maxExtensionPrice": "100000"},
    {"action": "Extend", "maxExtensionPrice": "1"},
    {"action": "None"},
)


def opt_in_documents(sim: Simulation, bound: dict[str, Any] | None) -> list[dict[str, Any]]:
    node_class, pool = block_end_documents(sim, 0, bound or {})
    node_class["metadata"]["name"] = pool["spec"]["nodeClassRef"] = OPT_IN_CLASS
    pool["metadata"]["name"] = OPT_IN_POOL
    del pool["spec"]["replicas"]
    if bound is None:
        del pool["spec"]["capacityBlockEnd"]
    return [node_class, pool]


def opted_in_request(sim: Simulation, rng: random.Random) -> str:
    """The opt-in pool applied (the first time, or again with another bound), then a request of
    1 or 2 naming it that opts in to Evacuate or Extend (Rejected when its pool's bound does
    not allow what it asks)."""
    applied = ""
    if OPT_IN_POOL not in sim.catalog.pools or rng.random() < 0.2:
        bound = rng.choice(POOL_BOUNDS)
        if bound is not None:
            bound = {**bound, "leadMinutes": rng.choice((60, 120, 240))}
        outcomes = [sim.apply(d) for d in opt_in_documents(sim, bound)]
        applied = f"pool {bound}: {', '.join(outcomes)}; "
    sim.catalog.sequence += 1
    request_id = f"optin-{sim.catalog.sequence}"
    ask = {"action": rng.choice(("Evacuate", "Evacuate", "Extend"))}
    body = {
        "requestId": request_id,
        "nodePool": OPT_IN_POOL,
        "count": rng.randint(1, 2),
        "capacityBlockEnd": ask,
    }
    sim.send([body], via_bus=False)
    sim.catalog.opted_in.append(request_id)
    return f"{applied}{request_id} asks {ask['action']}"


STATIC_OPERATIONS = {
    "opted_in_request": opted_in_request,
    "jump_into_block_lead": jump_into_block_lead,
    "evacuation_at_quiescence": evacuation_at_quiescence,
    "apply_static_pool": apply_static_pool,
    "forge_static_launch": forge_static_launch,
    "apply_block_end_pool": apply_block_end_pool,
}
# The block pool's operations are drawn by the block-end profile only (operations.py): the
# other profiles draw as before, so their seeds replay unchanged.
STATIC_WEIGHTS: dict[str, float] = {"apply_static_pool": 1, "forge_static_launch": 0.3}
