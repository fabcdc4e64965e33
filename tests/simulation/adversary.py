"""The cases issue 24 found where the newest features meet the core, drawn from the seed like every
other operation: quotas with group `limits` over several pools, quota and pool applies and deletes
racing submits, priority and preemption changed during a reclaim's grace period, huge ICE caches,
hostile bodies, transaction conflicts everywhere, bursts on one offering's single-flight claim,
interruptible reservations and their interruptions.

Their weights, and the defect each exposes, are in operations.py (`ADVERSARY_WEIGHTS`,
`AWAITING_FIXES`)."""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.settings import get_settings
from tests.simulation.operations import (
    POOLS,
    QUOTA_POOLS,
    QUOTAS,
    RESERVATION_TAG,
    ZONES,
    _document,
    node_pool_document,
    quota_document,
    request_body,
)
from tests.simulation.world import CONSISTENCY_SECONDS

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

BROAD_POOL = "pool-broad"
# A group limit over both quota pools, below the sum of the nominal quotas there (3 + 3).
GROUP_LIMITS = {"quota-a": "4", "quota-b": "3"}
POLICIES = ("Never", "LowerPriority", "Any")
PRIORITIES = (10, 50, 100, 150)
GRACE_PERIODS = ("30s", "90s", "3m")
NESTING = 5000
HUGE_BODY_BYTES = 240 * 1024  # under SQS's 256 KiB, far over what a request needs
ICE_CACHE_ENTRIES = (1500, 4000)
INTERRUPTIBLE_TYPE = "m5.large"


def quota_variant(name: str, rng: random.Random) -> dict[str, Any]:
    """The quota as at the start, with a drawn priority, reclaim policy and grace period."""
    document = quota_document(name)
    document["spec"]["priority"] = rng.choice(PRIORITIES)
    if document["spec"]["allowBorrowing"] or rng.random() < 0.7:
        document["spec"]["preemption"] = {
            "reclaimWithinCohort": rng.choice(POLICIES),
            "gracePeriod": rng.choice(GRACE_PERIODS),
        }
    return document


def _with_group_limit(sim: Simulation, name: str, on: bool) -> dict[str, Any]:
    """The quota as applied now, with its group limit over both pools set or taken away."""
    document = copy.deepcopy(sim.catalog.quotas.get(name) or quota_document(name))
    group = document["spec"]["resourceGroups"][0]
    group.pop("limits", None)
    if on:
        group["limits"] = {"instances": GROUP_LIMITS[name]}
    return document


def _apply_quota(sim: Simulation, document: dict[str, Any]) -> str:
    """Applied as an operator would: again after a transaction conflict."""
    outcome = sim.apply(document)
    return sim.apply(document) if outcome != "applied" else outcome


# -- quotas -------------------------------------------------------------------------------------


def quota_group_limits(sim: Simulation, rng: random.Random) -> str:
    """A group `limits` on instances summed over pool-1 and pool-3, set or taken away."""
    name = rng.choice(sorted(GROUP_LIMITS))
    on = rng.random() < 0.75
    applied = _apply_quota(sim, _with_group_limit(sim, name, on))
    return f"{name} {'limit' if on else 'no limit'}: {applied}"


def quota_policy_change(sim: Simulation, rng: random.Random) -> str:
    """Priority, reclaimWithinCohort and gracePeriod changed, often while a reclaim is open."""
    name = rng.choice(sorted(QUOTAS))
    variant = quota_variant(name, rng)
    limits = (sim.catalog.quotas.get(name) or {}).get("spec", {}).get("resourceGroups", [{}])
    if "limits" in limits[0]:
        variant["spec"]["resourceGroups"][0]["limits"] = limits[0]["limits"]
    preemption = variant["spec"].get("preemption", {})
    return (
        f"{name} priority {variant['spec']['priority']}"
        f" {preemption.get('reclaimWithinCohort', 'Never')}: {_apply_quota(sim, variant)}"
    )


def quota_apply_race(sim: Simulation, rng: random.Random) -> str:
    """A quota tightened (its group limit set), then at once a burst its requesters send."""
    name = rng.choice(sorted(GROUP_LIMITS))
    applied = _apply_quota(sim, _with_group_limit(sim, name, True))
    requester = QUOTAS[name][0][0]
    bodies = [_body_for(sim, rng, requester, rng.choice(QUOTA_POOLS)) for _ in range(4)]
    sim.send(bodies, via_bus=False)
    return f"{name} limit {applied}, 4 sent"


def quota_delete_race(sim: Simulation, rng: random.Random) -> str:
    """A quota deleted, its requesters' burst served meanwhile, the quota applied again."""
    name = rng.choice(sorted(QUOTAS))
    document = sim.catalog.quotas.get(name) or quota_document(name)
    deleted = sim.delete("CapacityQuota", name)
    requester = QUOTAS[name][0][0]
    sim.send(
        [_body_for(sim, rng, requester, rng.choice(QUOTA_POOLS)) for _ in range(3)], via_bus=False
    )
    sim.poll_once()
    return f"{name} {deleted}, then {_apply_quota(sim, document)}"


def _body_for(sim: Simulation, rng: random.Random, requester: str, pool: str) -> dict[str, Any]:
    body = request_body(sim, rng)
    body.update(requester=requester, nodePool=pool, count=rng.randint(1, 3))
    body.pop("minCount", None)
    return body


# -- pools --------------------------------------------------------------------------------------


def pool_apply_race(sim: Simulation, rng: random.Random) -> str:
    """A pool replaced (or deleted and applied again) and, at once, a burst naming it."""
    name = rng.choice(POOLS)
    outcome = "replaced"
    if rng.random() < 0.4:
        outcome = f"{sim.delete('NodePool', name)}, "
        sim.send([_body_for(sim, rng, rng.choice(("team-x", "ci")), name)], via_bus=False)
        sim.poll_once()
    outcome += sim.apply(node_pool_document(sim, name, rng))
    sim.send([_body_for(sim, rng, "team-x", name) for _ in range(3)], via_bus=rng.random() < 0.3)
    return outcome


# -- the ICE cache and single flight ------------------------------------------------------------


def broad_pool_document(sim: Simulation) -> dict[str, Any]:
    """A pool of every instance type the NodeClass's zones offer, on-demand."""
    return _document(
        "NodePool",
        BROAD_POOL,
        {
            "nodeClassRef": "class-open",
            "weight": 1,
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
            "limits": {"instances": "6"},
        },
    )


def huge_ice_cache(sim: Simulation, rng: random.Random) -> str:
    """Thousands of dry offerings cached (as many workers' ICE answers would leave them) for the
    broad pool's types, then a request to it."""
    if "class-open" not in sim.catalog.classes:
        return "no class-open"
    if BROAD_POOL not in sim.catalog.pools:
        sim.apply(broad_pool_document(sim))
    settings = get_settings()
    store = UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.unavailable_offerings_ttl_seconds,
        dynamodb=sim.world.dynamodb,
    )
    types = sim.world.all_instance_types()
    wanted = rng.randint(*ICE_CACHE_ENTRIES)
    triples = [
        (
            f"{t}:{z}:{c}",
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient capacity",
        )
        for t in types
        for z in ZONES
        for c in ("on-demand", "spot")
    ][:wanted]
    store.mark(triples)
    sim.send([{**request_body(sim, rng), "nodePool": BROAD_POOL, "count": 1}], via_bus=False)
    return f"{len(triples)} cached"


def ice_burst(sim: Simulation, rng: random.Random) -> str:
    """Many requests for one uncached on-demand offering at once, served by two containers
    together: each offering must be asked about once (single flight)."""
    pool = rng.choice([p for p in POOLS if p in sim.catalog.pools] or list(POOLS))
    bodies = [_body_for(sim, rng, "team-x", pool) for _ in range(rng.randint(6, 12))]
    sim.send(bodies, via_bus=False)
    sim.poll_at_once()
    return f"{len(bodies)} to {pool}"


def conflict_storm(sim: Simulation, rng: random.Random) -> str:
    """DynamoDB cancelling many transactions that touch an item another touched, for a while."""
    rate = rng.choice((0.3, 0.5, 0.8))
    sim.conflicts(rate, duration=rng.uniform(10.0, 90.0))
    return f"rate {rate}"


# -- hostile bodies -----------------------------------------------------------------------------


def nested_body(sim: Simulation, rng: random.Random) -> str:
    """A body nested thousands deep, with a valid requestId: it has a key, so a Rejected record."""
    sim.catalog.sequence += 1
    request_id = f"deep-{sim.seed}-{sim.catalog.sequence}"
    depth = rng.randint(NESTING // 2, NESTING)
    text = f'{{"requestId": "{request_id}", "count": 1, "tags": ' + '{"a": ' * depth + "1"
    text += "}" * depth + "}"
    sim.send_keyed(request_id, text)
    return f"depth {depth}"


def huge_body(sim: Simulation, rng: random.Random) -> str:
    """A body near SQS's limit with a valid requestId: a huge tag value, or a huge unknown field."""
    body = request_body(sim, rng)
    if rng.random() < 0.5:
        body["tags"] = {"notes": "x" * HUGE_BODY_BYTES}
    else:
        body["padding"] = ["y" * 1024] * (HUGE_BODY_BYTES // 1030)
    sim.send([body], via_bus=False)
    return "sent"


# -- interruptible reservations -----------------------------------------------------------------


def interruptible_reservation(sim: Simulation, rng: random.Random) -> str:
    """An ODCR lending part of itself as an interruptible reservation the selector class finds."""
    zone = rng.choice(ZONES)
    source = sim.world.ec2.create_capacity_reservation(
        InstanceType=INTERRUPTIBLE_TYPE,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=4,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]["CapacityReservationId"]
    sim.world.emulator.clock.advance(CONSISTENCY_SECONDS + 1)  # the source must be active
    sim.world.emulator.settle()
    sim.world.ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source,
        InstanceCount=rng.randint(1, 3),
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in RESERVATION_TAG.items()],
            }
        ],
    )
    sim.catalog.interruptible_sources.append(source)
    return f"from {source}"


def interrupt(sim: Simulation, rng: random.Random) -> str:
    """The owner takes its lent capacity back: a warning, then the instances beyond it end."""
    if not sim.catalog.interruptible_sources:
        return "none"
    source = rng.choice(sim.catalog.interruptible_sources)
    sim.world.ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, TargetInstanceCount=rng.randint(0, 1)
    )
    return "interrupted"


ADVERSARY = {
    "quota_group_limits": quota_group_limits,
    "quota_policy_change": quota_policy_change,
    "quota_apply_race": quota_apply_race,
    "quota_delete_race": quota_delete_race,
    "pool_apply_race": pool_apply_race,
    "huge_ice_cache": huge_ice_cache,
    "ice_burst": ice_burst,
    "conflict_storm": conflict_storm,
    "nested_body": nested_body,
    "huge_body": huge_body,
    "interruptible_reservation": interruptible_reservation,
    "interrupt": interrupt,
}
